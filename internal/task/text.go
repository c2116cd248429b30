package task

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/taskapi"
)

// Texts and limits that are part of the contract.
const (
	// NoSummarySentinel is the summary of a turn that produced no text.
	NoSummarySentinel = "Stream finished with no response collected."
	// SummaryPreviewMax caps list_tasks summaries and blocked notices.
	SummaryPreviewMax = 500
	// ContinuationSummaryMax caps list_sessions' lastSummary.
	ContinuationSummaryMax = 500
	// ProjectionTextMax caps the text of projected log rows.
	ProjectionTextMax = 240
	// InitialWindowMax is the number of projected rows without a cursor.
	InitialWindowMax = 8
	// DeltaWindowMax is the number of projected rows after a cursor.
	DeltaWindowMax = 5
	// ArtifactListMax caps filesChanged and commandsRun.
	ArtifactListMax = 50
)

// messageToolVeto opens every message sent to the agent.
const messageToolVeto = "You are answering a task handed over by ClawConnect. Only your final assistant " +
	"message is returned to the caller: put the complete answer there. Do not use the `message` tool to " +
	"reply — anything sent through it is not seen by the caller."

// buildMessage is the text the agent receives.
func buildMessage(task, context, senderName, payloadPath string) string {
	var b strings.Builder
	b.WriteString(messageToolVeto)
	b.WriteString("\n\n---\n\n")
	if s := strings.TrimSpace(senderName); s != "" {
		b.WriteString("[Message from: " + s + "]\n\n")
	}
	if context != "" {
		b.WriteString(context + "\n\n" + task)
	} else {
		b.WriteString(task)
	}
	if payloadPath != "" {
		b.WriteString("\n\n---\n\n")
		b.WriteString("The caller attached an opaque payload to this task. It is stored, unparsed, in the file " +
			payloadPath + " — read it from there if the task needs it.")
	}
	return b.String()
}

// capRunes returns s if it has at most n characters, else its first n-1
// characters followed by "…" (n characters in all).
func capRunes(s string, n int) (string, bool) {
	if utf8.RuneCountInString(s) <= n {
		return s, false
	}
	i, c := 0, 0
	for i = range s {
		if c == n-1 {
			break
		}
		c++
	}
	return s[:i] + "…", true
}

// capLogText applies the per-entry cap: text[0:max-1] + "…[<n> more chars]".
func capLogText(s string, limit int) string {
	n := utf8.RuneCountInString(s)
	if n <= limit {
		return s
	}
	i, c := 0, 0
	for i = range s {
		if c == limit-1 {
			break
		}
		c++
	}
	return s[:i] + fmt.Sprintf("…[%d more chars]", n-(limit-1))
}

// project is the bounded log projection: tool+result
// pairs collapsed, the last 8 rows without a cursor or the last 5 after it,
// texts capped at 240. entries must be in seq order.
func project(entries []store.LogEntry, cursor int64) []taskapi.LogEntry {
	var rows []taskapi.LogEntry
	for i := 0; i < len(entries); i++ {
		e := entries[i]
		if e.Seq <= cursor {
			continue
		}
		row := taskapi.LogEntry{TS: e.TS, Type: e.Type, Text: e.Text, IsError: e.IsError, Seq: e.Seq}
		if e.Type == "tool" && i+1 < len(entries) && entries[i+1].Type == "tool-result" && !entries[i+1].IsError {
			r := entries[i+1]
			row.TS, row.Seq = r.TS, r.Seq
			i++
		}
		row.Text, _ = capRunes(row.Text, ProjectionTextMax)
		rows = append(rows, row)
	}
	keep := InitialWindowMax
	if cursor > 0 {
		keep = DeltaWindowMax
	}
	if len(rows) > keep {
		rows = rows[len(rows)-keep:]
	}
	if rows == nil {
		rows = []taskapi.LogEntry{}
	}
	return rows
}

func toLogEntries(es []store.LogEntry) []taskapi.LogEntry {
	out := make([]taskapi.LogEntry, 0, len(es))
	for _, e := range es {
		out = append(out, taskapi.LogEntry{TS: e.TS, Type: e.Type, Text: e.Text, IsError: e.IsError, Seq: e.Seq})
	}
	return out
}

// argString returns the first non-empty string among keys of a JSON object.
func argString(args json.RawMessage, keys ...string) string {
	if len(args) == 0 {
		return ""
	}
	var m map[string]any
	if json.Unmarshal(args, &m) != nil {
		return ""
	}
	for _, k := range keys {
		if s, ok := m[k].(string); ok && s != "" {
			return s
		}
	}
	return ""
}

