package claude

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"syscall"
	"time"

	"github.com/clawconnect/clawconnect/internal/terminal/native"
)

// notInTranscripts are the permission bits a transcript must not have:
// Claude Code writes them owner-only.
const notInTranscripts = 0o077

// MaxScan is the most bytes a transcript scan reads after its anchor.
const MaxScan = 64 << 20

// ErrNotIdle is returned by CaptureAnchor when the live session is not
// idle: a request sent now would queue behind the running turn.
var ErrNotIdle = errors.New("claude code session is not idle")

// Anchor marks where in a session's transcript a request's evidence may
// start. It is a plain value meant to be persisted with the Turn (JSON).
type Anchor struct {
	// SessionID and Cwd are the live session's; records after the anchor
	// must carry them.
	SessionID string `json:"session_id"`
	Cwd       string `json:"cwd"`
	// PID and StartedAtMs fence the process incarnation.
	PID         int   `json:"pid"`
	StartedAtMs int64 `json:"agent_started_at_ms"`
	// Path is the transcript's path.
	Path string `json:"path"`
	// FileExisted reports that the transcript existed at capture; when
	// false, Offset is 0 and Dev/Ino are zero until Materialize.
	FileExisted bool `json:"file_existed"`
	// Dev and Ino identify the transcript once it exists.
	Dev uint64 `json:"device,omitempty"`
	Ino uint64 `json:"inode,omitempty"`
	// Offset is the byte offset scans start at, just after a '\n' (or 0).
	Offset int64 `json:"offset_bytes"`
	// CapturedAt is when the anchor was taken.
	CapturedAt time.Time `json:"captured_at"`
}

// Fingerprint is the lowercase hex SHA-256 of the anchor's JSON.
func (a Anchor) Fingerprint() string {
	data, _ := json.Marshal(a) // plain fields always marshal
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// pinned reports whether the anchor names the transcript's identity.
func (a Anchor) pinned() bool { return a.Dev != 0 || a.Ino != 0 }

// CaptureAnchor anchors at the current end of s's transcript under
// configDir. The session must be idle (ErrNotIdle otherwise; a registry
// without a status counts as idle). A transcript that does not exist yet
// (a session before its first prompt) gives an anchor at offset 0 that
// Materialize pins once it appears. The transcript must be a regular file,
// not a symbolic link, owned by this user and readable by it alone, ending
// with '\n'.
func CaptureAnchor(configDir string, s LiveSession, now time.Time) (Anchor, error) {
	if s.Status != "" && s.Status != StatusIdle {
		return Anchor{}, fmt.Errorf("capture claude anchor: %w (status %q)", ErrNotIdle, s.Status)
	}
	return capture(configDir, s, now)
}

// CaptureEnd is CaptureAnchor whatever the session's status: the current
// end of a transcript that a running turn may be writing, the point
// ActiveTaskAnchor reads back from. Nothing may be sent from it.
func CaptureEnd(configDir string, s LiveSession, now time.Time) (Anchor, error) {
	return capture(configDir, s, now)
}

// capture anchors at the current end of s's transcript.
func capture(configDir string, s LiveSession, now time.Time) (Anchor, error) {
	a := Anchor{SessionID: s.SessionID, Cwd: s.Cwd, PID: s.PID, StartedAtMs: s.StartedAtMs,
		Path: TranscriptPath(configDir, s.Cwd, s.SessionID), CapturedAt: now.UTC()}
	f, err := native.OpenOwned(a.Path, notInTranscripts)
	if errors.Is(err, fs.ErrNotExist) {
		return a, nil
	}
	if err != nil {
		return Anchor{}, fmt.Errorf("capture claude anchor: %s: %w", a.Path, err)
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return Anchor{}, fmt.Errorf("capture claude anchor: %w", err)
	}
	if st.Size > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, st.Size-1); err != nil {
			return Anchor{}, fmt.Errorf("capture claude anchor: %w", err)
		}
		if last[0] != '\n' {
			return Anchor{}, fmt.Errorf("capture claude anchor: %s ends in a partial line (Claude Code is writing); retry", a.Path)
		}
	}
	a.FileExisted, a.Dev, a.Ino, a.Offset = true, uint64(st.Dev), st.Ino, st.Size
	return a, nil
}

// Materialize pins an anchor taken before the transcript existed to the
// file now at its path (scans start at 0). It returns the anchor unchanged
// when it is already pinned, and an error wrapping fs.ErrNotExist when the
// transcript still does not exist.
func (a Anchor) Materialize() (Anchor, error) {
	if a.pinned() {
		return a, nil
	}
	f, err := native.OpenOwned(a.Path, notInTranscripts)
	if err != nil {
		return Anchor{}, fmt.Errorf("materialize claude anchor: %w", err)
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return Anchor{}, fmt.Errorf("materialize claude anchor: %w", err)
	}
	a.Dev, a.Ino, a.Offset = uint64(st.Dev), st.Ino, 0
	return a, nil
}

// window is the complete lines of a transcript after an anchor.
type window struct {
	data    []byte
	partial bool
	end     int64 // offset just after data
	size    int64 // the file's size when read (end plus a partial line)
}

// readWindow reads [a.Offset, size) of the anchored transcript. An anchor
// taken before the file existed reads whatever file is at the path from 0
// (pending CodeNotMaterialized while there is none).
func readWindow(a Anchor) (window, bool, error) {
	if a.Path == "" || a.Offset < 0 || a.SessionID == "" {
		return window{}, false, native.Failf(native.CodeInvalidAnchor, a.Path, "anchor session %q path %q offset %d is malformed", a.SessionID, a.Path, a.Offset)
	}
	f, err := native.OpenOwned(a.Path, notInTranscripts)
	if errors.Is(err, fs.ErrNotExist) && !a.pinned() {
		return window{}, false, nil
	}
	if err != nil {
		return window{}, false, native.Failf(native.CodeUnreadable, a.Path, "%v", err)
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return window{}, false, native.Failf(native.CodeUnreadable, a.Path, "%v", err)
	}
	if a.pinned() && (uint64(st.Dev) != a.Dev || st.Ino != a.Ino) {
		return window{}, false, native.Failf(native.CodeIdentityMismatch, a.Path, "the file at the path is device/inode %d/%d, the anchor's is %d/%d (replaced)", st.Dev, st.Ino, a.Dev, a.Ino)
	}
	if st.Size < a.Offset {
		return window{}, false, native.Failf(native.CodeTruncated, a.Path, "the file is %d bytes, shorter than the anchor offset %d", st.Size, a.Offset)
	}
	n := st.Size - a.Offset
	if n > MaxScan {
		return window{}, false, native.Failf(native.CodeScanLimit, a.Path, "%d bytes after the anchor, more than the %d a scan reads", n, MaxScan)
	}
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, a.Offset); err != nil && err != io.EOF {
		return window{}, false, native.Failf(native.CodeUnreadable, a.Path, "%v", err)
	}
	return windowOf(buf, a.Offset), true, nil
}

// windowOf cuts buf, the bytes from offset on, to its complete lines.
func windowOf(buf []byte, offset int64) window {
	cut := 0
	for i := len(buf) - 1; i >= 0; i-- {
		if buf[i] == '\n' {
			cut = i + 1
			break
		}
	}
	return window{data: buf[:cut], partial: cut < len(buf), end: offset + int64(cut), size: offset + int64(len(buf))}
}
