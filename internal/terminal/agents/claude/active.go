package claude

import (
	"bytes"

	"github.com/clawconnect/clawconnect/internal/terminal/native"
)

// MaxActiveTaskScan is the most bytes ActiveTaskAnchor reads back from the
// end of a transcript for the prompt of the task that runs.
const MaxActiveTaskScan = 8 << 20

// ActiveTaskAnchor moves end, an anchor at the current end of a transcript
// (CaptureEnd), back to the start of the line of the last human prompt of
// the session in the last MaxActiveTaskScan bytes (beginning at the first
// complete line of that window), when that prompt's turn is still open:
// the task someone started in the pane and that still runs. PromptsAfter
// and ScanCompletion from the moved anchor see exactly that prompt first.
// It returns the moved anchor and the prompt record's uuid.
//
// It fails with a *native.ScanError: CodeNotMaterialized when the
// transcript does not exist yet; CodeNotComplete when the window holds no
// human prompt (none yet, or the prompt is further back than the window)
// or the last prompt's turn already completed, failed or was interrupted
// (the pane may show work a moment before Claude Code records the new
// prompt: a caller retries); and the failures of ScanCompletion for a file
// that is not the anchored one (device/inode), not a regular file owned by
// this user, shorter than end, or not JSONL.
func ActiveTaskAnchor(end Anchor) (Anchor, string, error) {
	if !end.FileExisted || !end.pinned() {
		return Anchor{}, "", native.Failf(native.CodeNotMaterialized, end.Path, "the transcript does not exist yet: Claude Code has recorded no prompt in this session")
	}
	if end.Offset < 0 {
		return Anchor{}, "", native.Failf(native.CodeInvalidAnchor, end.Path, "anchor offset %d is negative", end.Offset)
	}
	start := max(end.Offset-MaxActiveTaskScan, 0)
	probe := end
	// One byte earlier, so that a window beginning exactly at a line
	// start keeps that line.
	probe.Offset = max(start-1, 0)
	w, _, err := readWindow(probe)
	if err != nil {
		return Anchor{}, "", err
	}
	if w.size < end.Offset {
		return Anchor{}, "", native.Failf(native.CodeTruncated, end.Path, "the file is %d bytes, shorter than the anchor offset %d", w.size, end.Offset)
	}
	data, base := w.data, probe.Offset
	if start > 0 {
		// Begin at the first complete line of the window.
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			return Anchor{}, "", native.Failf(native.CodeNotComplete, end.Path, "no complete line starts in the last %d bytes of the transcript (one record is longer than that)", MaxActiveTaskScan)
		}
		data, base = data[i+1:], base+int64(i+1)
	}
	return activeTask(end, window{data: data, partial: w.partial, end: w.end, size: w.size}, base)
}

// promptLine is what every line of a prompt record holds: its type and
// role as JSON strings. Lines without it (the large attachment and tool
// records that fill most of a transcript) are not decoded.
var promptLine = [][]byte{[]byte(`"user"`)}

// activeTask is ActiveTaskAnchor on w, the complete lines from base on.
func activeTask(end Anchor, w window, base int64) (Anchor, string, error) {
	entries, err := parseLines(w, base, end.Path, promptLine)
	if err != nil {
		return Anchor{}, "", err
	}
	var last *entry
	for i := range entries {
		if e := &entries[i]; startsTurn(e, end) {
			last = e
		}
	}
	if last == nil {
		return Anchor{}, "", native.Failf(native.CodeNotComplete, end.Path, "no human prompt of session %s in the last %d bytes of the transcript", end.SessionID, w.end-base)
	}
	a := end
	a.Offset = last.start
	c, err := completion(a, window{data: w.data[last.start-base:], partial: w.partial, end: w.end, size: w.size}, last.UUID)
	if err != nil {
		return Anchor{}, "", err
	}
	if c.State != native.Pending {
		return Anchor{}, "", native.Failf(native.CodeNotComplete, end.Path, "the turn of the last prompt (record %s) already ended (%s): no task runs now", last.UUID, c.Code)
	}
	return a, last.UUID, nil
}
