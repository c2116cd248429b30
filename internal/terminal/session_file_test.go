package terminal

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	"github.com/clawconnect/clawconnect/internal/store/storetest"
	"github.com/clawconnect/clawconnect/termapi"
)

// TestSessionFileIsOnlyEverThisMachines: SessionFile gives a path only for
// a Turn whose pane runs on this machine (a single machine's, or one this
// host sealed); a Turn of another host's pane is an error naming that
// host, and one that names this host without its seal is refused.
func TestSessionFileIsOnlyEverThisMachines(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(t.TempDir(), sqlite.FileName)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	hostA := NewService(Options{Store: st, Host: "hosta", HostKey: []byte(strings.Repeat("k", 32))})
	single := NewService(Options{Store: st})
	anchor := json.RawMessage(`{"path":"/home/dev/.codex/sessions/rollout.jsonl","offset_bytes":12}`)
	put := func(n int, pane string, sealed bool) string {
		id := "turn-" + string(rune('a'+n))
		sess := storetest.TermSession("session-"+id, "", "key-"+id)
		sess.Binding.TerminalID = pane
		if err := st.CreateTermSession(ctx, sess); err != nil {
			t.Fatal(err)
		}
		tc := storetest.NewTurn(id, sess, 1000)
		tc.Turn.Takeover.Submission.Anchor = anchor
		if sealed {
			hostA.sealTurn(tc.Turn)
		}
		if err := st.CreateTurn(ctx, tc); err != nil {
			t.Fatal(err)
		}
		return id
	}
	tests := []struct {
		name     string
		svc      *Service
		turnID   string
		want     error
		says     string
		wantPath string // the path, when given
	}{
		{"another host's pane", hostA, put(0, "terminal:v3:hostb:tmux:codex:work:0.0:4242", false), termapi.ErrOtherHost, "of terminal host hostb", ""},
		{"another host's pane, sealed here", hostA, put(1, "terminal:v3:hostb:tmux:codex:work:0.0:4243", true), termapi.ErrOtherHost, "not this one", ""},
		{"this host's pane, sealed", hostA, put(2, "terminal:v3:hosta:tmux:codex:work:0.0:4244", true), nil, "", "/home/dev/.codex/sessions/rollout.jsonl"},
		{"this host's pane, not sealed", hostA, put(3, "terminal:v3:hosta:tmux:codex:work:0.0:4245", false), termapi.ErrRefused, "seal does not verify", ""},
		{"a single machine's pane", single, put(4, "terminal:v2:tmux:codex:work:0.0:4246", false), nil, "", "/home/dev/.codex/sessions/rollout.jsonl"},
		{"a host's pane, read without a host name", single, "turn-c", termapi.ErrOtherHost, "terminal host hosta", ""},
		{"a malformed turn id", hostA, "nope", termapi.ErrBadInput, "turn id", ""},
		{"an unknown turn", hostA, "turn-none", termapi.ErrNotFound, "no turn turn-none", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := tc.svc.SessionFile(ctx, tc.turnID)
			if !errors.Is(err, tc.want) || (err != nil && !strings.Contains(err.Error(), tc.says)) {
				t.Fatalf("session file: %v; want %v saying %q", err, tc.want, tc.says)
			}
			if f.Path != tc.wantPath {
				t.Errorf("path %q, want %q", f.Path, tc.wantPath)
			}
			if err == nil && f.Offset != 12 {
				t.Errorf("offset %d, want 12", f.Offset)
			}
		})
	}
}
