package executor

import (
	"cmp"
	"encoding/json"
	"slices"
	"time"
)

// PromptTiers are a prompt's three parts, ordered by how often they change:
// Stable is frozen for the session (identity, tool guidance, skills index),
// Context changes infrequently (caller message, team manifest, project
// files), Volatile changes every turn (memory snapshot, last handoff, a
// date-only stamp).
type PromptTiers struct {
	Stable   string
	Context  string
	Volatile string
}

// BreakpointLabel names the tier a cache breakpoint closes.
type BreakpointLabel string

// Breakpoint labels.
const (
	BreakpointStable  BreakpointLabel = "stable"
	BreakpointContext BreakpointLabel = "context"
)

// CacheBreakpoint is a suggested prefix-cache breakpoint. Offset is in UTF-8
// bytes (the unit providers cache on); an Anthropic-style consumer maps it to
// a cache_control marker, others ignore it.
type CacheBreakpoint struct {
	Offset int             `json:"offset"`
	Label  BreakpointLabel `json:"label"`
}

// AssembledPrompt is the result of AssembleTiers.
type AssembledPrompt struct {
	Prompt            string            `json:"prompt"`
	StablePrefix      string            `json:"stablePrefix"`      // identical turn over turn
	StablePrefixBytes int               `json:"stablePrefixBytes"` // UTF-8 bytes
	CacheBreakpoints  []CacheBreakpoint `json:"cacheBreakpoints"`
}

// tierSep joins tiers.
const tierSep = "\n\n"

// AssembleTiers joins the tiers stable → context → volatile with a blank
// line between them, so the frozen content forms the cacheable head and
// only the volatile tail changes per turn. An empty Context or Volatile is
// skipped; an empty Stable is kept as is.
func AssembleTiers(t PromptTiers) AssembledPrompt {
	prefix := t.Stable
	if t.Context != "" {
		prefix = t.Stable + tierSep + t.Context
	}
	prompt := prefix
	if t.Volatile != "" {
		prompt = prefix + tierSep + t.Volatile
	}
	// Go strings are UTF-8, so len is the byte length providers cache on.
	bps := []CacheBreakpoint{{Offset: len(t.Stable), Label: BreakpointStable}}
	if t.Context != "" {
		bps = append(bps, CacheBreakpoint{Offset: len(prefix), Label: BreakpointContext})
	}
	return AssembledPrompt{Prompt: prompt, StablePrefix: prefix, StablePrefixBytes: len(prefix), CacheBreakpoints: bps}
}

// ToolDef is a tool definition as placed in a prompt: a name plus the rest
// of its definition, kept verbatim.
type ToolDef struct {
	Name string          `json:"name"`
	Spec json.RawMessage `json:"spec,omitempty"`
}

// SortToolDefs returns a new slice of defs sorted by name (byte order,
// stable for equal names); defs is not modified. Tool order is a cache key:
// an unsorted list busts the cached tool-definitions prefix.
func SortToolDefs(defs []ToolDef) []ToolDef {
	return SortByName(defs, func(d ToolDef) string { return d.Name })
}

// SortByName is SortToolDefs for any tool-definition type.
func SortByName[T any](defs []T, name func(T) string) []T {
	out := slices.Clone(defs)
	slices.SortStableFunc(out, func(a, b T) int { return cmp.Compare(name(a), name(b)) })
	return out
}

// DateStamp returns t's UTC date as YYYY-MM-DD. Never put a finer-grained
// time into a prompt: it would bust the prefix cache on every rebuild.
func DateStamp(t time.Time) string { return t.UTC().Format(time.DateOnly) }
