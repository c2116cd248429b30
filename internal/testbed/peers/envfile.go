package peers

import (
	"os"
	"path/filepath"
)

// WriteEnvFile writes the env file a testbed command leaves in the cache
// for the README's commands to source: owner-only (it may hold a gateway
// token), through a temporary file and a rename, so a reader never sees
// half a file.
func WriteEnvFile(path, data string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".env-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
