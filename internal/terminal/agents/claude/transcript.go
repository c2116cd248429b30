package claude

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/clawconnect/clawconnect/internal/terminal/native"
	"github.com/clawconnect/clawconnect/internal/terminal/redact"
)

// entry is the part of a transcript record the scans read.
type entry struct {
	Type        string          `json:"type"`
	Subtype     string          `json:"subtype"`
	UUID        string          `json:"uuid"`
	ParentUUID  *string         `json:"parentUuid"`
	IsSidechain bool            `json:"isSidechain"`
	AgentID     string          `json:"agentId"`
	IsMeta      bool            `json:"isMeta"`
	IsCompact   bool            `json:"isCompactSummary"`
	SessionID   string          `json:"sessionId"`
	Cwd         string          `json:"cwd"`
	Timestamp   string          `json:"timestamp"`
	IsAPIError  bool            `json:"isApiErrorMessage"`
	Error       json.RawMessage `json:"error"`
	Message     struct {
		ID         string          `json:"id"`
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		StopReason string          `json:"stop_reason"`
	} `json:"message"`

	start  int64   // offset of the record's line
	end    int64   // offset just after the record's line
	blocks []block // decoded Content when it is an array
	text   *string // decoded Content when it is a string
}

// block is one content block of a message.
type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
}

// interruptedText is the user text Claude Code writes when Esc interrupts
// a turn.
const interruptedText = "[Request interrupted by user"

// parse decodes the records of w that carry a uuid; other records (mode,
// permission-mode, file-history-snapshot, …) are skipped unread.
func parse(w window, base int64, path string) ([]entry, error) {
	return parseLines(w, base, path, nil)
}

// parseLines is parse that also skips unread the lines without every one
// of the byte strings in need (a cheap filter: what is decoded is still
// checked in full).
func parseLines(w window, base int64, path string, need [][]byte) ([]entry, error) {
	var out []entry
	off := 0
	for off < len(w.data) {
		i := bytes.IndexByte(w.data[off:], '\n')
		line := w.data[off : off+i]
		start := base + int64(off)
		off += i + 1
		end := base + int64(off)
		t := bytes.TrimSpace(line)
		if len(t) == 0 {
			continue
		}
		if t[0] != '{' || t[len(t)-1] != '}' {
			return nil, native.Failf(native.CodeInvalidJSONL, path, "line ending at byte %d is not a JSON object", end)
		}
		if !bytes.Contains(line, []byte(`"uuid"`)) || !containsAll(line, need) {
			continue
		}
		e, ok, err := decodeEntry(line, start, end, path)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, e)
		}
	}
	return out, nil
}

// decodeEntry decodes one record line; ok is false for a record without a
// uuid.
func decodeEntry(line []byte, start, end int64, path string) (e entry, ok bool, err error) {
	if err := json.Unmarshal(line, &e); err != nil {
		return e, false, native.Failf(native.CodeInvalidJSONL, path, "line ending at byte %d: %v", end, err)
	}
	if e.UUID == "" {
		return e, false, nil
	}
	e.start, e.end = start, end
	if len(e.Message.Content) > 0 {
		switch e.Message.Content[0] {
		case '"':
			var s string
			if json.Unmarshal(e.Message.Content, &s) == nil {
				e.text = &s
			}
		case '[':
			_ = json.Unmarshal(e.Message.Content, &e.blocks) // odd blocks: treated as none
		}
	}
	return e, true, nil
}

func containsAll(line []byte, need [][]byte) bool {
	for _, n := range need {
		if !bytes.Contains(line, n) {
			return false
		}
	}
	return true
}

// normalize is the prompt comparison form: CRLF as LF, trailing newlines
// removed. A prompt that holds a large paste is compared as Claude Code
// records it: the paste between <pasted_content id="…"> tags with tabs as
// four spaces; unwrapPastes undoes the tags and tabs are expanded on both
// sides.
func normalize(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	if strings.Contains(s, "<pasted_content id=") {
		s = unwrapPastes(s)
	}
	if strings.Contains(s, "\t") {
		s = strings.ReplaceAll(s, "\t", "    ")
	}
	return strings.TrimRight(s, "\n")
}

