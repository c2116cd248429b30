package config

import (
	"strings"
	"time"
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
	// (CLAWCONNECT_TERMINAL_INACTIVITY_MS, default 60 min;
	// CLAWCONNECT_TERMINAL_HARD_MS, default 720 min).
	InactivityTimeout, HardTimeout time.Duration
	// Recheck is each monitor's slow safety re-check
	// (CLAWCONNECT_TERMINAL_RECHECK_MS, default 10 s).
	Recheck time.Duration
	// Tools adds the terminal tools to the MCP servers of mcp and serve
	// (CLAWCONNECT_TERMINAL_TOOLS=1; off by default).
	Tools bool
}

// LoadTerminal reads the terminal-turn settings.
func LoadTerminal(getenv func(string) string) Terminal {
	getenv = orEmpty(getenv)
	t := Terminal{TMUX: getenv("TMUX")}
	for s := range strings.SplitSeq(getenv("CLAWCONNECT_TMUX_SOCKETS"), ",") {
		if s = strings.TrimSpace(s); s != "" {
			t.Sockets = append(t.Sockets, s)
		}
	}
	switch strings.ToLower(strings.TrimSpace(getenv("CLAWCONNECT_TMUX_DEFAULT_SERVER"))) {
	case "off", "0", "false", "no":
		t.NoDefaultServer = true
	}
	t.InactivityTimeout = Millis(getenv, "CLAWCONNECT_TERMINAL_INACTIVITY_MS", 60*time.Minute)
	t.HardTimeout = Millis(getenv, "CLAWCONNECT_TERMINAL_HARD_MS", 720*time.Minute)
	t.Recheck = Millis(getenv, "CLAWCONNECT_TERMINAL_RECHECK_MS", 10*time.Second)
	switch strings.ToLower(strings.TrimSpace(getenv("CLAWCONNECT_TERMINAL_TOOLS"))) {
	case "1", "on", "true", "yes":
		t.Tools = true
	}
	return t
}
