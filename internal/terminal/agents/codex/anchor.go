package codex

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/clawconnect/clawconnect/internal/terminal/native"
)

// AnchorMode says whether the rollout existed when the anchor was taken.
type AnchorMode string

// The anchor modes.
const (
	// Existing: the rollout existed; Offset is its size at capture.
	Existing AnchorMode = "existing"
	// PreMaterialization: the process had no rollout yet (a virgin TUI);
	// the rollout its first prompt creates is bound with Anchor.Bind.
	PreMaterialization AnchorMode = "pre_materialization"
)

// Anchor marks where in a rollout a request's evidence may start: nothing
// before Offset can accept or complete it. Anchors are plain values meant
// to be persisted with the Turn (JSON).
type Anchor struct {
	// Mode says whether the rollout existed at capture.
	Mode AnchorMode `json:"mode"`
	// ThreadID is the rollout's thread; "" for a virgin anchor until Bind.
	ThreadID string `json:"native_thread_id,omitempty"`
	// Path, Dev and Ino identify the rollout; empty for an unbound virgin
	// anchor.
	Path string `json:"path,omitempty"`
	Dev  uint64 `json:"device,omitempty"`
	Ino  uint64 `json:"inode,omitempty"`
	// Offset is the byte offset scans start at, always just after a '\n'
	// (or 0).
	Offset int64 `json:"offset_bytes"`
	// FileExisted reports that the rollout existed at capture.
	FileExisted bool `json:"file_existed"`
	// CapturedAt is when the anchor was taken; a rollout bound to a virgin
	// anchor must have started no earlier.
	CapturedAt time.Time `json:"captured_at"`
}