func appendCapped(list []string, v string) []string {
	if v == "" || len(list) >= ArtifactListMax {
		return list
	}
	for _, x := range list {
		if x == v {
			return list
		}
	}
	return append(list, v)
}

// lazyRegexp returns a function that compiles expr on its first call and
// returns the same *regexp.Regexp afterwards. The patterns of this file are
// needed only once a task produces output, so compiling them at package init
// would only slow every start of the binary (clawconnect mcp answers
// initialize before any of them is used).
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

var patchFileRE = lazyRegexp(`(?m)^(?:\*\*\* (?:Add|Update|Delete) File: (.+)|\+\+\+ b/(.+))$`)

// addToolArtifacts folds one tool-start event into a.
func addToolArtifacts(a *taskapi.Artifacts, tool string, args json.RawMessage) {
	switch tool {
	case "Bash", "exec":
		cmd, _ := capRunes(argString(args, "command"), 121)
		cmd = strings.TrimSuffix(cmd, "…")
		a.CommandsRun = appendCapped(a.CommandsRun, cmd)
	case "Edit", "Write", "edit", "write":
		a.FilesChanged = appendCapped(a.FilesChanged, argString(args, "file_path", "filePath", "path", "file"))
	case "ApplyPatch", "apply_patch":
		for _, m := range patchFileRE().FindAllStringSubmatch(argString(args, "input", "patch", "content"), -1) {
			f := m[1]
			if f == "" {
				f = m[2]
			}
			a.FilesChanged = appendCapped(a.FilesChanged, strings.TrimSpace(f))
		}
	}
}

var (
	prURLRE  = lazyRegexp(`https://github\.com/[^\s/]+/[^\s/]+/pull/\d+`)
	branchRE = lazyRegexp(`(?:\bbranch|checkout -b|switch -c)\s+` + "[`'\"]?" + `([A-Za-z0-9._/-]+)`)
)

// addSummaryArtifacts derives PR, commit, branch and needs-human from a
// final summary. An agent's summary runs to kilobytes, so expressions run
// only where a literal check or a plain scan cannot decide: they cost more
// than the rest of an outcome's bookkeeping.
func addSummaryArtifacts(a *taskapi.Artifacts, summary string) {
	if summary == "" {
		return
	}
	if strings.Contains(summary, "https://github.com/") {
		if m := prURLRE().FindString(summary); m != "" {
			a.PRURL = m
		}
	}
	if m := commitSHA(summary); m != "" {
		a.CommitSHA = m
	}
	if strings.Contains(summary, "branch") || strings.Contains(summary, "checkout -b") || strings.Contains(summary, "switch -c") {
		if m := branchRE().FindStringSubmatch(summary); m != nil {
			a.BranchName = m[1]
		}
	}
	tail := lastRunes(summary, 200)
	a.NeedsHumanDecision = strings.HasSuffix(strings.TrimSpace(tail), "?") || asksForADecision(tail)
}

// commitSHA returns the first word of 7 to 40 lowercase hex digits, as
// \b[0-9a-f]{7,40}\b would: words are runs of ASCII letters, digits and
// underscores.
func commitSHA(s string) string {
	for i := 0; i < len(s); {
		if !isWordByte(s[i]) {
			i++
			continue
		}
		j, hex := i, true
		for ; j < len(s) && isWordByte(s[j]); j++ {
			hex = hex && ('0' <= s[j] && s[j] <= '9' || 'a' <= s[j] && s[j] <= 'f')
		}
		if hex && j-i >= 7 && j-i <= 40 {
			return s[i:j]
		}
		i = j
	}
	return ""
}

func isWordByte(c byte) bool { return isAlnum(c) || c == '_' }

// lastRunes returns the end of s holding its last n runes (an invalid
// byte counts as one, as utf8 counts it).
func lastRunes(s string, n int) string {
	i := len(s)
	for ; n > 0 && i > 0; n-- {
		_, size := utf8.DecodeLastRuneInString(s[:i])
		i -= size
	}
	return s[i:]
}

// decisionPhrases are the phrases of a summary that asks for a decision,
// lower case.
var decisionPhrases = []string{"please confirm", "which option", "waiting for", "choose between"}

