package sqlite_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	"github.com/clawconnect/clawconnect/internal/store/storetest"
)

func open(t *testing.T, path string) store.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), sqlite.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, filepath.Join(t.TempDir(), sqlite.FileName))
	})
}

func TestReopenKeepsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", sqlite.FileName)
	s, err := sqlite.Open(t.Context(), sqlite.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTask(t.Context(), storetest.Task("t1", "main", "k", 1)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	s2 := open(t, path)
	if _, err := s2.GetTask(t.Context(), "main", "t1"); err != nil {
		t.Fatalf("task lost across reopen: %v", err)
	}
}

func TestSecondOwnerRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), sqlite.FileName)
	open(t, path)
	_, err := sqlite.Open(t.Context(), sqlite.Options{Path: path})
	if !errors.Is(err, store.ErrLocked) || !strings.Contains(err.Error(), "single-process") {
		t.Fatalf("second Open = %v, want ErrLocked with a clear message", err)
	}
}

func TestRefusesForeignOrCorruptFiles(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, path string)
	}{
		{"not sqlite", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("important notes, not a database\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"foreign tables", func(t *testing.T, path string) {
			s, err := sqlite.Open(t.Context(), sqlite.Options{Path: path})
			if err != nil {
				t.Fatal(err)
			}
			db := s.Writer()
			for _, q := range []string{`DROP TABLE clawconnect_meta`, `CREATE TABLE invoices (id INTEGER)`} {
				if _, err := db.Exec(q); err != nil {
					t.Fatal(err)
				}
			}
			_ = s.Close()
		}},
		{"newer schema", func(t *testing.T, path string) {
			s, err := sqlite.Open(t.Context(), sqlite.Options{Path: path})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Writer().Exec(`UPDATE clawconnect_meta SET value = '999' WHERE key = 'schema_version'`); err != nil {
				t.Fatal(err)
			}
			_ = s.Close()
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), sqlite.FileName)
			tc.prepare(t, path)
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			_, err = sqlite.Open(t.Context(), sqlite.Options{Path: path})
			if !errors.Is(err, store.ErrIncompatible) {
				t.Fatalf("Open = %v, want ErrIncompatible", err)
			}
			after, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(before) != string(after) {
				t.Fatal("the refused file was modified")
			}
		})
	}
}
