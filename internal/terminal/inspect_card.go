package terminal

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"

	"github.com/clawconnect/clawconnect/internal/terminal/agentproc"
)

// StatusCard is what an agent's own /status card shows, parsed into
// fields. Values are redacted; fields that name credentials or endpoints
// are left out.
type StatusCard struct {
	Version   string            `json:"version"`
	Model     string            `json:"model"`
	SessionID string            `json:"native_thread_id"`
	Workspace string            `json:"workspace"`
	Fields    map[string]string `json:"fields"`
}

// Inspector is implemented by Agents whose /status card has been proven on
// a version: the service inspects only those.
type Inspector interface {
	// Version returns the x.y.z version of the pane's agent process.
	Version(p Pane) (string, error)
	// ProvenVersions lists the versions whose card format ParseStatus
	// was proven against.
	ProvenVersions() []string
	// ParseStatus finds the newest status card on a screen; ok is false
	// when none shows.
	ParseStatus(screen string) (card StatusCard, ok bool)
	// DismissKeys are the keys that close the card after it was read
	// (none for a card printed into the history).
	DismissKeys() []string
}

var (
	_ Inspector = CodexAgent{}
	_ Inspector = ClaudeAgent{}
)

func exeVersion(kind agentproc.Agent, pid int) (string, error) {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return "", fmt.Errorf("read the agent's executable: %w", err)
	}
	return agentproc.Version(kind, exe)
}

// Version implements Inspector.
func (CodexAgent) Version(p Pane) (string, error) { return exeVersion(agentproc.Codex, p.PID) }

// ProvenVersions implements Inspector.
func (CodexAgent) ProvenVersions() []string { return []string{"0.171.0"} }

// DismissKeys implements Inspector: Codex prints the card into its history
// and leaves the composer empty.
func (CodexAgent) DismissKeys() []string { return nil }

// ParseStatus implements Inspector for Codex 0.171.0: after the echoed
// "/status" line, a header "OpenAI Codex (vX.Y.Z)" and "Name: value" rows
// (Model, Directory, Session, …) up to the composer.
func (CodexAgent) ParseStatus(screen string) (StatusCard, bool) {
	return ParseCodexStatus(screen)
}

var (
	codexCardHeader = lazyRE(`^>_ OpenAI Codex \(v([0-9]+\.[0-9]+\.[0-9]+)\)$`)
	cardRow         = lazyRE(`^([A-Za-z][A-Za-z0-9 ._()/-]{0,40}):\s+(\S.*)$`)
	uuidRE          = lazyRE(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
)

// ParseCodexStatus parses the newest Codex /status card on a screen.
func ParseCodexStatus(screen string) (StatusCard, bool) {
	lines := strings.Split(screen, "\n")
	echo := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == "/status" && !strings.HasPrefix(strings.TrimSpace(l), "›") {
			echo = i
		}
	}
	if echo < 0 {
		return StatusCard{}, false
	}
	card := StatusCard{Fields: map[string]string{}}
	header := false
	for _, l := range lines[echo+1:] {
		t := strings.TrimSpace(strings.Trim(l, "│╭╮╰╯─ "))
		if strings.HasPrefix(strings.TrimSpace(l), "›") {
			break // the composer
		}
		if m := codexCardHeader().FindStringSubmatch(t); m != nil {
			header, card.Version = true, m[1]
			continue
		}
		if m := cardRow().FindStringSubmatch(t); m != nil && header {
			card.addField(m[1], m[2])
		}
	}
	card.Model = firstWord(card.Fields["Model"])
	card.SessionID = card.Fields["Session"]
	card.Workspace = card.Fields["Directory"]
	return card, header && card.Version != "" && uuidRE().MatchString(card.SessionID)
}

// Version implements Inspector.
func (ClaudeAgent) Version(p Pane) (string, error) { return exeVersion(agentproc.Claude, p.PID) }

// ProvenVersions implements Inspector.
func (ClaudeAgent) ProvenVersions() []string { return []string{"2.1.332"} }

// DismissKeys implements Inspector: the Status tab of Claude Code's
// settings dialog closes with Escape.
func (ClaudeAgent) DismissKeys() []string { return []string{"Escape"} }

// ParseStatus implements Inspector for Claude Code 2.1.332: the settings
// dialog with its Status tab ("Version:", "Session ID:", "cwd:", "Model:"
// rows) and the "Esc to close" footer.
func (ClaudeAgent) ParseStatus(screen string) (StatusCard, bool) {
	return ParseClaudeStatus(screen)
}

// ParseClaudeStatus parses Claude Code's Status dialog on a screen.
func ParseClaudeStatus(screen string) (StatusCard, bool) {
	lines := strings.Split(screen, "\n")
	tabs := -1
	for i, l := range lines {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "Settings" && f[1] == "Status" {
			tabs = i
		}
	}
	if tabs < 0 {
		return StatusCard{}, false
	}
	card := StatusCard{Fields: map[string]string{}}
	closed := false
	for _, l := range lines[tabs+1:] {
		t := strings.TrimSpace(l)
		if strings.Contains(t, "Esc to close") {
			closed = true
			break
		}
		if m := cardRow().FindStringSubmatch(t); m != nil {
			card.addField(m[1], m[2])
		}
	}
	card.Version = card.Fields["Version"]
	card.Model = firstWord(card.Fields["Model"])
	card.SessionID = card.Fields["Session ID"]
	card.Workspace = card.Fields["cwd"]
	return card, closed && card.Version != "" && uuidRE().MatchString(card.SessionID)
}

// hiddenField reports a card row that names credentials or where they go.
func hiddenField(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"auth", "api key", "token", "base url", "peer address", "key", "password", "passwd", "secret", "credential", "cookie"} {
		if strings.Contains(n, w) && n != "token usage" {
			return true
		}
	}
	return false
}

func (c *StatusCard) addField(name, value string) {
	name = strings.TrimSpace(name)
	if hiddenField(name) {
		return
	}
	if _, dup := c.Fields[name]; dup {
		return
	}
	v := strings.Join(strings.Fields(value), " ")
	c.Fields[name] = Redact(termSafe(v))
}

func firstWord(s string) string {
	if f := strings.Fields(s); len(f) > 0 {
		return f[0]
	}
	return ""
}

// termSafe drops control characters a card value could carry.
func termSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return -1
		}
		return r
	}, s)
}

// lazyRE returns expr compiled once, at the first call: a package's
// expressions are not compiled when a process that never uses them starts.
func lazyRE(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
