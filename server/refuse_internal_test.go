package server

import (
	"testing"

	"github.com/clawconnect/clawconnect/taskapi"
)

// The schema enum rejects unknown agents first; the refusal text is what a
// caller sees when a scope narrows after the tools were listed.
func TestRefuseAgentText(t *testing.T) {
	t.Parallel()
	c := &conn{scope: taskapi.Scope{Allowed: []string{"alpha", "beta"}, Default: "alpha"}}
	tests := []struct{ agent, want string }{
		{"", ""},
		{"beta", ""},
		{"gamma", `Agent "gamma" is not available on this connection. Allowed: alpha, beta.`},
	}
	for _, tt := range tests {
		t.Run(tt.agent, func(t *testing.T) {
			if got := c.refuseAgent(tt.agent); got != tt.want {
				t.Errorf("refuseAgent(%q) = %q, want %q", tt.agent, got, tt.want)
			}
		})
	}
}
