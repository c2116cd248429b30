package codex

import (
	"os"
	"sync/atomic"

	"github.com/clawconnect/clawconnect/internal/terminal/native"
)

// ScanAcceptanceBytes is ScanAcceptance on tail, the bytes after the
// anchor, without the file (for the fuzz target).
func ScanAcceptanceBytes(a Anchor, tail []byte, requestHash string) (native.Acceptance, error) {
	return acceptance(a, windowOf(tail, a.Offset), requestHash)
}

// ScanCompletionBytes is ScanCompletion on tail, the bytes after the
// anchor, without the file (for the fuzz target).
func ScanCompletionBytes(a Anchor, tail []byte, turnID string) (native.Completion, error) {
	return completion(a, windowOf(tail, a.Offset), turnID)
}

// CountReads adds the bytes of every window read to n until the returned
// func restores the plain reader. Tests that use it must not run in
// parallel with other scans.
func CountReads(n *atomic.Int64) (restore func()) {
	old := readAt
	readAt = func(f *os.File, b []byte, off int64) (int, error) {
		n.Add(int64(len(b)))
		return old(f, b, off)
	}
	return func() { readAt = old }
}