// asksForADecision reports whether text holds one of decisionPhrases in
// any case, as a case-insensitive expression finds them: its text folded to
// ASCII lower case, where the only letters outside ASCII that fold into it
// are U+017F (to s) and U+212A, the Kelvin sign (to k). Every other byte
// of a multi-byte or invalid sequence is at least 0x80 and matches no
// phrase.
func asksForADecision(text string) bool {
	folded := make([]byte, 0, len(text))
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		case c == 0xC5 && strings.HasPrefix(text[i:], "\u017F"):
			c, i = 's', i+1
		case c == 0xE2 && strings.HasPrefix(text[i:], "\u212A"):
			c, i = 'k', i+2
		}
		folded = append(folded, c)
	}
	for _, p := range decisionPhrases {
		if bytes.Contains(folded, []byte(p)) {
			return true
		}
	}
	return false
}

// nextStep is the next step a task's outcome and artifacts suggest to the
// caller ("" when there is none).
func nextStep(t *store.Task) string {
	switch {
	case t.Status == store.StatusError:
		return "Fix the issue and retry."
	case t.Artifacts.PRURL != "":
		return "Review or merge the PR."
	case t.Artifacts.NeedsHumanDecision:
		return "Answer the pending question to continue."
	case len(t.Artifacts.FilesChanged) > 0 && t.Artifacts.CommitSHA == "":
		return "Review changes and commit."
	case len(t.Artifacts.FilesChanged) > 0:
		return "Review the changes or continue with the next task."
	}
	return ""
}

var errorClasses = []struct {
	category, recovery string
	re                 func() *regexp.Regexp
}{
	{"auth", "Check the agent's credentials or permissions, then retry.", lazyRegexp(`(?i)authenticat|401|403|permission denied|unauthorized`)},
	{"timeout", "Poll check_task again or retry the task; the agent may still be working.", lazyRegexp(`(?i)timed?\s?out|ETIMEDOUT`)},
	{"merge_conflict", "Resolve the merge conflict, then retry.", lazyRegexp(`merge conflict|CONFLICT`)},
	{"test_failure", "Fix the failing tests, then retry.", lazyRegexp(`(?i)test fail|tests? failed|assertion|expect.*received`)},
	{"tooling", "Install or fix the missing tool, then retry.", lazyRegexp(`ENOENT|command not found|module not found|Cannot find`)},
}

// classifyError sorts a run's error message into a category with a
// suggested recovery ("unknown" when no pattern matches).
func classifyError(msg string) *taskapi.ErrorInfo {
	for _, c := range errorClasses {
		if c.re().MatchString(msg) {
			return &taskapi.ErrorInfo{Category: c.category, Message: msg, SuggestedRecovery: c.recovery}
		}
	}
	return &taskapi.ErrorInfo{Category: "unknown", Message: msg, SuggestedRecovery: "Fix the issue and retry."}
}

// execution maps a status to the snapshot's execution field.
func execution(s store.Status) string {
	switch s {
	case store.StatusRunning:
		return "running"
	case store.StatusCancelled:
		return "cancelled"
	case store.StatusError:
		return "failed"
	}
	return "completed"
}

// transcriptKey is transcriptSnapshotKey.
func transcriptKey(h *History) string {
	if len(h.Messages) == 0 {
		return "empty:0"
	}
	last := h.Messages[len(h.Messages)-1]
	return fmt.Sprintf("%s:%d:%d", last.Role, utf8.RuneCountInString(last.Text), len(h.Messages))
}

// runText returns the run's newest visible assistant text, or — when the
// run id is unknown — the trailing assistant text of the session.
func runText(h *History, runID string) string {
	if runID != "" {
		for i := len(h.Messages) - 1; i >= 0; i-- {
			m := h.Messages[i]
			if m.Role == "assistant" && m.RunID == runID && m.Text != "" {
				return m.Text
			}
		}
		// Transcripts that do not tag rows with run ids: fall back to the
		// trailing text.
		for _, m := range h.Messages {
			if m.RunID != "" {
				return ""
			}
		}
	}
	for i := len(h.Messages) - 1; i >= 0; i-- {
		m := h.Messages[i]
		if m.Role != "assistant" {
			return ""
		}
		if m.Text != "" {
			return m.Text
		}
	}
	return ""
}

// upstreamActive is classifyUpstreamRun == "active".
func upstreamActive(h *History, runID string) bool {
	if h.HasActiveRun {
		return true
	}
	for _, id := range h.ActiveRunIDs {
		if id == runID && runID != "" {
			return true
		}
	}
	return false
}
