package proc

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
)

// Getenv returns the value of name in pid's environment as the process
// started with it ("" if unset or unreadable).
func Getenv(pid int, name string) string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	if err != nil {
		return ""
	}
	prefix := []byte(name + "=")
	for kv := range bytes.SplitSeq(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, prefix); ok {
			return string(v)
		}
	}
	return ""
}

// Home returns pid's $HOME, or this process's when pid's cannot be read:
// where an agent keeps its files by default.
func Home(pid int) string {
	if h := Getenv(pid, "HOME"); h != "" {
		return h
	}
	h, _ := os.UserHomeDir()
	return h
}
