package executor

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestAssembleTiers(t *testing.T) {
	tests := []struct {
		name string
		in   PromptTiers
		want AssembledPrompt
	}{
		{"all tiers", PromptTiers{Stable: "S", Context: "C", Volatile: "V"}, AssembledPrompt{
			Prompt: "S\n\nC\n\nV", StablePrefix: "S\n\nC", StablePrefixBytes: 4,
			CacheBreakpoints: []CacheBreakpoint{{1, BreakpointStable}, {4, BreakpointContext}},
		}},
		{"no context", PromptTiers{Stable: "S", Volatile: "V"}, AssembledPrompt{
			Prompt: "S\n\nV", StablePrefix: "S", StablePrefixBytes: 1,
			CacheBreakpoints: []CacheBreakpoint{{1, BreakpointStable}},
		}},
		{"no volatile", PromptTiers{Stable: "S", Context: "C"}, AssembledPrompt{
			Prompt: "S\n\nC", StablePrefix: "S\n\nC", StablePrefixBytes: 4,
			CacheBreakpoints: []CacheBreakpoint{{1, BreakpointStable}, {4, BreakpointContext}},
		}},
		{"empty stable kept", PromptTiers{Context: "C"}, AssembledPrompt{
			Prompt: "\n\nC", StablePrefix: "\n\nC", StablePrefixBytes: 3,
			CacheBreakpoints: []CacheBreakpoint{{0, BreakpointStable}, {3, BreakpointContext}},
		}},
		{"utf-8 bytes not runes", PromptTiers{Stable: "héllo 🦞", Context: "ç"}, AssembledPrompt{
			Prompt: "héllo 🦞\n\nç", StablePrefix: "héllo 🦞\n\nç", StablePrefixBytes: 15,
			CacheBreakpoints: []CacheBreakpoint{{11, BreakpointStable}, {15, BreakpointContext}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, AssembleTiers(tt.in)); diff != "" {
				t.Errorf("AssembleTiers (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStablePrefixIgnoresVolatile(t *testing.T) {
	a := AssembleTiers(PromptTiers{Stable: "S", Context: "C", Volatile: "turn 1"})
	b := AssembleTiers(PromptTiers{Stable: "S", Context: "C", Volatile: "turn 2, longer"})
	if a.StablePrefix != b.StablePrefix || a.Prompt[:a.StablePrefixBytes] != b.Prompt[:b.StablePrefixBytes] {
		t.Errorf("stable prefix changed with the volatile tier: %q vs %q", a.StablePrefix, b.StablePrefix)
	}
}

func TestSortToolDefsDoesNotMutate(t *testing.T) {
	in := []ToolDef{{Name: "write"}, {Name: "Bash"}, {Name: "read", Spec: []byte(`{"a":1}`)}, {Name: "bash"}}
	orig := append([]ToolDef(nil), in...)
	got := SortToolDefs(in)
	want := []ToolDef{{Name: "Bash"}, {Name: "bash"}, {Name: "read", Spec: []byte(`{"a":1}`)}, {Name: "write"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sorted (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(orig, in); diff != "" {
		t.Errorf("input mutated (-want +got):\n%s", diff)
	}
}

func TestDateStamp(t *testing.T) {
	tests := []struct {
		in   time.Time
		want string
	}{
		{time.Date(2026, 11, 30, 23, 59, 59, 0, time.UTC), "2026-11-30"},
		{time.Date(2026, 12, 1, 1, 0, 0, 0, time.FixedZone("CET+2", 2*3600)), "2026-11-30"},
		{time.Date(2026, 11, 30, 20, 0, 0, 0, time.FixedZone("EST", -5*3600)), "2026-12-01"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := DateStamp(tt.in); got != tt.want {
				t.Errorf("DateStamp(%v) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
