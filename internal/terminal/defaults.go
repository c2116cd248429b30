package terminal

import (
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	"github.com/clawconnect/clawconnect/internal/terminal/agents/claude"
	"github.com/clawconnect/clawconnect/internal/terminal/agents/codex"
	"github.com/clawconnect/clawconnect/termapi"
)

// DefaultAgents returns the readers of the real Codex and Claude Code TUIs,
// keyed by agent kind: what Options.Agents holds in the product.
func DefaultAgents() map[string]agents.Agent {
	return map[string]agents.Agent{termapi.AgentCodex: codex.Agent{}, termapi.AgentClaude: claude.Agent{}}
}
