package agentsession

import (
	"regexp"
	"strings"
	"testing"
)

// The regular expressions ValidHandle and ValidRuntimeID used to be; the
// hand-written validator must accept exactly the same language.
var (
	handleRE    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	runtimeIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
)

func TestValidSegmentMatchesRegexp(t *testing.T) {
	tests := []struct {
		name string
		in   string
	}{
		{"empty", ""},
		{"one letter", "a"},
		{"one digit", "7"},
		{"upper", "Z"},
		{"typical", "sess-01.part_2"},
		{"leading dot", ".hidden"},
		{"leading dash", "-x"},
		{"leading underscore", "_x"},
		{"dot dot", ".."},
		{"slash", "a/b"},
		{"backslash", `a\b`},
		{"space", "a b"},
		{"trailing newline", "abc\n"},
		{"leading newline", "\nabc"},
		{"nul", "a\x00"},
		{"non-ascii letter", "é"},
		{"non-ascii tail", "aé"},
		{"invalid utf8", "a\xff"},
		{"colon", "agent:main"},
		{"64", strings.Repeat("a", 64)},
		{"65", strings.Repeat("a", 65)},
		{"128", "A" + strings.Repeat("._-9", 31) + "zzz"},
		{"129", strings.Repeat("b", 129)},
		{"129 bad tail", strings.Repeat("b", 128) + "/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := ValidHandle(tt.in), handleRE.MatchString(tt.in); got != want {
				t.Errorf("ValidHandle(%q) = %t, regexp says %t", tt.in, got, want)
			}
			if got, want := ValidRuntimeID(tt.in), runtimeIDRE.MatchString(tt.in); got != want {
				t.Errorf("ValidRuntimeID(%q) = %t, regexp says %t", tt.in, got, want)
			}
		})
	}
}

// FuzzValidSegment checks the hand-written validators against the regular
// expressions they replace on arbitrary input.
func FuzzValidSegment(f *testing.F) {
	for _, s := range []string{"", "a", "sess-1.x_y", ".a", "a/b", "a\n", strings.Repeat("x", 64), strings.Repeat("y", 128), strings.Repeat("z", 129), "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := ValidHandle(s), handleRE.MatchString(s); got != want {
			t.Errorf("ValidHandle(%q) = %t, regexp says %t", s, got, want)
		}
		if got, want := ValidRuntimeID(s), runtimeIDRE.MatchString(s); got != want {
			t.Errorf("ValidRuntimeID(%q) = %t, regexp says %t", s, got, want)
		}
	})
}

func BenchmarkValidHandle(b *testing.B) {
	id := "sess-0123456789abcdef.part_2"
	for b.Loop() {
		if !ValidHandle(id) {
			b.Fatal("rejected")
		}
	}
}

// TestValidSegmentBoundaries puts every byte value at the first, a middle
// and the last position of strings at and around both length limits, and
// compares with the regular expressions.
func TestValidSegmentBoundaries(t *testing.T) {
	for _, n := range []int{1, 2, 63, 64, 65, 127, 128, 129} {
		for _, pos := range []int{0, n / 2, n - 1} {
			for c := range 256 {
				b := []byte(strings.Repeat("a", n))
				b[pos] = byte(c)
				s := string(b)
				if got, want := ValidHandle(s), handleRE.MatchString(s); got != want {
					t.Fatalf("ValidHandle(len %d, byte %#x at %d) = %t, regexp says %t", n, c, pos, got, want)
				}
				if got, want := ValidRuntimeID(s), runtimeIDRE.MatchString(s); got != want {
					t.Fatalf("ValidRuntimeID(len %d, byte %#x at %d) = %t, regexp says %t", n, c, pos, got, want)
				}
			}
		}
	}
}
