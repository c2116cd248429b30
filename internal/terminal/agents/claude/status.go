package claude

import (
	"strings"

	"github.com/clawconnect/clawconnect/internal/terminal/agentproc"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
)

// Version implements agents.Inspector.
func (Agent) Version(p agents.Pane) (string, error) {
	return agentproc.ProcessVersion(agentproc.Claude, p.PID)
}

// ProvenVersions implements agents.Inspector.
func (Agent) ProvenVersions() []string { return []string{"2.1.332"} }

// DismissKeys implements agents.Inspector: the Status tab of Claude Code's
// settings dialog closes with Escape.
func (Agent) DismissKeys() []string { return []string{"Escape"} }

// ParseStatus implements agents.Inspector for Claude Code 2.1.332: the
// settings dialog with its Status tab ("Version:", "Session ID:", "cwd:",
// "Model:" rows) and the "Esc to close" footer.
func (Agent) ParseStatus(screen string) (agents.StatusCard, bool) { return parseStatus(screen) }

// parseStatus parses Claude Code's Status dialog on a screen.
func parseStatus(screen string) (agents.StatusCard, bool) {
	lines := strings.Split(screen, "\n")
	tabs := -1
	for i, l := range lines {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "Settings" && f[1] == "Status" {
			tabs = i
		}
	}
	if tabs < 0 {
		return agents.StatusCard{}, false
	}
	card := agents.StatusCard{Fields: map[string]string{}}
	closed := false
	for _, l := range lines[tabs+1:] {
		t := strings.TrimSpace(l)
		if strings.Contains(t, "Esc to close") {
			closed = true
			break
		}
		card.AddRow(t)
	}
	card.Version = card.Fields["Version"]
	card.Model = agents.FirstWord(card.Fields["Model"])
	card.SessionID = card.Fields["Session ID"]
	card.Workspace = card.Fields["cwd"]
	return card, closed && card.Complete()
}
