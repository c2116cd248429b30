package fakemodel

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Reply prefixes and sizes of scripted replies.
const (
	// DefaultPrefix starts the reply to a prompt without ECHO/LONG/EMPTY.
	DefaultPrefix = "FAKE-REPLY: "
	// EscalateJustification is the reason an escalated tool call gives
	// (Codex shows it in its approval prompt).
	EscalateJustification = "Fake model wants to run this unsandboxed"
	// ToolResultPrefix starts the reply to a request whose newest input is a
	// tool result; the tool's output follows.
	ToolResultPrefix = "FAKE-TOOL-RESULT: "
	// DefaultLongLines is the number of lines of a bare LONG reply.
	DefaultLongLines = 200
	// MaxLongLines caps LONG=<n>.
	MaxLongLines = 100000
	// maxWait caps WAIT=<ms> so a typo cannot hang a test for hours.
	maxWait = 10 * time.Minute
)

// openclawInternal marks the extra user message OpenClaw appends with its
// internal context; it is never the prompt.
const openclawInternal = "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>"

var (
	stampPrefix = regexp.MustCompile(`^\[[^\]\n]*\]\s*`)
	toolcallRe  = regexp.MustCompile(`TOOLCALL:[ \t]*([^\n]*)`)
	tooluseRe   = regexp.MustCompile(`TOOLUSE:[ \t]*([A-Za-z0-9_.-]+)[ \t]*(\{[^\n]*\})`)
	questionRe  = regexp.MustCompile(`QUESTION:[ \t]*([^\n]*)`)
)

// DefaultQuestionOptions are the choices of a QUESTION directive that
// names none.
var DefaultQuestionOptions = []string{"Red", "Blue"}

// Script is what the server does with one request, decided from its prompt.
type Script struct {
	// Text is the reply text (ignored when ToolCommand is set or Fail != 0).
	Text string
	// Fail is the HTTP status to answer with instead of a reply; 0 for none.
	Fail int
	// Wait is a delay before anything is answered.
	Wait time.Duration
	// WaitOnce limits Wait to the first request with this prompt (the
	// server answers a repeat, such as a run redone after a restart, at
	// once).
	WaitOnce bool
	// Slow streams the reply in many chunks with a delay between them.
	Slow bool
	// Hang holds the stream open after the first chunk until the client or
	// the server goes away.
	Hang bool
	// ToolCommand, when non-empty, asks the client to run this shell command.
	ToolCommand string
	// ToolName and ToolArgs, when ToolName is non-empty, ask the client to
	// call that tool (by name, e.g. a plugin's) with these JSON arguments
	// (TOOLUSE: <name> <json object>).
	ToolName, ToolArgs string
	// Escalate asks for the tool call to run outside the client's sandbox
	// (TOOLCALL: ESCALATE <cmd>), which makes Codex show its approval
	// prompt under its default on-request policy.
	Escalate bool
	// Question, when non-empty, asks the user this multiple-choice
	// question through the client's own question tool (QUESTION: <text> |
	// <option> | <option>…), with QuestionOptions as the choices.
	Question        string
	QuestionOptions []string
	// MoreQuestions are asked in the same call after Question (QUESTION:
	// <text> | <option>… || <text> | <option>…).
	MoreQuestions []Question
}

// Question is one question of a QUESTION directive after the first.
type Question struct {
	Text    string
	Options []string
}

// parseQuestion reads one "<text> | <option> | <option>…" of a QUESTION
// directive; fewer than two options give DefaultQuestionOptions, and no
// text gives the zero Question.
func parseQuestion(spec string) Question {
	parts := strings.Split(spec, "|")
	q := Question{Text: strings.TrimSpace(parts[0])}
	if q.Text == "" {
		return Question{}
	}
	for _, o := range parts[1:] {
		if o = strings.TrimSpace(o); o != "" {
			q.Options = append(q.Options, o)
		}
	}
	if len(q.Options) < 2 {
		q.Options = DefaultQuestionOptions
	}
	return q
}

