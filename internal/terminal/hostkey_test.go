package terminal

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestLoadHostKeyOnceForAll: processes of one host starting together get
// one key, never a part of it; the file is its owner's only; a damaged
// key is refused with what to do.
func TestLoadHostKeyOnceForAll(t *testing.T) {
	dir := t.TempDir()
	keys := make([][]byte, 16)
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() { keys[i], errs[i] = LoadHostKey(dir) })
	}
	wg.Wait()
	for i := range keys {
		if errs[i] != nil || len(keys[i]) != 32 || !bytes.Equal(keys[i], keys[0]) {
			t.Fatalf("caller %d got %x, %v; caller 0 got %x", i, keys[i], errs[i], keys[0])
		}
	}
	path := filepath.Join(dir, HostKeyFile)
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, %v; want mode 0600", fi, err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, HostKeyFile+".*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	if err := os.WriteFile(path, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadHostKey(dir); err == nil || !strings.Contains(err.Error(), "remove it") {
		t.Fatalf("a 5-byte key: %v, want an error saying to remove it", err)
	}
}
