package config

import (
	"time"

	"github.com/clawconnect/clawconnect/internal/settings"
)

// Terminal holds the settings of terminal turns.
type Terminal struct {
	// TMUX is the caller's $TMUX: the server it names is searched too.
	TMUX string
	// Sockets are extra tmux server sockets (CLAWCONNECT_TMUX_SOCKETS,
	// comma-separated).
	Sockets []string
	// NoDefaultServer leaves out tmux's default server
	// (CLAWCONNECT_TMUX_DEFAULT_SERVER=off).
	NoDefaultServer bool
	// InactivityTimeout and HardTimeout stall a Turn
	// (CLAWCONNECT_TERMINAL_INACTIVITY_MS, CLAWCONNECT_TERMINAL_HARD_MS).
	InactivityTimeout, HardTimeout time.Duration
	// Recheck is each monitor's slow safety re-check
	// (CLAWCONNECT_TERMINAL_RECHECK_MS).
	Recheck time.Duration
	// Tools adds the terminal tools to the MCP servers of mcp and serve
	// (CLAWCONNECT_TERMINAL_TOOLS=1).
	Tools bool
	// AllowUnproven sends Turns to agent versions without recorded
	// goldens (CLAWCONNECT_TERMINAL_UNPROVEN=1).
	AllowUnproven bool
	// AutoApproveFile is the auto-approve rules file
	// (CLAWCONNECT_TERMINAL_AUTO_APPROVE_FILE); "" for none.
	AutoApproveFile string
	// Host names this machine in terminal ids on a shared store
	// (CLAWCONNECT_TERMINAL_HOST); "" means its host name.
	Host string
	// HostLease is a monitor host's lease
	// (CLAWCONNECT_TERMINAL_HOST_LEASE_MS).
	HostLease time.Duration
}

// TerminalFrom takes the terminal-turn settings from the effective
// settings.
func TerminalFrom(v settings.Values) Terminal {
	return Terminal{
		TMUX: v.TMUX, Sockets: v.TmuxSockets, NoDefaultServer: !v.TmuxDefaultServer,
		InactivityTimeout: v.TerminalInactivity, HardTimeout: v.TerminalHard, Recheck: v.TerminalRecheck,
		Tools: v.TerminalTools, AllowUnproven: v.TerminalUnproven, AutoApproveFile: v.TerminalAutoApproveFile,
		Host: v.TerminalHost, HostLease: v.TerminalHostLease,
	}
}