// LongText returns the deterministic reply of LONG=<lines>: numbered lines,
// joined by "\n", without a trailing newline.
func LongText(lines int) string {
	var b strings.Builder
	for i := 1; i <= lines; i++ {
		if i > 1 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "line %04d: the quick brown fox jumps over the lazy dog", i)
	}
	return b.String()
}

// ParseScript decides what to do with a prompt (see the package doc for the
// trigger words). It never fails: unknown or malformed triggers are plain text.
func ParseScript(prompt string) Script {
	s := Script{Text: DefaultPrefix + prompt}
	if m := toolcallRe.FindStringSubmatch(prompt); m != nil && strings.TrimSpace(m[1]) != "" {
		s.ToolCommand = strings.TrimSpace(m[1])
		if cmd, ok := strings.CutPrefix(s.ToolCommand, "ESCALATE "); ok && strings.TrimSpace(cmd) != "" {
			s.ToolCommand, s.Escalate = strings.TrimSpace(cmd), true
		}
	}
	if m := questionRe.FindStringSubmatch(prompt); m != nil {
		specs := strings.Split(m[1], "||")
		first := parseQuestion(specs[0])
		s.Question, s.QuestionOptions = first.Text, first.Options
		for _, spec := range specs[1:] {
			if q := parseQuestion(spec); first.Text != "" && q.Text != "" {
				s.MoreQuestions = append(s.MoreQuestions, q)
			}
		}
	}
	if m := tooluseRe.FindStringSubmatch(prompt); m != nil && json.Valid([]byte(m[2])) {
		s.ToolName, s.ToolArgs = m[1], m[2]
	}
	echoed := false
	for _, w := range strings.Fields(prompt) {
		key, val, hasVal := strings.Cut(w, "=")
		switch {
		case w == "SLOW":
			s.Slow = true
		case w == "HANG":
			s.Hang = true
		case w == "EMPTY" && !echoed:
			s.Text = ""
			echoed = true
		case w == "FAIL400":
			s.Fail = 400
		case w == "FAIL500":
			s.Fail = 500
		case w == "LONG" && !echoed:
			s.Text = LongText(DefaultLongLines)
			echoed = true
		case !hasVal:
		case key == "ECHO" && val != "" && !echoed:
			s.Text = val
			echoed = true
		case key == "LONG" && !echoed:
			if n, err := strconv.Atoi(val); err == nil && n >= 0 && n <= MaxLongLines {
				s.Text = LongText(n)
				echoed = true
			}
		case key == "WAIT" || key == "WAITONCE":
			if ms, err := strconv.Atoi(val); err == nil && ms >= 0 {
				s.Wait = min(time.Duration(ms)*time.Millisecond, maxWait)
				s.WaitOnce = key == "WAITONCE"
			}
		case key == "FAIL":
			if code, err := strconv.Atoi(val); err == nil && code >= 400 && code <= 599 {
				s.Fail = code
			}
		}
	}
	return s
}

// cleanPrompt removes OpenClaw's decorations from a user turn: the
// "[timestamp] " prefix and the "\n\nRuntime: …" block.
func cleanPrompt(s string) string {
	s = stampPrefix.ReplaceAllString(s, "")
	if i := strings.Index(s, "\n\nRuntime:"); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

// pastedContent opens a large paste in a Claude Code prompt
// ("<pasted_content id=\"…\">\n…\n</pasted_content id=\"…\">"): the typed
// prompt, not scaffolding.
const pastedContent = "<pasted_content "

// isNoise reports whether a user text block is client scaffolding rather
// than the typed prompt.
func isNoise(text string) bool {
	t := strings.TrimSpace(text)
	return t == "" || strings.HasPrefix(t, openclawInternal) || strings.HasPrefix(t, "<") && !strings.HasPrefix(t, pastedContent)
}

// block is one content block of any of the three APIs.
type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Content   json.RawMessage `json:"content"`     // anthropic tool_result
	ToolUseID string          `json:"tool_use_id"` // anthropic tool_result
}

