package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	"github.com/clawconnect/clawconnect/internal/store/storetest"
)

// TestDoctorFindsCorruptStore is issue 11 item 7 (doctor): a store whose
// pages were corrupted fails doctor's store check, whether or not a
// running process owns the file, and the file is left byte for byte.
func TestDoctorFindsCorruptStore(t *testing.T) {
	for _, owned := range []bool{false, true} {
		name := "closed"
		if owned {
			name = "owned by a running process"
		}
		t.Run(name, func(t *testing.T) {
			home := t.TempDir()
			path := filepath.Join(home, sqlite.FileName)
			s, err := sqlite.Open(t.Context(), sqlite.Options{Path: path})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 300 {
				task := storetest.Task(fmt.Sprintf("t%03d", i), "main", fmt.Sprintf("k%03d", i), int64(i+1))
				task.Message = strings.Repeat("x", 300)
				if err := s.CreateTask(t.Context(), task); err != nil {
					t.Fatal(err)
				}
			}
			var root, pageSize int64
			if err := s.Writer().QueryRow(`SELECT rootpage FROM sqlite_master WHERE name = 'tasks'`).Scan(&root); err != nil {
				t.Fatal(err)
			}
			if err := s.Writer().QueryRow(`PRAGMA page_size`).Scan(&pageSize); err != nil {
				t.Fatal(err)
			}
			if owned {
				// The owner keeps running; its pages are checkpointed into
				// the file, as SQLite does on its own every 1000 pages.
				if _, err := s.Writer().Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = s.Close() })
			} else {
				_ = s.Close()
			}
			env := map[string]string{"CLAWCONNECT_HOME": home}
			if out, _, _ := runCLIEnv(t, env, "doctor", "--timeout", "1s"); !strings.Contains(out, "[ok]   store") {
				t.Fatalf("healthy store not ok:\n%s", out)
			}
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt(bytes.Repeat([]byte{0xA5}, int(pageSize)), (root-1)*pageSize); err != nil {
				t.Fatal(err)
			}
			f.Close()
			before, _ := os.ReadFile(path)
			out, _, err := runCLIEnv(t, env, "doctor", "--timeout", "1s")
			if err == nil || !strings.Contains(out, "[FAIL] store") || !strings.Contains(out, "integrity") {
				t.Fatalf("doctor on a corrupt store = %v:\n%s", err, out)
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
				t.Fatal("doctor modified the corrupt file")
			}
		})
	}
}

// TestDoctorSaysWhyModulesFailed is issue 11 item 12: when no runtime
// module registers a runtime, doctor says why (the load error and what the
// module wrote on stderr), not only that nothing registered.
func TestDoctorSaysWhyModulesFailed(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "broken-module")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho 'broken-module: MY_RUNTIME_KEY is not set' >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"CLAWCONNECT_HOME": t.TempDir(),
		"CLAWCONNECT_AGENT_SESSION_RUNTIME_MODULES": script + "," + filepath.Join(dir, "missing-module")}
	out, _, _ := runCLIEnv(t, env, "doctor", "--timeout", "1s")
	var line string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "runtimes") {
			line = l
			break
		}
	}
	for _, want := range []string{"[FAIL]", "no module registered a runtime", "MY_RUNTIME_KEY is not set", "missing-module", "broken-module"} {
		if !strings.Contains(line, want) {
			t.Errorf("runtimes verdict lacks %q:\n%s", want, line)
		}
	}
}
