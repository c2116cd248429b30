package codex

import (
	"bytes"
	"strings"

	"github.com/clawconnect/clawconnect/internal/terminal/native"
)

// MaxActiveTaskScan is the most bytes ActiveTaskAnchor reads back from the
// end of a rollout.
const MaxActiveTaskScan = 8 << 20

// ActiveTaskAnchor moves end, an anchor at the current end of a rollout,
// back to the start of the line of the latest task_started record whose
// turn has not ended (no task_complete or turn_aborted after it): the task
// someone started in the pane and that still runs. It returns the moved
// anchor and the task's turn id, or a *native.ScanError with
// CodeNotComplete when no task runs in the last MaxActiveTaskScan bytes.
func ActiveTaskAnchor(end Anchor) (Anchor, string, error) {
	if !end.Bound() || end.Mode != Existing {
		return Anchor{}, "", native.Failf(native.CodeInvalidAnchor, end.Path, "an active task is looked for from a bound anchor at the rollout's end")
	}
	start := max(end.Offset-MaxActiveTaskScan, 0)
	w, err := readWindow(Anchor{Mode: Existing, Path: end.Path, Dev: end.Dev, Ino: end.Ino, Offset: start}, MaxActiveTaskScan+MaxCompletionScan)
	if err != nil {
		return Anchor{}, "", err
	}
	data, base := w.data, start
	if start > 0 {
		// Begin at the first complete line of the window.
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			return Anchor{}, "", native.Failf(native.CodeNotComplete, end.Path, "no complete line in the last %d bytes", MaxActiveTaskScan)
		}
		data, base = data[i+1:], start+int64(i+1)
	}
	type started struct {
		turn  string
		start int64
	}
	var open []started
	var lineStart = base
	err = lines(data, base, end.Path, func(line []byte, lineEnd int64) error {
		from := lineStart
		lineStart = lineEnd
		if !bytes.Contains(line, []byte(`"task_started"`)) && !bytes.Contains(line, []byte(`"task_complete"`)) && !bytes.Contains(line, []byte(`"turn_aborted"`)) {
			return nil
		}
		r, err := decode(line, lineEnd, end.Path)
		if err != nil {
			return err
		}
		if r.Type != "event_msg" {
			return nil
		}
		id := strings.ToLower(r.Payload.TurnID)
		switch r.Payload.Type {
		case "task_started":
			if id != "" {
				open = append(open, started{turn: id, start: from})
			}
		case "task_complete", "turn_aborted":
			for i := range open {
				if open[i].turn == id {
					open = append(open[:i], open[i+1:]...)
					break
				}
			}
		}
		return nil
	})
	if err != nil {
		return Anchor{}, "", err
	}
	if len(open) == 0 {
		return Anchor{}, "", native.Failf(native.CodeNotComplete, end.Path, "no task runs in the rollout (every task_started has ended)")
	}
	last := open[len(open)-1]
	a := end
	a.Offset = last.start
	return a, last.turn, nil
}
