package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// binDir holds the module binary built once for the end-to-end tests.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "local-tmux-runtime-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	if err := goleak.Find(); code == 0 && err != nil {
		fmt.Fprintln(os.Stderr, "goleak:", err)
		code = 1
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	buildErr  error
	buildOut  []byte
)

// moduleBinary builds the example once per test run and returns its path.
func moduleBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(binDir, "local-tmux-runtime")
	buildOnce.Do(func() {
		buildOut, buildErr = exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("go build: %v\n%s", buildErr, buildOut)
	}
	return bin
}
