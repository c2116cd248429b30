package claude

import "github.com/clawconnect/clawconnect/internal/terminal/native"

// ScanAcceptanceBytes is ScanAcceptance on tail, the bytes after the
// anchor, without the file (for the fuzz target).
func ScanAcceptanceBytes(a Anchor, tail []byte, request string) (native.Acceptance, error) {
	return acceptance(a, windowOf(tail, a.Offset), request)
}

// ScanCompletionBytes is ScanCompletion on tail, the bytes after the
// anchor, without the file (for the fuzz target).
func ScanCompletionBytes(a Anchor, tail []byte, promptUUID string) (native.Completion, error) {
	return completion(a, windowOf(tail, a.Offset), promptUUID)
}

// ActiveTaskBytes is ActiveTaskAnchor on data, a whole transcript from
// offset 0, without the file (for the fuzz target).
func ActiveTaskBytes(end Anchor, data []byte) (Anchor, string, error) {
	return activeTask(end, windowOf(data, 0), 0)
}

// PendingApprovalBytes is PendingApproval on tail, the bytes after the
// anchor, without the file (for the fuzz target).
func PendingApprovalBytes(a Anchor, tail []byte, promptUUID string) (*BashApproval, error) {
	return pendingApproval(a, windowOf(tail, a.Offset), promptUUID)
}
