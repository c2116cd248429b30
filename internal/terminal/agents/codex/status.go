package codex

import (
	"strings"

	"github.com/clawconnect/clawconnect/internal/terminal/agentproc"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
)

// Version implements agents.Inspector.
func (Agent) Version(p agents.Pane) (string, error) {
	return agentproc.ProcessVersion(agentproc.Codex, p.PID)
}

// ProvenVersions implements agents.Inspector.
func (Agent) ProvenVersions() []string { return []string{"0.171.0"} }

// DismissKeys implements agents.Inspector: Codex prints the card into its
// history and leaves the composer empty.
func (Agent) DismissKeys() []string { return nil }

// ParseStatus implements agents.Inspector for Codex 0.171.0: after the
// echoed "/status" line, a header "OpenAI Codex (vX.Y.Z)" and "Name: value"
// rows (Model, Directory, Session, …) up to the composer.
func (Agent) ParseStatus(screen string) (agents.StatusCard, bool) { return parseStatus(screen) }

var cardHeader = lazyRE(`^>_ OpenAI Codex \(v([0-9]+\.[0-9]+\.[0-9]+)\)$`)

// parseStatus parses the newest Codex /status card on a screen.
func parseStatus(screen string) (agents.StatusCard, bool) {
	lines := strings.Split(screen, "\n")
	echo := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == "/status" && !strings.HasPrefix(strings.TrimSpace(l), "›") {
			echo = i
		}
	}
	if echo < 0 {
		return agents.StatusCard{}, false
	}
	card := agents.StatusCard{Fields: map[string]string{}}
	header := false
	for _, l := range lines[echo+1:] {
		t := strings.TrimSpace(strings.Trim(l, "│╭╮╰╯─ "))
		if strings.HasPrefix(strings.TrimSpace(l), "›") {
			break // the composer
		}
		if m := cardHeader().FindStringSubmatch(t); m != nil {
			header, card.Version = true, m[1]
			continue
		}
		if header {
			card.AddRow(t)
		}
	}
	card.Model = agents.FirstWord(card.Fields["Model"])
	card.SessionID = card.Fields["Session"]
	card.Workspace = card.Fields["Directory"]
	return card, header && card.Complete()
}
