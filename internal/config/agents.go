// Package config turns agents.json and the effective settings
// (internal/settings) into the configuration of the task bridge: the agent
// registry, the timeouts, the terminal settings and the HTTP credentials. It
// never reads the environment itself.
package config

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/clawconnect/clawconnect/internal/settings"
	"github.com/clawconnect/clawconnect/taskapi"
)

// ErrNoConfig is returned by LoadRegistry when neither agents.json nor the
// OPENCLAW_URL/OPENCLAW_PASSWORD fallback is present.
var ErrNoConfig = errors.New("No ClawConnect agent config found. Create ~/.clawconnect/agents.json or set OPENCLAW_URL + OPENCLAW_PASSWORD.") //lint:ignore ST1005 exact user-facing text from the reference

// ErrIncompleteEnv is matched (as is ErrNoConfig) by the error of
// RegistryFromEnv when only one of OPENCLAW_URL and OPENCLAW_PASSWORD is
// set; its text names the one that is missing.
var ErrIncompleteEnv = errors.New("incomplete OPENCLAW_URL/OPENCLAW_PASSWORD configuration")

// DefaultOpenClawAgentID is the OpenClaw agent id used when none is given.
const DefaultOpenClawAgentID = "main"

// AgentsPath returns the path of agents.json under the state directory
// home (settings.Values.Home).
func AgentsPath(home string) string {
	return filepath.Join(home, "agents.json")
}

// LoadRegistry reads agents.json from AgentsPath(v.Home); when the file
// does not exist it builds a single-agent registry from OPENCLAW_URL,
// OPENCLAW_PASSWORD, OPENCLAW_AGENT_ID and CLAWCONNECT_AGENT_ALIAS. It returns
// ErrNoConfig when neither is present and a parse error (with the reference
// message) when the file is invalid.
func LoadRegistry(v settings.Values) (*taskapi.Registry, error) {
	path := AgentsPath(v.Home)
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		r, err := ParseRegistry(data)
		if err != nil {
			var fe *FileError
			if errors.As(err, &fe) {
				fe.Path = path
			}
			return nil, err
		}
		r.Path = path
		return r, nil
	case errors.Is(err, fs.ErrNotExist):
		return RegistryFromEnv(v)
	default:
		return nil, fmt.Errorf("read agents.json: %w", err)
	}
}

// RegistryFromEnv builds the single-agent registry of the environment
// fallback. It returns ErrNoConfig when OPENCLAW_URL and OPENCLAW_PASSWORD
// are both unset, and an error matching ErrNoConfig and ErrIncompleteEnv,
// naming the missing one, when only one is set.
func RegistryFromEnv(v settings.Values) (*taskapi.Registry, error) {
	url, pass := v.OpenClawURL, v.OpenClawPassword
	switch {
	case url == "" && pass == "":
		return nil, ErrNoConfig
	case pass == "":
		return nil, &incompleteEnvError{set: "OPENCLAW_URL", unset: "OPENCLAW_PASSWORD", want: "the gateway's password or token"}
	case url == "":
		return nil, &incompleteEnvError{set: "OPENCLAW_PASSWORD", unset: "OPENCLAW_URL", want: "the gateway's WebSocket URL, e.g. ws://127.0.0.1:18789"}
	}
	agentID := cmp.Or(v.OpenClawAgentID, DefaultOpenClawAgentID)
	alias := v.AgentAlias
	if alias == "" {
		alias = agentID
	}
	return &taskapi.Registry{
		Default: alias,
		Agents:  []taskapi.Agent{{ID: alias, URL: url, Password: pass, OpenClawAgentID: agentID}},
		Source:  taskapi.SourceEnv,
	}, nil
}

// incompleteEnvError is the environment fallback with one of its two
// variables missing.
type incompleteEnvError struct{ set, unset, want string }

func (e *incompleteEnvError) Error() string {
	return fmt.Sprintf("%s is set but %s is empty: set %s to %s (or configure the agents in ~/.clawconnect/agents.json)", e.set, e.unset, e.unset, e.want)
}