// Fingerprint is the lowercase hex SHA-256 of the anchor's JSON.
func (a Anchor) Fingerprint() string {
	data, _ := json.Marshal(a) // plain fields always marshal
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// Bound reports whether the anchor names a rollout file.
func (a Anchor) Bound() bool { return a.Path != "" }

// CaptureAnchor anchors at the current end of r: it opens the rollout
// (refusing a symbolic link, another file at the path, or a file not owned
// by this user alone), and requires that it ends with '\n' and did not grow
// while it was checked. A rollout ending in a partial line means Codex is
// writing; try again a moment later.
func CaptureAnchor(r Rollout, now time.Time) (Anchor, error) {
	f, err := native.OpenOwned(r.Path, notInRollouts)
	if err != nil {
		return Anchor{}, fmt.Errorf("capture codex anchor: %s: %w", r.Path, err)
	}
	defer f.Close()
	dev, ino, err := fileID(f)
	if err != nil {
		return Anchor{}, fmt.Errorf("capture codex anchor: %w", err)
	}
	if dev != r.Dev || ino != r.Ino {
		return Anchor{}, fmt.Errorf("capture codex anchor: %s was replaced since the inventory", r.Path)
	}
	size1, err := fileSize(f)
	if err != nil {
		return Anchor{}, fmt.Errorf("capture codex anchor: %w", err)
	}
	if size1 == 0 {
		return Anchor{}, fmt.Errorf("capture codex anchor: %s is empty", r.Path)
	}
	last := make([]byte, 1)
	if _, err := f.ReadAt(last, size1-1); err != nil {
		return Anchor{}, fmt.Errorf("capture codex anchor: %w", err)
	}
	if last[0] != '\n' {
		return Anchor{}, fmt.Errorf("capture codex anchor: %s ends in a partial line (Codex is writing); retry", r.Path)
	}
	size2, err := fileSize(f)
	if err != nil {
		return Anchor{}, fmt.Errorf("capture codex anchor: %w", err)
	}
	if size2 != size1 {
		return Anchor{}, fmt.Errorf("capture codex anchor: %s grew while it was checked (Codex is writing); retry", r.Path)
	}
	return Anchor{Mode: Existing, ThreadID: r.ThreadID, Path: r.Path, Dev: dev, Ino: ino,
		Offset: size1, FileExisted: true, CapturedAt: now.UTC()}, nil
}

// VirginAnchor is the anchor of a process that holds no rollout yet
// (inventory VerifiedAbsent): the first prompt creates the rollout, which
// Bind attaches once an inventory resolves it.
func VirginAnchor(now time.Time) Anchor {
	return Anchor{Mode: PreMaterialization, CapturedAt: now.UTC()}
}

// Bind attaches a virgin anchor to the rollout the process opened after
// the request was sent: the rollout's session_meta record was written no
// earlier than the anchor was taken (to the millisecond, the precision Codex
// records), and scans start at its beginning. Binding an anchor that is already bound is an error.
func (a Anchor) Bind(r Rollout) (Anchor, error) {
	if a.Mode != PreMaterialization || a.Bound() {
		return Anchor{}, fmt.Errorf("bind codex anchor: only an unbound pre-materialization anchor can be bound")
	}
	if a.ThreadID != "" && a.ThreadID != r.ThreadID {
		return Anchor{}, fmt.Errorf("bind codex anchor: rollout thread %s is not the anchored thread %s", r.ThreadID, a.ThreadID)
	}
	if r.Meta.RecordedAt.IsZero() || r.Meta.RecordedAt.Before(a.CapturedAt.Truncate(time.Millisecond)) {
		return Anchor{}, fmt.Errorf("bind codex anchor: rollout %s was created at %s, before the anchor (%s): it is not the new thread", r.Path, r.Meta.RecordedAt.Format(time.RFC3339Nano), a.CapturedAt.Format(time.RFC3339Nano))
	}
	a.ThreadID, a.Path, a.Dev, a.Ino, a.Offset = r.ThreadID, r.Path, r.Dev, r.Ino, 0
	return a, nil
}

func fileSize(f *os.File) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// window is the complete lines of a rollout after an anchor.
type window struct {
	data    []byte // complete lines only
	partial bool   // bytes after the last '\n'
	end     int64  // offset just after data
}

// readWindow opens the anchored rollout, checks its identity, and reads
// [a.Offset, size) up to limit bytes.
func readWindow(a Anchor, limit int64) (window, error) {
	return readWindowFrom(a, a.Offset, limit)
}

// readAt reads the window's bytes; tests count them through it.
var readAt = (*os.File).ReadAt

// readWindowFrom is readWindow resumed at from (at or after a.Offset, a
// complete-line boundary an earlier read reached): it reads only
// [from, size), but the limit still counts from a.Offset, as a read from
// the anchor would. A file shorter than from lost bytes already read, and
// is truncated even when it still reaches a.Offset.
func readWindowFrom(a Anchor, from, limit int64) (window, error) {
	if a.Path == "" || a.Offset < 0 || (a.Mode != Existing && a.Mode != PreMaterialization) {
		return window{}, native.Failf(native.CodeInvalidAnchor, a.Path, "anchor mode %q path %q offset %d is malformed", a.Mode, a.Path, a.Offset)
	}
	f, err := native.OpenOwned(a.Path, notInRollouts)
	if err != nil {
		return window{}, native.Failf(native.CodeUnreadable, a.Path, "%v", err)
	}
	defer f.Close()
	dev, ino, err := fileID(f)
	if err != nil {
		return window{}, native.Failf(native.CodeUnreadable, a.Path, "%v", err)
	}
	if dev != a.Dev || ino != a.Ino {
		return window{}, native.Failf(native.CodeIdentityMismatch, a.Path, "the file at the path is device/inode %d/%d, the anchor's is %d/%d (replaced)", dev, ino, a.Dev, a.Ino)
	}
	size, err := fileSize(f)
	if err != nil {
		return window{}, native.Failf(native.CodeUnreadable, a.Path, "%v", err)
	}
	if size < a.Offset {
		return window{}, native.Failf(native.CodeTruncated, a.Path, "the file is %d bytes, shorter than the anchor offset %d", size, a.Offset)
	}
	if size < from {
		return window{}, native.Failf(native.CodeTruncated, a.Path, "the file is %d bytes, shorter than the %d already read", size, from)
	}
	if n := size - a.Offset; n > limit {
		return window{}, native.Failf(native.CodeScanLimit, a.Path, "%d bytes after the anchor, more than the %d a scan reads", n, limit)
	}
	buf := make([]byte, size-from)
	if _, err := readAt(f, buf, from); err != nil && err != io.EOF {
		return window{}, native.Failf(native.CodeUnreadable, a.Path, "%v", err)
	}
	return windowOf(buf, from), nil
}

// windowOf cuts buf, the bytes from offset on, to its complete lines.
func windowOf(buf []byte, offset int64) window {
	cut := lastNewline(buf)
	return window{data: buf[:cut], partial: cut < len(buf), end: offset + int64(cut)}
}

func lastNewline(b []byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == '\n' {
			return i + 1
		}
	}
	return 0
}
