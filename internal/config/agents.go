// Package config turns agents.json and the process environment into the
// settings of the task bridge: the agent registry, the timeouts and the HTTP
// credentials. It never reads the environment itself; callers pass a getenv
// function, so tests and embedding hosts control every input.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ErrNoConfig is returned by LoadRegistry when neither agents.json nor the
// OPENCLAW_URL/OPENCLAW_PASSWORD fallback is present.
var ErrNoConfig = errors.New("No ClawConnect agent config found. Create ~/.clawconnect/agents.json or set OPENCLAW_URL + OPENCLAW_PASSWORD.") //lint:ignore ST1005 exact user-facing text from the reference

// ErrUnknownAgent is wrapped by Registry.Resolve when the id names no agent.
var ErrUnknownAgent = errors.New("unknown agent")

// Sources of a registry, as reported by Registry.Source.
const (
	SourceFile = "file"
	SourceEnv  = "env"
)

// DefaultOpenClawAgentID is the OpenClaw agent id used when none is given.
const DefaultOpenClawAgentID = "main"

// Agent is one configured OpenClaw agent.
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

// Registry is the validated agent configuration. It is immutable after
// construction and safe for concurrent use.
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

// Home returns the ClawConnect state directory: CLAWCONNECT_HOME, or
// $HOME/.clawconnect.
func Home(getenv func(string) string) string {
	getenv = orEmpty(getenv)
	if h := strings.TrimSpace(getenv("CLAWCONNECT_HOME")); h != "" {
		return h
	}
	return filepath.Join(getenv("HOME"), ".clawconnect")
}

// AgentsPath returns the path of agents.json under Home.
func AgentsPath(getenv func(string) string) string {
	return filepath.Join(Home(getenv), "agents.json")
}

// LoadRegistry reads agents.json from AgentsPath; when the file does not
// exist it builds a single-agent registry from OPENCLAW_URL,
// OPENCLAW_PASSWORD, OPENCLAW_AGENT_ID and CLAWCONNECT_AGENT_ALIAS. It returns
// ErrNoConfig when neither is present and a parse error (with the reference
// message) when the file is invalid.
func LoadRegistry(getenv func(string) string) (*Registry, error) {
	getenv = orEmpty(getenv)
	path := AgentsPath(getenv)
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		r, err := ParseRegistry(data)
		if err != nil {
			return nil, err
		}
		r.Path = path
		return r, nil
	case errors.Is(err, fs.ErrNotExist):
		return RegistryFromEnv(getenv)
	default:
		return nil, fmt.Errorf("read agents.json: %w", err)
	}
}

// RegistryFromEnv builds the single-agent registry of the environment
// fallback, or returns ErrNoConfig when OPENCLAW_URL or OPENCLAW_PASSWORD is
// unset.
func RegistryFromEnv(getenv func(string) string) (*Registry, error) {
	getenv = orEmpty(getenv)
	url := strings.TrimSpace(getenv("OPENCLAW_URL"))
	pass := strings.TrimSpace(getenv("OPENCLAW_PASSWORD"))
	if url == "" || pass == "" {
		return nil, ErrNoConfig
	}
	agentID := strings.TrimSpace(getenv("OPENCLAW_AGENT_ID"))
	if agentID == "" {
		agentID = DefaultOpenClawAgentID
	}
	alias := strings.TrimSpace(getenv("CLAWCONNECT_AGENT_ALIAS"))
	if alias == "" {
		alias = agentID
	}
	return &Registry{
		Default: alias,
		Agents:  []Agent{{ID: alias, URL: url, Password: pass, OpenClawAgentID: agentID}},
		Source:  SourceEnv,
	}, nil
}

// rawFile mirrors agents.json loosely so that each rule can report its own
// message instead of a generic type error.
type rawFile struct {
	Default     *string                    `json:"default"`
	Agents      json.RawMessage            `json:"agents"`
	Groups      map[string]json.RawMessage `json:"groups"`
	GroupLabels map[string]json.RawMessage `json:"groupLabels"`
}

type rawAgent struct {
	ID              any `json:"id"`
	URL             any `json:"url"`
	Password        any `json:"password"`
	OpenClawAgentID any `json:"openclawAgentId"`
	Emoji           any `json:"emoji"`
	Role            any `json:"role"`
	Description     any `json:"description"`
	WhenToUse       any `json:"whenToUse"`
	QMDURL          any `json:"qmdUrl"`
	QMDToken        any `json:"qmdToken"`
	Collections     any `json:"collections"`
}

