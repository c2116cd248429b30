package native

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestScanFromLongLines reads a line longer than the reader's buffer
// whole, and stops for good at a line longer than MaxLine instead of
// holding it.
func TestScanFromLongLines(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "session.jsonl")
	long := `{"pad":"` + strings.Repeat("x", 200<<10) + `","hit":true}` + "\n"
	if err := os.WriteFile(path, []byte("{}\n"+long), 0o600); err != nil {
		t.Fatal(err)
	}
	var seen []int
	hit := func(line []byte, _ int64) (bool, error) {
		seen = append(seen, len(line))
		return bytes.HasSuffix(line, []byte(`"hit":true}`)), nil
	}
	c, err := ScanFrom(path, 0o022, Cursor{}, hit)
	if err != nil || !c.Found || c.Offset != int64(3+len(long)) || len(seen) != 2 || seen[1] != len(long)-1 {
		t.Fatalf("%+v, %v, lines %v; want the long line found whole", c, err, seen)
	}

	huge := filepath.Join(t.TempDir(), "session.jsonl")
	if err := os.WriteFile(huge, []byte("{}\n{\""+strings.Repeat("y", MaxLine)+"\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err = ScanFrom(huge, 0o022, Cursor{}, func([]byte, int64) (bool, error) { return false, nil })
	var se *ScanError
	if !errors.As(err, &se) || se.Code != CodeScanLimit || c.Err == nil || c.Offset != 3 {
		t.Fatalf("%+v, %v; want a final scan limit after the first line", c, err)
	}
	if _, again := ScanFrom(huge, 0o022, c, nil); again != c.Err {
		t.Fatalf("a final failure is returned again without reading: %v", again)
	}
}
