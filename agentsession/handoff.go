package agentsession

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// The delimiters of the two handoff forms carried in run_task's context.
const (
	MarkerOpen     = "<agent-session>"
	MarkerClose    = "</agent-session>"
	DirectiveOpen  = "[[clawconnect:agent-session]]"
	DirectiveClose = "[[/clawconnect:agent-session]]"
)

// DirectiveOp is the transition a [Directive] asks for.
type DirectiveOp string

// The transitions. A marker is always an attach.
const (
	DirectiveAttach   DirectiveOp = "attach"   // this session exists; make it current (folds into a refresh when already current)
	DirectiveReplace  DirectiveOp = "replace"  // make this session current, always minting new lineage
	DirectiveContinue DirectiveOp = "continue" // re-delegate the current session, optionally sending it a prompt
	DirectiveDetach   DirectiveOp = "detach"   // stop tracking the current session (and stop it when StopRuntime)
	DirectiveInspect  DirectiveOp = "inspect"  // record a stated status, or ask the runtime for one
)

// Directive is one parsed, validated attachment transition. Which fields are
// set depends on Op: attach and replace carry the session's identity
// (Runtime and Handle always; Host always when not FromMarker); replace and
// detach carry a Reason; continue may carry a Prompt; detach may carry
// StopRuntime. Status is a stated live status or empty.
type Directive struct {
	Op                DirectiveOp
	FromMarker        bool // parsed from an <agent-session> marker rather than a directive block
	Runtime           string
	Handle            string // the session id in the runtime's namespace
	Provider          string
	ProviderSessionID string
	Host              string
	Worktree          string
	RemoteURL         string
	Metadata          map[string]string
	Status            AttachmentStatus
	Reason            string
	Prompt            string
	StopRuntime       bool // honoured only when the JSON said literally true
}

// Handoff is the result of [ParseHandoff].
type Handoff struct {
	// Directive is the transition to apply, or nil when the context carries
	// none or only malformed ones.
	Directive *Directive
	// Text is the context the agent must see: the input with the first
	// directive block and the first marker removed and the result trimmed, or
	// the input unchanged when it carries neither.
	Text string
	// Found reports whether a block or a marker was present (and stripped).
	Found bool
	// Err explains, for logs, why a present block or marker was rejected. It
	// wraps [ErrMalformedHandoff]. It may be set next to a Directive when a
	// malformed block sat beside a valid marker.
	Err error
}

// ErrMalformedHandoff is wrapped by [Handoff.Err].
var ErrMalformedHandoff = errors.New("malformed agent-session handoff")

// ValidHandle reports whether s is a safe session handle: a plain path
// segment, [A-Za-z0-9][A-Za-z0-9._-]{0,127}.
func ValidHandle(s string) bool { return validSegment(s, 128) }

// validSegment reports whether s matches ^[A-Za-z0-9][A-Za-z0-9._-]{0,max-1}$:
// 1 to max ASCII bytes, a letter or digit first, then letters, digits, '.',
// '_' or '-'. It stands in for a regular expression whose bounded repetition
// compiles into a program of hundreds of instructions at package init.
func validSegment(s string, max int) bool {
	if len(s) == 0 || len(s) > max || !isAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// ParseHandoff extracts the attachment transition from run_task's context.
//
// The first [[clawconnect:agent-session]]…[[/clawconnect:agent-session]]
// block (a JSON body) and the first <agent-session>{…}</agent-session>
// marker are both removed from the text, even when malformed; a second block
// or marker is left alone. A valid block wins over the marker; otherwise a
// valid marker is an attach. A malformed form applies nothing and never
// blocks the submit. ParseHandoff runs in time linear in len(context) and is
// safe for concurrent use.
func ParseHandoff(context string) Handoff {
	h := Handoff{Text: context}
	text := context
	if start, end, body, ok := findDirectiveBlock(text); ok {
		h.Found = true
		text = text[:start] + text[end:]
		d, err := parseDirectiveBody(body)
		if err != nil {
			h.Err = fmt.Errorf("directive block: %w", err)
		} else {
			h.Directive = d
		}
	}
	if start, end, body, ok := findMarker(text); ok {
		h.Found = true
		text = text[:start] + text[end:]
		if h.Directive == nil {
			d, err := parseMarkerBody(body)
			if err != nil {
				if h.Err == nil {
					h.Err = fmt.Errorf("marker: %w", err)
				}
			} else {
				h.Directive = d
			}
		}
	}
	if h.Found {
		h.Text = strings.TrimFunc(text, isJSSpace)
	}
	return h
}

// findDirectiveBlock finds the first block: the first opening delimiter and
// the first closing delimiter after it.
func findDirectiveBlock(text string) (start, end int, body string, ok bool) {
	start = strings.Index(text, DirectiveOpen)
	if start < 0 {
		return 0, 0, "", false
	}
	from := start + len(DirectiveOpen)
	n := strings.Index(text[from:], DirectiveClose)
	if n < 0 {
		return 0, 0, "", false
	}
	return start, from + n + len(DirectiveClose), text[from : from+n], true
}

// findMarker finds the leftmost match of
// <agent-session>\s*(\{[\s\S]*?\})\s*</agent-session> in linear time: for
// the first opening tag followed by optional space and "{", the shortest
// match ends at the first closing tag preceded by optional space and a "}"
// that lies after the "{". When an opening tag finds no such closing tag, no
// later one can, so the scan of closing tags happens at most once.
func findMarker(text string) (start, end int, body string, ok bool) {
	searchFrom := 0 // where the next closing-tag search starts
	for pos := 0; pos < len(text); {
		o := strings.Index(text[pos:], MarkerOpen)
		if o < 0 {
			return 0, 0, "", false
		}
		o += pos
		pos = o + len(MarkerOpen)
		b := skipJSSpace(text, pos)
		if b >= len(text) || text[b] != '{' {
			continue
		}
		searchFrom = max(searchFrom, b+1)
		for {
			c := strings.Index(text[searchFrom:], MarkerClose)
			if c < 0 {
				return 0, 0, "", false
			}
			c += searchFrom
			searchFrom = c + len(MarkerClose)
			p := c
			for p > b {
				r, size := utf8.DecodeLastRuneInString(text[:p])
				if !isJSSpace(r) {
					break
				}
				p -= size
			}
			if p-1 > b && text[p-1] == '}' {
				return o, c + len(MarkerClose), text[b:p], true
			}
		}
	}
	return 0, 0, "", false
}

func skipJSSpace(s string, i int) int {
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !isJSSpace(r) {
			break
		}
		i += size
	}
	return i
}