// ParseRegistry validates the contents of an agents.json file. Errors carry
// the exact messages of the reference ("agents.json: entry #<i> missing
// \"id\"", "agents.json: duplicate agent id \"<id>\"", ...); entries are
// numbered from 0. Recoverable problems (bad groups, unknown members) are
// recorded in Registry.Warnings.
func ParseRegistry(data []byte) (*Registry, error) {
	var raw rawFile
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("agents.json: invalid JSON: %w", err)
	}
	var entries []json.RawMessage
	if len(raw.Agents) == 0 || json.Unmarshal(raw.Agents, &entries) != nil || len(entries) == 0 {
		return nil, errors.New(`agents.json: "agents" must be a non-empty array`)
	}
	r := &Registry{Source: SourceFile}
	seen := make(map[string]bool, len(entries))
	for i, e := range entries {
		var ra rawAgent
		if err := json.Unmarshal(e, &ra); err != nil {
			return nil, fmt.Errorf("agents.json: entry #%d is not an object", i)
		}
		a := Agent{ID: str(ra.ID)}
		if a.ID == "" {
			return nil, fmt.Errorf(`agents.json: entry #%d missing "id"`, i)
		}
		if a.URL = str(ra.URL); a.URL == "" {
			return nil, fmt.Errorf(`agents.json: entry %q missing "url"`, a.ID)
		}
		if a.Password = str(ra.Password); a.Password == "" {
			return nil, fmt.Errorf(`agents.json: entry %q missing "password"`, a.ID)
		}
		if seen[a.ID] {
			return nil, fmt.Errorf("agents.json: duplicate agent id %q", a.ID)
		}
		seen[a.ID] = true
		if a.OpenClawAgentID = str(ra.OpenClawAgentID); a.OpenClawAgentID == "" {
			a.OpenClawAgentID = DefaultOpenClawAgentID
		}
		a.Emoji, a.Role, a.Description = str(ra.Emoji), str(ra.Role), str(ra.Description)
		a.WhenToUse, a.QMDURL, a.QMDToken = str(ra.WhenToUse), str(ra.QMDURL), str(ra.QMDToken)
		if list, ok := ra.Collections.([]any); ok {
			for _, c := range list {
				if s := str(c); s != "" {
					a.Collections = append(a.Collections, s)
				}
			}
		}
		r.Agents = append(r.Agents, a)
	}
	r.Default = r.Agents[0].ID
	if raw.Default != nil {
		if d := strings.TrimSpace(*raw.Default); d != "" {
			if !seen[d] {
				return nil, fmt.Errorf("agents.json: default %q is not a configured agent id", d)
			}
			r.Default = d
		}
	}
	names := make([]string, 0, len(raw.Groups))
	for name := range raw.Groups {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		var members []any
		if err := json.Unmarshal(raw.Groups[name], &members); err != nil {
			r.Warnings = append(r.Warnings, fmt.Sprintf("agents.json: group %q is not an array; skipped", name))
			continue
		}
		g := Group{Name: name}
		for _, m := range members {
			id := str(m)
			switch {
			case !seen[id]:
				r.Warnings = append(r.Warnings, fmt.Sprintf("agents.json: group %q names unknown agent %q; dropped", name, id))
			case slices.Contains(g.Members, id):
			default:
				g.Members = append(g.Members, id)
			}
		}
		if len(g.Members) == 0 {
			r.Warnings = append(r.Warnings, fmt.Sprintf("agents.json: group %q is empty; dropped", name))
			continue
		}
		if lbl, ok := raw.GroupLabels[name]; ok {
			var s any
			if json.Unmarshal(lbl, &s) == nil {
				g.Label = str(s)
			}
		}
		r.Groups = append(r.Groups, g)
	}
	return r, nil
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

// str returns a trimmed string value, or "" for anything that is not a string.
func str(v any) string {
	s, _ := v.(string)
	return strings.TrimSpace(s)
}

func orEmpty(getenv func(string) string) func(string) string {
	if getenv == nil {
		return func(string) string { return "" }
	}
	return getenv
}