// unwrapPastes replaces each "\n\n<pasted_content id=\"X\">\n…\n</pasted_content
// id=\"X\">\n" block by the pasted text, and trims the result at both ends
// (Claude Code 2.1.332 writes a large paste that way; the blank lines around
// it are its own). Text without a well-formed block is returned as is.
func unwrapPastes(s string) string {
	var b strings.Builder
	rest := s
	for {
		i := strings.Index(rest, "<pasted_content id=\"")
		if i < 0 {
			break
		}
		j := strings.Index(rest[i:], "\">\n")
		if j < 0 {
			return s
		}
		id := rest[i+len("<pasted_content id=\"") : i+j]
		closing := "\n</pasted_content id=\"" + id + "\">"
		k := strings.Index(rest[i+j+3:], closing)
		if id == "" || strings.ContainsAny(id, "\"\n") || k < 0 {
			return s
		}
		b.WriteString(strings.TrimRight(rest[:i], "\n"))
		b.WriteString(rest[i+j+3 : i+j+3+k])
		rest = strings.TrimLeft(rest[i+j+3+k+len(closing):], "\n")
	}
	b.WriteString(rest)
	return strings.TrimSpace(b.String())
}

// isPrompt reports whether e is a human prompt record of the anchored
// session: a user record with string content (a tool result's content is
// an array of blocks), not a sidechain or subagent record, not a meta
// record Claude Code adds itself, not the summary a compaction writes.
func isPrompt(e *entry, a Anchor) bool {
	return e.Type == "user" && e.Message.Role == "user" && e.text != nil && !e.IsSidechain &&
		e.AgentID == "" && !e.IsMeta && !e.IsCompact && e.SessionID == a.SessionID && e.Cwd == a.Cwd
}

// startsTurn reports whether e is a human prompt that starts a turn (the
// "[Request interrupted by user]" note is a prompt record that does not).
func startsTurn(e *entry, a Anchor) bool {
	return isPrompt(e, a) && !strings.HasPrefix(*e.text, interruptedText)
}

// ScanAcceptance looks after the anchor for the prompt record of the exact
// request (the payload typed into the pane): a user record of the anchored
// session and cwd, not a sidechain, whose string content equals request
// (CRLF as LF, trailing newlines dropped; a large paste, which Claude Code
// records between <pasted_content> tags with its tabs as four spaces,
// compares by its text). It returns Accepted with the
// prompt record's uuid as TurnID, a pending result, or a *native.ScanError
// (replaced or truncated transcript, malformed line, two matches, a match
// without a valid timestamp).
func ScanAcceptance(a Anchor, request string) (native.Acceptance, error) {
	w, ok, err := readWindow(a)
	if err != nil {
		return native.Acceptance{}, err
	}
	if !ok {
		return native.Acceptance{Code: native.CodeNotMaterialized, ThreadID: a.SessionID}, nil
	}
	return acceptance(a, w, request)
}

// acceptance is ScanAcceptance on the bytes after the anchor.
func acceptance(a Anchor, w window, request string) (native.Acceptance, error) {
	entries, err := parse(w, a.Offset, a.Path)
	if err != nil {
		return native.Acceptance{}, err
	}
	want := normalize(request)
	var found *native.Acceptance
	for i := range entries {
		e := &entries[i]
		if !isPrompt(e, a) || normalize(*e.text) != want {
			continue
		}
		if found != nil {
			return native.Acceptance{}, native.Failf(native.CodeDuplicateAcceptance, a.Path, "the request matched twice after the anchor (records %s and %s)", found.TurnID, e.UUID)
		}
		at, err := time.Parse(time.RFC3339Nano, e.Timestamp)
		if err != nil {
			return native.Acceptance{}, native.Failf(native.CodeInvalidAcceptance, a.Path, "prompt record %s has no valid timestamp", e.UUID)
		}
		found = &native.Acceptance{Accepted: true, Code: native.CodeAccepted, TurnID: e.UUID, ThreadID: a.SessionID, AcceptedAt: at}
	}
	if found != nil {
		found.EndOffset = w.end
		return *found, nil
	}
	code := native.CodeNotAccepted
	if w.partial {
		code = native.CodePartialRecord
	}
	return native.Acceptance{Code: code, ThreadID: a.SessionID, EndOffset: w.end}, nil
}

// turn is the records of one prompt's turn.
type turn struct {
	prompt *entry
	recs   []*entry          // descendants in file order
	byUUID map[string]*entry // prompt and descendants
}

