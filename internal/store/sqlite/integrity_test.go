package sqlite_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	"github.com/clawconnect/clawconnect/internal/store/storetest"
)

// fillStore creates a store at path with enough tasks to span many pages
// and returns the page number of the tasks table's root and the page size.
func fillStore(t *testing.T, path string) (root, pageSize int64) {
	t.Helper()
	s, err := sqlite.Open(t.Context(), sqlite.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 300 {
		task := storetest.Task(fmt.Sprintf("t%03d", i), "main", fmt.Sprintf("k%03d", i), int64(i+1))
		task.Message = strings.Repeat("x", 300)
		if err := s.CreateTask(t.Context(), task); err != nil {
			t.Fatal(err)
		}
	}
	db := s.Writer()
	if err := db.QueryRow(`SELECT rootpage FROM sqlite_master WHERE name = 'tasks'`).Scan(&root); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`PRAGMA page_size`).Scan(&pageSize); err != nil {
		t.Fatal(err)
	}
	return root, pageSize
}

// corruptPage overwrites one page of the file with garbage, as a torn write
// or a bad disk would.
func corruptPage(t *testing.T, path string, page, pageSize int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xA5}, int(pageSize)), (page-1)*pageSize); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestOpenRefusesCorruptStore is issue 11 item 7: a page corrupted while
// the store was not open is found when it is opened again; Open refuses
// to use it, says how to recover, and leaves the file byte for byte as it
// was. CheckIntegrity finds it too, also beside an owner that holds it.
func TestOpenRefusesCorruptStore(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), sqlite.FileName)
	root, pageSize := fillStore(t, path)
	if err := sqlite.CheckIntegrity(t.Context(), path); err != nil {
		t.Fatalf("healthy store: %v", err)
	}
	corruptPage(t, path, root, pageSize)
	before := readFile(t, path)

	_, err := sqlite.Open(t.Context(), sqlite.Options{Path: path})
	if !errors.Is(err, sqlite.ErrCorrupt) || !errors.Is(err, store.ErrIncompatible) {
		t.Fatalf("Open of a corrupt store = %v, want ErrCorrupt", err)
	}
	for _, want := range []string{"integrity", "untouched", ".recover", path} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if !bytes.Equal(before, readFile(t, path)) {
		t.Fatal("Open modified the corrupt file")
	}
	if err := sqlite.CheckIntegrity(t.Context(), path); !errors.Is(err, sqlite.ErrCorrupt) {
		t.Fatalf("CheckIntegrity = %v, want ErrCorrupt", err)
	}
	if !bytes.Equal(before, readFile(t, path)) {
		t.Fatal("CheckIntegrity modified the corrupt file")
	}
}

// TestCheckIntegrityBesideOwner: pages corrupted while a process holds the
// store are found by a read-only check from another process (doctor).
func TestCheckIntegrityBesideOwner(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), sqlite.FileName)
	root, pageSize := fillStore(t, path)
	owner := open(t, path)
	if err := owner.CreateTask(t.Context(), storetest.Task("live", "main", "k-live", 1)); err != nil {
		t.Fatal(err)
	}
	if err := sqlite.CheckIntegrity(t.Context(), path); err != nil {
		t.Fatalf("healthy store beside its owner: %v", err)
	}
	corruptPage(t, path, root, pageSize)
	if err := sqlite.CheckIntegrity(t.Context(), path); !errors.Is(err, sqlite.ErrCorrupt) {
		t.Fatalf("CheckIntegrity beside the owner = %v, want ErrCorrupt", err)
	}
}

// TestOpenRefusesReplacedStore is issue 11 item 7 (empty file): a store
// truncated to zero bytes is not silently a fresh store when its change
// signal or write-ahead log shows one was in use; without such evidence an empty
// file is still a fresh store.
func TestOpenRefusesReplacedStore(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		prepare func(t *testing.T, path string)
		refused bool
	}{
		{"change signal of an earlier store", func(t *testing.T, path string) {
			fillStore(t, path)
			if err := os.Truncate(path, 0); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"non-empty write-ahead log", func(t *testing.T, path string) {
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path+"-wal", bytes.Repeat([]byte{1}, 4096), 0o600); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"empty file, no evidence", func(t *testing.T, path string) {
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), sqlite.FileName)
			tt.prepare(t, path)
			s, err := sqlite.Open(t.Context(), sqlite.Options{Path: path})
			if !tt.refused {
				if err != nil {
					t.Fatalf("Open of a fresh empty file: %v", err)
				}
				_ = s.Close()
				return
			}
			if !errors.Is(err, sqlite.ErrCorrupt) || !strings.Contains(err.Error(), "truncated or replaced") {
				t.Fatalf("Open = %v, want ErrCorrupt naming the evidence", err)
			}
			if st, err := os.Stat(path); err != nil || st.Size() != 0 {
				t.Fatalf("the empty file was written: %v %v", st, err)
			}
		})
	}
}
