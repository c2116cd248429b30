package taskapi

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrUnknownAgent is wrapped by Registry.Resolve when the id names no agent.
var ErrUnknownAgent = errors.New("unknown agent")

// Sources of a registry, as reported by Registry.Source.
const (
	SourceFile = "file"
	SourceEnv  = "env"
)

// Agent is one configured OpenClaw agent. URL and Password reach its
// gateway and are never shown to MCP clients; list_agents shows the
// descriptive fields, and MemorySearchable when QMDToken is set.
type Agent struct {
	ID              string   `json:"id"`
	URL             string   `json:"url"`
	Password        string   `json:"password"`
	OpenClawAgentID string   `json:"openclawAgentId"`
	Emoji           string   `json:"emoji,omitempty"`
	Role            string   `json:"role,omitempty"`
	Description     string   `json:"description,omitempty"`
	WhenToUse       string   `json:"whenToUse,omitempty"`
	QMDURL          string   `json:"qmdUrl,omitempty"`
	QMDToken        string   `json:"qmdToken,omitempty"`
	Collections     []string `json:"collections,omitempty"`
}

// Group is a named set of agent ids, in file order.
type Group struct {
	Name    string
	Label   string // from groupLabels; empty when none
	Members []string
}

// Registry is the validated agent configuration: the agents a server
// offers, their groups and the default. Treat it as immutable once built;
// it is then safe for concurrent use. A host may fill it by hand; the
// clawconnect commands load it from agents.json or the environment.
type Registry struct {
	// Default is the id of the agent used when a caller names none.
	Default string
	// Agents holds the agents in configuration order.
	Agents []Agent
	// Groups holds the non-empty groups, sorted by name.
	Groups []Group
	// Source is SourceFile or SourceEnv.
	Source string
	// Path is the agents.json path when Source is SourceFile.
	Path string
	// Warnings lists the entries that were dropped or repaired while parsing.
	Warnings []string
}

// IDs returns the agent ids in configuration order.
func (r *Registry) IDs() []string {
	ids := make([]string, len(r.Agents))
	for i, a := range r.Agents {
		ids[i] = a.ID
	}
	return ids
}

// Lookup returns the agent with the given id.
func (r *Registry) Lookup(id string) (Agent, bool) {
	for _, a := range r.Agents {
		if a.ID == id {
			return a, true
		}
	}
	return Agent{}, false
}

// Group returns the group with the given name.
func (r *Registry) Group(name string) (Group, bool) {
	for _, g := range r.Groups {
		if g.Name == name {
			return g, true
		}
	}
	return Group{}, false
}

// Resolve returns the default agent for an empty id and the named agent
// otherwise. An unknown id gives an error wrapping ErrUnknownAgent whose text
// is `Unknown agent "<x>". Configured agents: a, b`.
func (r *Registry) Resolve(id string) (Agent, error) {
	id = strings.TrimSpace(id)
	if id == "" {
		id = r.Default
	}
	if a, ok := r.Lookup(id); ok {
		return a, nil
	}
	return Agent{}, &unknownAgentError{id: id, known: r.IDs()}
}

type unknownAgentError struct {
	id    string
	known []string
}

func (e *unknownAgentError) Error() string {
	return fmt.Sprintf("Unknown agent %q. Configured agents: %s", e.id, strings.Join(e.known, ", "))
}

func (e *unknownAgentError) Unwrap() error { return ErrUnknownAgent }

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

// Identity is who an HTTP request authenticated as. User is empty for an
// anonymous caller; Legacy is set when the shared PUBLIC_MCP_PASS was used.
type Identity struct {
	User   string
	Legacy bool
}