// collect finds the prompt promptUUID and the records descending from it,
// up to the next prompt of the session.
func collect(a Anchor, entries []entry, promptUUID string) (*turn, error) {
	t := &turn{byUUID: map[string]*entry{}}
	for i := range entries {
		e := &entries[i]
		if t.prompt == nil {
			if e.UUID == promptUUID {
				if e.Type != "user" {
					return nil, native.Failf(native.CodeInvalidAcceptance, a.Path, "record %s is a %s record, not the prompt", promptUUID, e.Type)
				}
				t.prompt = e
				t.byUUID[e.UUID] = e
			}
			continue
		}
		if startsTurn(e, a) {
			break // the next human prompt starts the next turn
		}
		if e.ParentUUID == nil || t.byUUID[*e.ParentUUID] == nil || e.IsSidechain {
			continue // not in this turn's chain
		}
		if t.byUUID[e.UUID] != nil {
			return nil, native.Failf(native.CodeInvalidTranscript, a.Path, "record uuid %s appears twice", e.UUID)
		}
		t.byUUID[e.UUID] = e
		t.recs = append(t.recs, e)
	}
	if t.prompt == nil {
		return nil, native.Failf(native.CodeInvalidAcceptance, a.Path, "prompt record %s is not after the anchor", promptUUID)
	}
	return t, nil
}

// chain returns e's ancestors up to (not including) the prompt, nearest
// first.
func (t *turn) chain(e *entry) []*entry {
	var out []*entry
	for e != nil && e != t.prompt {
		out = append(out, e)
		if e.ParentUUID == nil {
			break
		}
		e = t.byUUID[*e.ParentUUID]
	}
	return out
}

// openTools returns the tool_use blocks of the turn that no tool_result
// answers, and whether any tool_use asks for background work.
func (t *turn) openTools() (open []block, background bool) {
	answered := map[string]bool{}
	for _, e := range t.recs {
		for _, b := range e.blocks {
			if b.Type == "tool_result" {
				answered[b.ToolUseID] = true
			}
		}
	}
	for _, e := range t.recs {
		if e.Type != "assistant" {
			continue
		}
		for _, b := range e.blocks {
			if b.Type != "tool_use" {
				continue
			}
			if bytes.Contains(b.Input, []byte(`"run_in_background":true`)) {
				background = true
			}
			if !answered[b.ID] {
				open = append(open, b)
			}
		}
	}
	return open, background
}

// ScanCompletion reads the turn of prompt record promptUUID (the TurnID of
// ScanAcceptance) after the anchor: the records that descend from it by
// parentUuid, up to the next human prompt. The turn is Completed when
// exactly one system/turn_duration descends from it through an assistant
// record with stop_reason "end_turn", no tool_use is left unanswered and
// none runs in the background; the text is every text block of that
// assistant message on the chain, joined, redacted and clipped to
// native.MaxText characters. It is Failed when it has no turn_duration and
// its last record is an API error message (the error text is the Text),
// Aborted ("interrupted") when Claude Code recorded that the user
// interrupted it, and Pending otherwise.
func ScanCompletion(a Anchor, promptUUID string) (native.Completion, error) {
	if promptUUID == "" {
		return native.Completion{}, native.Failf(native.CodeInvalidAnchor, a.Path, "no prompt record uuid to scan for")
	}
	w, ok, err := readWindow(a)
	if err != nil {
		return native.Completion{}, err
	}
	if !ok {
		return native.Completion{State: native.Pending, Code: native.CodeNotMaterialized, TurnID: promptUUID}, nil
	}
	return completion(a, w, promptUUID)
}