// isJSSpace reports whether r is whitespace for ECMAScript's \s and trim().
func isJSSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0x00a0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000, 0xfeff:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

// jsonObject decodes body as a JSON object.
func jsonObject(body string) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		return nil, fmt.Errorf("%w: body is not JSON: %v", ErrMalformedHandoff, err)
	}
	if m == nil {
		return nil, fmt.Errorf("%w: body is not a JSON object", ErrMalformedHandoff)
	}
	return m, nil
}

// asString returns a JSON string value trimmed, or "" when it is not a
// string or is blank.
func asString(raw json.RawMessage) string {
	return strings.TrimFunc(looseString(raw), isJSSpace)
}

func asLiveStatus(raw json.RawMessage) AttachmentStatus {
	s, _ := LiveStatus(looseString(raw))
	return s
}

func asMetadata(raw json.RawMessage) (map[string]string, error) {
	var m map[string]any
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
		return nil, nil
	}
	md := coerceMetadata(m)
	if p := metadataProblem(md); p != "" {
		return nil, malformed("%s", p)
	}
	return md, nil
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformedHandoff}, args...)...)
}

func parseDirectiveBody(body string) (*Directive, error) {
	m, err := jsonObject(body)
	if err != nil {
		return nil, err
	}
	d := &Directive{Op: DirectiveOp(asString(m["op"]))}
	switch d.Op {
	case DirectiveAttach, DirectiveReplace:
		d.Runtime = asString(m["runtime"])
		if !ValidRuntimeID(d.Runtime) {
			return nil, malformed("%s needs a valid runtime id", d.Op)
		}
		d.Handle = firstNonEmpty(asString(m["handle"]), asString(m["sessionId"]))
		if !ValidHandle(d.Handle) {
			return nil, malformed("%s needs a safe handle", d.Op)
		}
		d.Host = asString(m["host"])
		if d.Host == "" {
			return nil, malformed("%s needs a host", d.Op)
		}
		d.ProviderSessionID = asString(m["providerSessionId"])
		if d.ProviderSessionID != "" && !ValidHandle(d.ProviderSessionID) {
			return nil, malformed("providerSessionId is not a safe handle")
		}
		d.Provider = asString(m["provider"])
		d.Worktree = asString(m["worktree"])
		d.RemoteURL = asString(m["remoteUrl"])
		if d.Metadata, err = asMetadata(m["metadata"]); err != nil {
			return nil, err
		}
		d.Status = asLiveStatus(m["status"])
		d.Reason = asString(m["reason"])
		if d.Op == DirectiveReplace && d.Reason == "" {
			return nil, malformed("replace needs a reason")
		}
	case DirectiveContinue:
		d.Status = asLiveStatus(m["status"])
		d.Prompt = asString(m["prompt"])
	case DirectiveDetach:
		d.Reason = asString(m["reason"])
		if d.Reason == "" {
			return nil, malformed("detach needs a reason")
		}
		d.StopRuntime = strings.TrimSpace(string(m["stopRuntime"])) == "true"
	case DirectiveInspect:
		d.Status = asLiveStatus(m["status"])
	default:
		return nil, malformed("unknown op %q", string(d.Op))
	}
	return d, nil
}

func parseMarkerBody(body string) (*Directive, error) {
	m, err := jsonObject(body)
	if err != nil {
		return nil, err
	}
	d := &Directive{Op: DirectiveAttach, FromMarker: true}
	d.Runtime = asString(m["runtime"])
	if !ValidRuntimeID(d.Runtime) {
		return nil, malformed("marker needs a valid runtime id")
	}
	d.Handle = firstNonEmpty(asString(m["sessionId"]), asString(m["handle"]))
	if !ValidHandle(d.Handle) {
		return nil, malformed("marker needs a safe sessionId")
	}
	d.ProviderSessionID = firstNonEmpty(asString(m["providerSessionId"]), asString(m["claudeSessionId"]))
	if d.ProviderSessionID != "" && !ValidHandle(d.ProviderSessionID) {
		return nil, malformed("providerSessionId is not a safe handle")
	}
	d.Provider = asString(m["provider"])
	d.Host = asString(m["host"])
	d.RemoteURL = firstNonEmpty(asString(m["remoteUrl"]), asString(m["remoteControlUrl"]))
	d.Status = asLiveStatus(m["state"])
	if d.Metadata, err = asMetadata(m["metadata"]); err != nil {
		return nil, err
	}
	d.Worktree = strings.TrimFunc(d.Metadata["worktreePath"], isJSSpace)
	return d, nil
}