// message is a chat-completions/anthropic message or a Responses input item.
type message struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Output  json.RawMessage `json:"output"` // responses function_call_output
}

// userTexts returns the prompt-bearing text blocks of a content value that
// is either a string or an array of blocks, and any tool results in it.
func userTexts(raw json.RawMessage) (texts []string, toolResult *string) {
	if len(raw) == 0 {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []string{s}, nil
	}
	var blocks []block
	if json.Unmarshal(raw, &blocks) != nil {
		return nil, nil
	}
	for _, b := range blocks {
		switch b.Type {
		case "text", "input_text":
			texts = append(texts, b.Text)
			// A text after a tool result is a new prompt (Claude Code merges
			// "interrupted" notes and the next prompt into one message).
			if !isNoise(b.Text) {
				toolResult = nil
			}
		case "tool_result":
			out := contentText(b.Content)
			toolResult = &out
		}
	}
	return texts, toolResult
}

// contentText flattens a string-or-blocks value to its text.
func contentText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []block
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	parts := make([]string, 0, len(blocks))
	for _, b := range blocks {
		if b.Text != "" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// Extracted is what the server reads from a request body.
type Extracted struct {
	// Prompt is the cleaned newest user text ("" when there is none).
	Prompt string
	// ToolResult is the newest input's tool output when the newest input is
	// a tool result.
	ToolResult *string
}

// extract finds the prompt (or a trailing tool result) in a list of
// messages/items, newest first.
func extract(items []message) Extracted {
	for i := len(items) - 1; i >= 0; i-- {
		m := items[i]
		switch {
		case m.Type == "function_call_output": // OpenAI Responses tool result
			out := contentText(m.Output)
			return Extracted{ToolResult: &out}
		case m.Role == "tool": // chat completions tool result
			out := contentText(m.Content)
			return Extracted{ToolResult: &out}
		case m.Role != "user" || (m.Type != "" && m.Type != "message"):
			// Assistant turns, system/developer messages, function calls,
			// reasoning items: not a prompt, look further back.
			continue
		}
		texts, toolResult := userTexts(m.Content)
		if toolResult != nil && i == len(items)-1 {
			return Extracted{ToolResult: toolResult}
		}
		for j := len(texts) - 1; j >= 0; j-- {
			if !isNoise(texts[j]) {
				return Extracted{Prompt: cleanPrompt(texts[j])}
			}
		}
	}
	return Extracted{}
}

// ExtractPrompt reads the prompt from a request body of the given API. It
// returns an error only when the body is not a JSON object.
func ExtractPrompt(api API, body []byte) (Extracted, error) {
	var req struct {
		Messages json.RawMessage `json:"messages"`
		Input    json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return Extracted{}, fmt.Errorf("decode %s body: %w", api, err)
	}
	raw := req.Messages
	if api == APIResponses {
		raw = req.Input
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return Extracted{Prompt: cleanPrompt(s)}, nil
		}
	}
	var items []message
	if len(raw) > 0 && json.Unmarshal(raw, &items) != nil {
		return Extracted{}, nil
	}
	return extract(items), nil
}

// toolOutputLine reduces a tool's output to the line a test can assert:
// Codex wraps it as "…\nOutput:\n<output>", the others send it bare.
func toolOutputLine(out string) string {
	if _, after, ok := strings.Cut(out, "Output:\n"); ok {
		out = after
	}
	out = strings.TrimSpace(out)
	if line, _, ok := strings.Cut(out, "\n"); ok {
		out = line
	}
	const maxLen = 200
	if len(out) > maxLen {
		out = out[:maxLen]
	}
	return strings.TrimSpace(out)
}
