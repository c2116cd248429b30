package agents_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	"github.com/clawconnect/clawconnect/internal/terminal/native"
)

func TestAnchorOfReadsAnAnchorOrAnEvidenceRecord(t *testing.T) {
	t.Parallel()
	anchor := json.RawMessage(`{"path":"/s/rollout.jsonl","offset_bytes":42}`)
	ev, err := json.Marshal(agents.Evidence{Anchor: anchor, Acceptance: native.Acceptance{Accepted: true, TurnID: "t1"}})
	if err != nil {
		t.Fatal(err)
	}
	for name, raw := range map[string]json.RawMessage{"anchor": anchor, "evidence": ev} {
		if got := agents.AnchorOf(raw); string(got) != string(anchor) {
			t.Errorf("%s: AnchorOf = %s, want %s", name, got, anchor)
		}
	}
}

func TestChangedIsInput(t *testing.T) {
	t.Parallel()
	other := errors.New("disk on fire")
	tests := []struct {
		name  string
		err   error
		found bool
		keeps error
	}{
		{"a replaced file", fmt.Errorf("scan: %w", &native.ScanError{Code: native.CodeIdentityMismatch}), true, nil},
		{"a truncated file", &native.ScanError{Code: native.CodeTruncated}, true, nil},
		{"an unreadable file stays an error", &native.ScanError{Code: native.CodeUnreadable}, false, &native.ScanError{}},
		{"another error stays", other, false, other},
		{"no error", nil, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cur, err := agents.ChangedIsInput(native.Cursor{Offset: 7}, tt.err)
			if cur.Found != tt.found || cur.Offset != 7 {
				t.Fatalf("cursor = %+v, want found %v at offset 7", cur, tt.found)
			}
			var se *native.ScanError
			switch {
			case tt.keeps == nil && err != nil:
				t.Fatalf("err = %v, want none", err)
			case errors.As(tt.keeps, &se) && !errors.As(err, &se):
				t.Fatalf("err = %v, want the scan error", err)
			case tt.keeps == other && !errors.Is(err, other):
				t.Fatalf("err = %v, want %v", err, other)
			}
		})
	}
}

func TestThreadTitleAndOrder(t *testing.T) {
	t.Parallel()
	if got := agents.ThreadTitle("fix\n  the bug OPENAI_API_KEY=sk-abcdefghijklmnop\tplease"); got != "fix the bug OPENAI_API_KEY=[REDACTED] please" {
		t.Errorf("title = %q", got)
	}
	if got := []rune(agents.ThreadTitle(strings.Repeat("é", 300))); len(got) != 201 || got[200] != '…' {
		t.Errorf("long title has %d runes, want 200 and an ellipsis", len(got))
	}
	ts := []agents.NativeThread{{ID: "b", UpdatedAt: 1}, {ID: "c", UpdatedAt: 2}, {ID: "a", UpdatedAt: 1}}
	agents.SortThreads(ts)
	var ids []string
	for _, t := range ts {
		ids = append(ids, t.ID)
	}
	if diff := cmp.Diff([]string{"c", "a", "b"}, ids); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}

func TestStatusCardRows(t *testing.T) {
	t.Parallel()
	var c agents.StatusCard
	for _, l := range []string{"Model: fake-model (reasoning none)", "Model: second wins never", "API key: sk-abcdefghijklmnopqrstuv",
		"Session: 01a232b5-ad6c-73c0-915d-ea5015aac435", "Note: a\x1b[31mred\x07 value", "no row here"} {
		c.AddRow(l)
	}
	want := map[string]string{"Model": "fake-model (reasoning none)", "Session": "01a232b5-ad6c-73c0-915d-ea5015aac435", "Note": "a[31mred value"}
	if diff := cmp.Diff(want, c.Fields); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
	c.Version, c.SessionID = "1.2.3", c.Fields["Session"]
	if !c.Complete() {
		t.Errorf("card %+v is not complete", c)
	}
	if c.SessionID = "unknown"; c.Complete() {
		t.Error("a card without a thread id is complete")
	}
}
