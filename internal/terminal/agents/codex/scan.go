package codex

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"

	"github.com/clawconnect/clawconnect/internal/terminal/native"
	"github.com/clawconnect/clawconnect/internal/terminal/redact"
	"github.com/clawconnect/clawconnect/internal/terminal/request"
)

// record is the part of a rollout line the scans read.
type record struct {
	Timestamp string `json:"timestamp"`
	Type      string `json:"type"`
	Payload   struct {
		Type    string `json:"type"`
		TurnID  string `json:"turn_id"`
		Role    string `json:"role"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		LastAgentMessage json.RawMessage `json:"last_agent_message"`
		Reason           string          `json:"reason"`
		Passthrough      struct {
			TurnID string `json:"turn_id"`
		} `json:"internal_chat_message_metadata_passthrough"`
	} `json:"payload"`
}

// lines calls f with each complete line of data and its end offset
// (relative to data), stopping at the first error. A blank line is
// skipped; any other line must look like one JSON object.
func lines(data []byte, base int64, path string, f func(line []byte, end int64) error) error {
	off := 0
	for off < len(data) {
		i := bytes.IndexByte(data[off:], '\n')
		line := data[off : off+i]
		off += i + 1
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if line[0] != '{' || bytes.TrimRight(line, " \r\t")[len(bytes.TrimRight(line, " \r\t"))-1] != '}' {
			return native.Failf(native.CodeInvalidJSONL, path, "line ending at byte %d is not a JSON object", base+int64(off))
		}
		if err := f(line, base+int64(off)); err != nil {
			return err
		}
	}
	return nil
}

func decode(line []byte, end int64, path string) (record, error) {
	var r record
	if err := json.Unmarshal(line, &r); err != nil {
		return r, native.Failf(native.CodeInvalidJSONL, path, "line ending at byte %d: %v", end, err)
	}
	return r, nil
}

func parseTime(s string) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil
}

// ScanAcceptance looks after the anchor for the native turn that accepted
// the request whose hash (request.Hash of the exact payload) is
// requestHash: a user response_item whose only input_text hashes to
// requestHash, preceded after the anchor by a task_started of the same
// turn. It returns Accepted with the native turn id, or a pending result
// (CodeNotMaterialized for an unbound virgin anchor, CodePartialRecord when
// the file ends in a partial line, CodeNotAccepted otherwise), or a
// *native.ScanError (replaced or truncated file, malformed line, a match
// without its task_started, two matches, two task_started records of one
// turn).
func ScanAcceptance(a Anchor, requestHash string) (native.Acceptance, error) {
	if !a.Bound() && a.Mode == PreMaterialization {
		return native.Acceptance{Code: native.CodeNotMaterialized, EndOffset: 0}, nil
	}
	w, err := readWindow(a, MaxAcceptanceScan)
	if err != nil {
		return native.Acceptance{}, err
	}
	return acceptance(a, w, requestHash)
}

// acceptance is ScanAcceptance on the bytes after the anchor.
func acceptance(a Anchor, w window, requestHash string) (native.Acceptance, error) {
	started := map[string]bool{}
	current := ""
	var found *native.Acceptance
	err := lines(w.data, a.Offset, a.Path, func(line []byte, end int64) error {
		if !bytes.Contains(line, []byte(`"task_started"`)) && !bytes.Contains(line, []byte(`"user"`)) {
			return nil
		}
		r, err := decode(line, end, a.Path)
		if err != nil {
			return err
		}
		switch {
		case r.Type == "event_msg" && r.Payload.Type == "task_started":
			id := strings.ToLower(r.Payload.TurnID)
			if id == "" {
				return native.Failf(native.CodeInvalidJSONL, a.Path, "task_started ending at byte %d has no turn_id", end)
			}
			if started[id] {
				return native.Failf(native.CodeInvalidAcceptance, a.Path, "turn %s started twice after the anchor", id)
			}
			started[id] = true
			current = id
		case r.Type == "response_item" && r.Payload.Type == "message" && r.Payload.Role == "user":
			text, ok := onlyInputText(r)
			if !ok || request.Hash(text) != requestHash {
				return nil
			}
			turn := strings.ToLower(r.Payload.Passthrough.TurnID)
			if turn == "" {
				turn = current
			}
			if turn == "" || !started[turn] {
				return native.Failf(native.CodeInvalidAcceptance, a.Path, "the request matched at byte %d without a task_started of its turn after the anchor", end)
			}
			if found != nil {
				return native.Failf(native.CodeDuplicateAcceptance, a.Path, "the request matched twice after the anchor (turns %s and %s)", found.TurnID, turn)
			}
			at, _ := parseTime(r.Timestamp)
			found = &native.Acceptance{Accepted: true, Code: native.CodeAccepted, TurnID: turn, ThreadID: a.ThreadID, AcceptedAt: at}
		}
		return nil
	})
	if err != nil {
		return native.Acceptance{}, err
	}
	if found != nil {
		found.EndOffset = w.end
		return *found, nil
	}
	code := native.CodeNotAccepted
	if w.partial {
		code = native.CodePartialRecord
	}
	return native.Acceptance{Code: code, ThreadID: a.ThreadID, EndOffset: w.end}, nil
}

func onlyInputText(r record) (string, bool) {
	text, n := "", 0
	for _, c := range r.Payload.Content {
		if c.Type == "input_text" {
			text = c.Text
			n++
		}
	}
	return text, n == 1
}

// ScanCompletion looks after the anchor for the end of the exact native
// turn turnID: a task_complete whose turn_id is turnID (Completed, with its
// last_agent_message redacted and clipped to native.MaxText characters) or
// a turn_aborted of that turn (Aborted, with its reason). Records of other
// turns are ignored. It returns a pending result (CodePartialRecord when
// the file ends in a partial line, CodeNotComplete otherwise) or a
// *native.ScanError (replaced or truncated file, malformed line, two ending
// records, a task_complete without its text field).
//
// Only the bytes after the anchor are read, so the cost does not grow with
// the rollout's earlier history; only lines naming an ending record are
// decoded.
func ScanCompletion(a Anchor, turnID string) (native.Completion, error) {
	return ScanCompletionFrom(a, turnID, a.Offset)
}

// ScanCompletionFrom is ScanCompletion resumed at from, the EndOffset of a
// pending ScanCompletion (or ScanCompletionFrom) of the same anchor and
// turn: it reads only the bytes after from. Its answer is ScanCompletion's,
// because an ending record is found line by line and the lines before from
// held none of turnID's and no malformed one: a record appended since is
// the turn's first (a second one after it is still a duplicate), and the
// limit still counts from the anchor. A rollout shorter than from is
// truncated (CodeTruncated) even when it still reaches the anchor: bytes
// already read are gone. A from before the anchor is CodeInvalidAnchor.
func ScanCompletionFrom(a Anchor, turnID string, from int64) (native.Completion, error) {
	turnID = strings.ToLower(turnID)
	if turnID == "" {
		return native.Completion{}, native.Failf(native.CodeInvalidAnchor, a.Path, "no native turn id to scan for")
	}
	if !a.Bound() {
		return native.Completion{}, native.Failf(native.CodeInvalidAnchor, a.Path, "the anchor is not bound to a rollout")
	}
	if from < a.Offset {
		return native.Completion{}, native.Failf(native.CodeInvalidAnchor, a.Path, "resume offset %d is before the anchor offset %d", from, a.Offset)
	}
	w, err := readWindowFrom(a, from, MaxCompletionScan)
	if err != nil {
		return native.Completion{}, err
	}
	r := a
	r.Offset = from
	return completion(r, w, turnID)
}

// completion is ScanCompletion on the bytes after the anchor.
func completion(a Anchor, w window, turnID string) (native.Completion, error) {
	var found *native.Completion
	err := lines(w.data, a.Offset, a.Path, func(line []byte, end int64) error {
		if !bytes.Contains(line, []byte(`"task_complete"`)) && !bytes.Contains(line, []byte(`"turn_aborted"`)) {
			return nil
		}
		r, err := decode(line, end, a.Path)
		if err != nil {
			return err
		}
		if r.Type != "event_msg" || (r.Payload.Type != "task_complete" && r.Payload.Type != "turn_aborted") ||
			strings.ToLower(r.Payload.TurnID) != turnID {
			return nil
		}
		if found != nil {
			return native.Failf(native.CodeDuplicateCompletion, a.Path, "turn %s ended twice (second record ends at byte %d)", turnID, end)
		}
		at, ok := parseTime(r.Timestamp)
		if !ok {
			return native.Failf(native.CodeInvalidCompletion, a.Path, "the ending record of turn %s has no valid timestamp", turnID)
		}
		c := native.Completion{TurnID: turnID, CompletedAt: at}
		if r.Payload.Type == "turn_aborted" {
			c.State, c.Code, c.Reason = native.Aborted, native.CodeTurnAborted, r.Payload.Reason
		} else {
			var text *string
			if len(r.Payload.LastAgentMessage) == 0 || json.Unmarshal(r.Payload.LastAgentMessage, &text) != nil {
				return native.Failf(native.CodeInvalidCompletion, a.Path, "task_complete of turn %s has no last_agent_message", turnID)
			}
			c.State, c.Code = native.Completed, native.CodeCompletionFound
			if text != nil {
				c.Text, c.Truncated = native.Clip(redact.Redact(*text))
			}
		}
		found = &c
		return nil
	})
	if err != nil {
		return native.Completion{}, err
	}
	if found != nil {
		found.EndOffset = w.end
		return *found, nil
	}
	code := native.CodeNotComplete
	if w.partial {
		code = native.CodePartialRecord
	}
	return native.Completion{State: native.Pending, Code: code, TurnID: turnID, EndOffset: w.end}, nil
}

// TurnsStartedAfter lists the native turns started after the anchor, in
// file order: the turn_id of every task_started record (a human's turn as
// much as ClawConnect's), and "" for each event_msg user_message that older
// Codex versions wrote without a task_started. Asked before a send, any
// turn means someone else used the pane since the anchor. Errors are those
// of ScanAcceptance (a replaced or truncated rollout is a *native.ScanError
// with CodeIdentityMismatch or CodeTruncated).
func TurnsStartedAfter(a Anchor) ([]string, error) {
	if !a.Bound() {
		return nil, nil
	}
	w, err := readWindow(a, MaxCompletionScan)
	if err != nil {
		return nil, err
	}
	var out []string
	sawStart := false
	err = lines(w.data, a.Offset, a.Path, func(line []byte, end int64) error {
		if !bytes.Contains(line, []byte(`"task_started"`)) && !bytes.Contains(line, []byte(`"user_message"`)) {
			return nil
		}
		r, err := decode(line, end, a.Path)
		if err != nil {
			return err
		}
		switch {
		case r.Type != "event_msg":
		case r.Payload.Type == "task_started":
			sawStart = true
			out = append(out, strings.ToLower(r.Payload.TurnID))
		case r.Payload.Type == "user_message" && !sawStart:
			out = append(out, "")
		}
		return nil
	})
	return out, err
}

// TurnStartedSince answers TurnsStartedAfter's question (did any native
// turn start after the anchor?) incrementally: it resumes c, the zero
// Cursor meaning from the anchor, over the bytes appended since c stopped,
// and reports a turn as c.Found. Its failures are those of
// TurnsStartedAfter, kept in c.Err (native.ScanFrom). Memory is one line
// at a time, so a caller that keeps c can ask again and again of a rollout
// that grows without limit.
func TurnStartedSince(a Anchor, c native.Cursor) (native.Cursor, error) {
	if !a.Bound() {
		return c, nil
	}
	if a.Offset < 0 {
		return c, native.Failf(native.CodeInvalidAnchor, a.Path, "anchor offset %d is negative", a.Offset)
	}
	if c == (native.Cursor{}) {
		c = native.Cursor{Dev: a.Dev, Ino: a.Ino, Start: a.Offset, Offset: a.Offset, Limit: MaxCompletionScan}
	}
	return native.ScanFrom(a.Path, notInRollouts, c, func(line []byte, end int64) (bool, error) {
		if !bytes.Contains(line, []byte(`"task_started"`)) && !bytes.Contains(line, []byte(`"user_message"`)) {
			return false, nil
		}
		r, err := decode(line, end, a.Path)
		if err != nil {
			return false, err
		}
		return r.Type == "event_msg" && (r.Payload.Type == "task_started" || r.Payload.Type == "user_message"), nil
	})
}
