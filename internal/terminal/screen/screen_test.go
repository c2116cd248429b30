package screen

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLines(t *testing.T) {
	t.Parallel()
	in := "\x1b[1m›\x1b[0m\x1b[39m\x1b[49m \x1b[2mAsk\x1b[0m  \r\nnext\rthird\u00a0\n\n\n"
	want := []string{"› Ask", "next", "third"}
	if diff := cmp.Diff(want, Lines(in)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if Fingerprint([]string{"a", "b"}) == Fingerprint([]string{"a b"}) {
		t.Error("fingerprint does not separate lines")
	}
	// sha256("a\nb"), computed independently.
	if got := Fingerprint([]string{"a", "b"}); got != "7e18f737311b2dc3b2f269dd78396b0351f14fb66efa879f768cb23181883c78" {
		t.Errorf("fingerprint %s", got)
	}
}

func TestDraftShows(t *testing.T) {
	t.Parallel()
	tests := []struct {
		draft, payload string
		want           bool
	}{
		{"first line\nsecond", "first line\nsecond", true},
		{"a long line that wr\naps", "a long line that wraps", true},
		{"say hello", "say hello!", false},
		{"", "", false},
		{"x", "", false},
		{"[Pasted Content 11 chars]", "a\tb\nccccc é", true},
		{"[Pasted Content 12 chars]", "a\tb\nccccc é", false},
		{"[Pasted text #1 +1 lines]", "a\tb\nccccc é", true},
		{"[Pasted text #3 +2 lines]", "a\tb\nccccc é", false},
		{"[Pasted text #1 +1 lines] x", "a\tb\nccccc é", false},
	}
	for _, tt := range tests {
		if got := DraftShows(tt.draft, tt.payload); got != tt.want {
			t.Errorf("DraftShows(%q, %q) = %v, want %v", tt.draft, tt.payload, got, tt.want)
		}
	}
}