func (e *incompleteEnvError) Is(target error) bool {
	return target == ErrNoConfig || target == ErrIncompleteEnv
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

// ParseRegistry validates the contents of an agents.json file. A problem
// that stops it is a *FileError: its Msg is the reference's message
// ("agents.json: entry #<i> missing \"id\"", "agents.json: duplicate agent id
// \"<id>\"", ...; entries are numbered from 0), and its text adds the line
// and column, what was found and what the field should be. Recoverable
// problems (bad groups, unknown members, unknown fields) are recorded in
// Registry.Warnings.
func ParseRegistry(data []byte) (*taskapi.Registry, error) {
	var raw rawFile
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&raw); err != nil {
		return nil, decodeError(data, err)
	}
	var entries []json.RawMessage
	if len(raw.Agents) == 0 || json.Unmarshal(raw.Agents, &entries) != nil || len(entries) == 0 {
		return nil, agentsError(data, raw.Agents)
	}
	offs := agentOffsets(data)
	r := &taskapi.Registry{Source: taskapi.SourceFile}
	seen := make(map[string]bool, len(entries))
	for i, e := range entries {
		off := int64(-1)
		if i < len(offs) {
			off = offs[i]
		}
		var ra rawAgent
		if err := json.Unmarshal(e, &ra); err != nil {
			return nil, fileErr(data, off, fmt.Sprintf("agents.json: entry #%d is not an object", i), "it is "+jsonKind(e)+"; "+fieldWant["entry"])
		}
		var fields map[string]json.RawMessage
		_ = json.Unmarshal(e, &fields)
		missing := func(name, msg string) error {
			return missingField(data, off, e, fields, name, msg)
		}
		a := taskapi.Agent{ID: str(ra.ID)}
		if a.ID == "" {
			return nil, missing("id", fmt.Sprintf(`agents.json: entry #%d missing "id"`, i))
		}
		if a.URL = str(ra.URL); a.URL == "" {
			return nil, missing("url", fmt.Sprintf(`agents.json: entry %q missing "url"`, a.ID))
		}
		if a.Password = str(ra.Password); a.Password == "" {
			return nil, missing("password", fmt.Sprintf(`agents.json: entry %q missing "password"`, a.ID))
		}
		if seen[a.ID] {
			return nil, fileErr(data, keyOffset(data, off, e, "id"), fmt.Sprintf("agents.json: duplicate agent id %q", a.ID), "each agent needs its own id")
		}
		seen[a.ID] = true
		for _, k := range rawKeys(fields) {
			if !slices.Contains(agentFields, k) {
				w := fmt.Sprintf("agents.json: entry %q has unknown field %q; ignored", a.ID, k)
				if c := closest(k, agentFields); c != "" {
					w = fmt.Sprintf("agents.json: entry %q has unknown field %q (did you mean %q?); ignored", a.ID, k, c)
				}
				r.Warnings = append(r.Warnings, w)
			}
		}
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
				return nil, fileErr(data, keyOffset(data, 0, data, "default"), fmt.Sprintf("agents.json: default %q is not a configured agent id", d),
					fieldWant["default"]+": one of "+strings.Join(r.IDs(), ", "))
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
		g := taskapi.Group{Name: name}
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

// decodeError is the FileError of a file that does not decode into
// rawFile: invalid JSON, not an object, or a top-level field of the wrong
// type.
func decodeError(data []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fileErr(data, max(se.Offset-1, 0), "agents.json: invalid JSON: "+err.Error(), "") // Offset is just past the bad byte
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return fileErr(data, int64(len(data)), "agents.json: invalid JSON: unexpected EOF", "the file ends before its JSON does")
	case errors.As(err, &te) && te.Field == "":
		return fileErr(data, skipSpace(data, 0), "agents.json: invalid JSON: the file is "+aOrAn(te.Value)+", not an object", fieldWant["file"])
	case errors.As(err, &te):
		field, _, _ := strings.Cut(te.Field, ".")
		return fileErr(data, keyOffset(data, 0, data, field), fmt.Sprintf("agents.json: %q is %s", field, aOrAn(te.Value)), fieldWant[field])
	}
	return fileErr(data, -1, "agents.json: invalid JSON: "+err.Error(), "")
}

// agentsError is the FileError of a missing, empty or mistyped "agents".
func agentsError(data []byte, agents json.RawMessage) error {
	const msg = `agents.json: "agents" must be a non-empty array`
	if len(agents) > 0 {
		kind := jsonKind(agents)
		if kind == "an array" {
			kind = "an empty array"
		}
		return fileErr(data, keyOffset(data, 0, data, "agents"), msg, "it is "+kind+"; "+fieldWant["agents"])
	}
	var top map[string]json.RawMessage
	_ = json.Unmarshal(data, &top)
	for _, k := range rawKeys(top) {
		if closest(k, []string{"agents"}) != "" {
			return fileErr(data, keyOffset(data, 0, data, k), msg, fmt.Sprintf("found %q (did you mean \"agents\"?); %s", k, fieldWant["agents"]))
		}
	}
	return fileErr(data, skipSpace(data, 0), msg, "the file has no \"agents\"; "+fieldWant["agents"])
}

// missingField is the FileError of an agent entry (at off, raw e) whose
// required field name is missing, empty or not a string; it points at the
// field, or at a misspelling of it.
func missingField(data []byte, off int64, e json.RawMessage, fields map[string]json.RawMessage, name, msg string) error {
	if v, ok := fields[name]; ok {
		return fileErr(data, keyOffset(data, off, e, name), msg, "it is "+jsonKind(v)+"; "+fieldWant[name])
	}
	for _, k := range rawKeys(fields) {
		if !slices.Contains(agentFields, k) && closest(k, []string{name}) != "" {
			return fileErr(data, keyOffset(data, off, e, k), msg, fmt.Sprintf("found %q (did you mean %q?); %s", k, name, fieldWant[name]))
		}
	}
	return fileErr(data, off, msg, fieldWant[name])
}

// rawKeys returns the keys of m, sorted.
func rawKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// aOrAn prefixes a JSON type name ("array", "object", "number") with its
// article.
func aOrAn(kind string) string {
	if kind != "" && strings.ContainsRune("aeiou", rune(kind[0])) {
		return "an " + kind
	}
	return "a " + kind
}

// str returns a trimmed string value, or "" for anything that is not a string.
func str(v any) string {
	s, _ := v.(string)
	return strings.TrimSpace(s)
}
