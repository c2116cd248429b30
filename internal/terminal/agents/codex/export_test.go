package codex

import "github.com/clawconnect/clawconnect/internal/terminal/native"

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
