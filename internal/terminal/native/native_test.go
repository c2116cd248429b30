package native

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestClip(t *testing.T) {
	t.Parallel()
	short := strings.Repeat("ü", MaxText)
	if got, cut := Clip(short); got != short || cut {
		t.Errorf("Clip of exactly MaxText characters cut it")
	}
	got, cut := Clip(short + "xyz")
	if got != short || !cut {
		t.Errorf("Clip kept %d characters, cut=%v", len([]rune(got)), cut)
	}
}

func TestScanError(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("monitor: %w", Failf(CodeTruncated, "/r.jsonl", "%d < %d", 1, 2))
	var se *ScanError
	if !errors.As(err, &se) || se.Code != CodeTruncated || !errors.Is(err, ErrScan) {
		t.Fatalf("%v does not unwrap to its ScanError", err)
	}
	if want := "monitor: rollout_truncated: /r.jsonl: 1 < 2"; err.Error() != want {
		t.Errorf("%q, want %q", err.Error(), want)
	}
}