// completion is ScanCompletion on the bytes after the anchor.
func completion(a Anchor, w window, promptUUID string) (native.Completion, error) {
	pending := native.Completion{State: native.Pending, Code: native.CodeNotComplete, TurnID: promptUUID, EndOffset: w.end}
	if w.partial {
		pending.Code = native.CodePartialRecord
	}
	entries, err := parse(w, a.Offset, a.Path)
	if err != nil {
		return native.Completion{}, err
	}
	t, err := collect(a, entries, promptUUID)
	if err != nil {
		return native.Completion{}, err
	}
	var durations []*entry
	for _, e := range t.recs {
		if e.Type == "system" && e.Subtype == "turn_duration" {
			durations = append(durations, e)
		}
	}
	switch len(durations) {
	case 0:
		if len(t.recs) == 0 {
			return pending, nil
		}
		last := t.recs[len(t.recs)-1]
		if last.Type == "assistant" && last.IsAPIError {
			c := native.Completion{State: native.Failed, Code: native.CodeAPIError, TurnID: promptUUID, EndOffset: w.end}
			c.CompletedAt, _ = time.Parse(time.RFC3339Nano, last.Timestamp)
			c.Text, c.Truncated = native.Clip(redact.Redact(textOf(last)))
			return c, nil
		}
		if last.Type == "user" {
			for _, b := range last.blocks {
				if b.Type == "text" && strings.HasPrefix(b.Text, interruptedText) {
					c := native.Completion{State: native.Aborted, Code: native.CodeTurnAborted, Reason: "interrupted", TurnID: promptUUID, EndOffset: w.end}
					c.CompletedAt, _ = time.Parse(time.RFC3339Nano, last.Timestamp)
					return c, nil
				}
			}
		}
		return pending, nil
	case 1:
	default:
		return native.Completion{}, native.Failf(native.CodeDuplicateCompletion, a.Path, "turn %s has %d turn_duration records", promptUUID, len(durations))
	}
	if open, background := t.openTools(); len(open) > 0 || background {
		return pending, nil
	}
	d := durations[0]
	chain := t.chain(d)
	var final *entry
	for _, e := range chain {
		if e.Type == "assistant" && e.Message.StopReason == "end_turn" {
			final = e
			break
		}
	}
	if final == nil {
		return native.Completion{}, native.Failf(native.CodeInvalidCompletion, a.Path, "turn_duration %s has no end_turn assistant record on its chain", d.UUID)
	}
	var parts []string
	for i := len(chain) - 1; i >= 0; i-- {
		e := chain[i]
		if e.Type == "assistant" && e.Message.ID == final.Message.ID {
			if s := textOf(e); s != "" {
				parts = append(parts, s)
			}
		}
	}
	at, err := time.Parse(time.RFC3339Nano, d.Timestamp)
	if err != nil {
		return native.Completion{}, native.Failf(native.CodeInvalidCompletion, a.Path, "turn_duration %s has no valid timestamp", d.UUID)
	}
	c := native.Completion{State: native.Completed, Code: native.CodeCompletionFound, TurnID: promptUUID, CompletedAt: at, EndOffset: w.end}
	c.Text, c.Truncated = native.Clip(redact.Redact(strings.Join(parts, "\n")))
	return c, nil
}

