package config

import (
	"fmt"
	"slices"
	"strings"
)

// DefaultServerName is the MCP server name when no single labelled group
// names the connection.
const DefaultServerName = "ClawConnect"

// Scope is the set of agents one connection may use.
type Scope struct {
	// Allowed lists the in-scope agent ids in registry order.
	Allowed []string
	// Default is the agent used when a call names none.
	Default string
	// ServerName is what initialize reports for this connection.
	ServerName string
}

// Contains reports whether id is in scope.
func (s Scope) Contains(id string) bool { return slices.Contains(s.Allowed, id) }

// FullScope returns the scope with every agent, used by stdio.
func (r *Registry) FullScope() Scope {
	return Scope{Allowed: r.IDs(), Default: r.Default, ServerName: DefaultServerName}
}

// Scope narrows the registry to the union of the named groups and agents.
// Each value may be comma-joined. Unknown ids and groups are dropped and
// reported in warnings; when nothing resolves every agent is allowed.
func (r *Registry) Scope(groups, agents []string) (Scope, []string) {
	var warnings []string
	want := make(map[string]bool)
	var labels []string
	for _, name := range splitList(groups) {
		g, ok := r.Group(name)
		if !ok {
			warnings = append(warnings, fmt.Sprintf("unknown group %q dropped from scope", name))
			continue
		}
		for _, m := range g.Members {
			want[m] = true
		}
		if g.Label != "" && !slices.Contains(labels, g.Label) {
			labels = append(labels, g.Label)
		}
	}
	for _, id := range splitList(agents) {
		if _, ok := r.Lookup(id); !ok {
			warnings = append(warnings, fmt.Sprintf("unknown agent %q dropped from scope", id))
			continue
		}
		want[id] = true
	}
	if len(want) == 0 {
		return r.FullScope(), warnings
	}
	s := Scope{ServerName: DefaultServerName}
	for _, id := range r.IDs() {
		if want[id] {
			s.Allowed = append(s.Allowed, id)
		}
	}
	s.Default = s.Allowed[0]
	if want[r.Default] {
		s.Default = r.Default
	}
	if len(labels) == 1 {
		s.ServerName = labels[0]
	}
	return s, warnings
}

func splitList(values []string) []string {
	var out []string
	for _, v := range values {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" && !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}