// textOf joins the text blocks (or the string content) of a record.
func textOf(e *entry) string {
	if e.text != nil {
		return *e.text
	}
	var parts []string
	for _, b := range e.blocks {
		if b.Type == "text" && b.Text != "" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// BashApproval is the transcript side of a pending Bash permission prompt:
// the turn is open and exactly one Bash tool_use waits for its result. Its
// serialized form carries no command text, only its hash.
type BashApproval struct {
	// ToolUseID is the tool_use block's id.
	ToolUseID string `json:"request_id"`
	// CommandSHA256 is the lowercase hex SHA-256 of the command.
	CommandSHA256 string `json:"command_sha256"`
	// Fingerprint is the lowercase hex SHA-256 of the session, prompt,
	// tool_use id and command hash: the evidence identity.
	Fingerprint string `json:"evidence_fingerprint"`
	// Command is the exact command the call runs. It is never serialized:
	// it may hold a secret, and its hash is the evidence.
	Command string `json:"-"`
	// Cwd is the working directory Claude Code recorded with the call.
	Cwd string `json:"-"`
	// OnlyCommand reports an input in which nothing but Command decides
	// what runs: one JSON object with unique names, a string "command",
	// and otherwise only a string "description" and a number "timeout".
	// Any other field (run_in_background, one that turns a sandbox off,
	// one this reader does not know) or a name given twice clears it.
	OnlyCommand bool `json:"-"`
}

// PendingApproval reports the Bash tool call the turn of promptUUID waits
// on, or nil when the turn has ended, has no unanswered tool call, or has
// more than one (or one that is not Bash). Errors are those of
// ScanCompletion.
func PendingApproval(a Anchor, promptUUID string) (*BashApproval, error) {
	w, ok, err := readWindow(a)
	if err != nil || !ok {
		return nil, err
	}
	return pendingApproval(a, w, promptUUID)
}

// pendingApproval is PendingApproval on the bytes after the anchor.
func pendingApproval(a Anchor, w window, promptUUID string) (*BashApproval, error) {
	entries, err := parse(w, a.Offset, a.Path)
	if err != nil {
		return nil, err
	}
	t, err := collect(a, entries, promptUUID)
	if err != nil {
		return nil, err
	}
	for _, e := range t.recs {
		if e.Type == "system" && e.Subtype == "turn_duration" {
			return nil, nil
		}
	}
	open, _ := t.openTools()
	if len(open) != 1 || open[0].Name != "Bash" {
		return nil, nil
	}
	var in struct {
		Command string `json:"command"`
	}
	if json.Unmarshal(open[0].Input, &in) != nil || in.Command == "" {
		return nil, nil
	}
	cmd := sha256.Sum256([]byte(in.Command))
	ap := &BashApproval{ToolUseID: open[0].ID, CommandSHA256: hex.EncodeToString(cmd[:]), Command: in.Command,
		Cwd: t.callCwd(open[0].ID), OnlyCommand: onlyCommand(open[0].Input)}
	fp := sha256.Sum256([]byte(a.SessionID + "\n" + promptUUID + "\n" + ap.ToolUseID + "\n" + ap.CommandSHA256))
	ap.Fingerprint = hex.EncodeToString(fp[:])
	return ap, nil
}

// callCwd is the cwd of the assistant record holding tool_use id; "" when
// the records holding it disagree.
func (t *turn) callCwd(id string) string {
	cwd, seen := "", false
	for _, e := range t.recs {
		if e.Type != "assistant" {
			continue
		}
		for _, b := range e.blocks {
			if b.Type == "tool_use" && b.ID == id {
				if seen && e.Cwd != cwd {
					return ""
				}
				cwd, seen = e.Cwd, true
			}
		}
	}
	return cwd
}

// onlyCommand reports a Bash input whose only field deciding what runs is
// a string "command" (BashApproval.OnlyCommand).
func onlyCommand(input json.RawMessage) bool {
	dec := json.NewDecoder(bytes.NewReader(input))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return false
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		name, isName := tok.(string)
		if err != nil || !isName || seen[name] {
			return false
		}
		seen[name] = true
		var v any
		if err := dec.Decode(&v); err != nil {
			return false
		}
		switch name {
		case "command", "description":
			if _, ok := v.(string); !ok {
				return false
			}
		case "timeout":
			if _, ok := v.(float64); !ok {
				return false
			}
		default:
			return false
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return false
	}
	_, err := dec.Token()
	return err == io.EOF && seen["command"]
}

// userOnly is the filter of the prompt scans: a record without "user" in
// it cannot be a prompt, and is skipped unread (its line must still look
// like one JSON object).
var userOnly = [][]byte{[]byte(`"user"`)}

// PromptsAfter lists the uuids of the human prompt records of the anchored
// session after the anchor, in file order (the "[Request interrupted by
// user]" notes are not prompts). Asked before a send, any prompt means
// someone typed into the pane since the anchor. Errors are those of
// ScanAcceptance; a transcript that does not exist yet has no prompts.
func PromptsAfter(a Anchor) ([]string, error) {
	w, ok, err := readWindow(a)
	if err != nil || !ok {
		return nil, err
	}
	entries, err := parseLines(w, a.Offset, a.Path, userOnly)
	if err != nil {
		return nil, err
	}
	var out []string
	for i := range entries {
		if e := &entries[i]; startsTurn(e, a) {
			out = append(out, e.UUID)
		}
	}
	return out, nil
}

// PromptSince answers PromptsAfter's question (did a human prompt the
// anchored session after the anchor?) incrementally: it resumes c, the
// zero Cursor meaning from the anchor, over the bytes appended since c
// stopped, and reports a prompt as c.Found. A transcript that does not
// exist yet has no prompts (c is returned unchanged); an anchor taken
// before it existed pins the file it first finds. Its failures are those
// of PromptsAfter, kept in c.Err (native.ScanFrom). Memory is one line at a
// time, so a caller that keeps c can ask again and again of a transcript
// that grows without limit.
func PromptSince(a Anchor, c native.Cursor) (native.Cursor, error) {
	if a.Path == "" || a.Offset < 0 || a.SessionID == "" {
		return c, native.Failf(native.CodeInvalidAnchor, a.Path, "anchor session %q path %q offset %d is malformed", a.SessionID, a.Path, a.Offset)
	}
	if c == (native.Cursor{}) {
		c = native.Cursor{Dev: a.Dev, Ino: a.Ino, Start: a.Offset, Offset: a.Offset, Limit: MaxScan}
	}
	if !a.pinned() && c.Dev == 0 && c.Ino == 0 {
		if _, err := os.Lstat(a.Path); errors.Is(err, fs.ErrNotExist) {
			return c, nil
		}
	}
	return native.ScanFrom(a.Path, notInTranscripts, c, func(line []byte, end int64) (bool, error) {
		if !bytes.Contains(line, []byte(`"uuid"`)) || !containsAll(line, userOnly) {
			return false, nil
		}
		e, ok, err := decodeEntry(line, end-int64(len(line))-1, end, a.Path)
		if err != nil || !ok {
			return false, err
		}
		return startsTurn(&e, a), nil
	})
}
