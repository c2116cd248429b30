package dashboard_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/dashboard"
	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal"
)

// fakeTerminals is the Turn service as the dashboard sees it: one Codex
// pane with a Turn waiting for approval.
type fakeTerminals struct {
	mu        sync.Mutex
	status    string
	cancelled []string
}

const turnID = "turn-1"

func (f *fakeTerminals) List(context.Context) (terminal.ListResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return terminal.ListResult{Terminals: []terminal.TerminalRow{{
		ID: "terminal:v2:tmux:codex:work:0.0:4242", Agent: "codex", PID: 4242, Cwd: "/src/app",
		ActivityState: "awaiting_approval", ManagementState: "managed", SessionID: "sess-1",
		CurrentTurn: &terminal.TurnRef{TurnID: turnID, Status: f.status},
	}}}, nil
}

func (f *fakeTerminals) Status(_ context.Context, id string) (terminal.TurnView, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id != turnID {
		return terminal.TurnView{}, store.ErrNotFound
	}
	return terminal.TurnView{TurnID: turnID, SessionID: "sess-1", Agent: "codex", TerminalID: "terminal:v2:tmux:codex:work:0.0:4242",
		Status: f.status, Approval: &store.Approval{Fingerprint: "fp-123", Kind: "exec", Command: "rm -rf <build>"},
		CreatedAt: "2026-12-01T10:00:00Z", UpdatedAt: "2026-12-01T10:01:00Z"}, nil
}

func (f *fakeTerminals) Cancel(_ context.Context, id string) (terminal.TurnView, error) {
	f.mu.Lock()
	f.cancelled = append(f.cancelled, id)
	f.status = store.TurnCancelling
	f.mu.Unlock()
	return f.Status(context.Background(), id)
}

type fakeRecords struct{}

func (fakeRecords) GetTermSession(_ context.Context, id string) (*store.TermSession, error) {
	return &store.TermSession{SessionID: id, Binding: &store.Binding{Generation: 3}}, nil
}

func (fakeRecords) TurnEvents(context.Context, string, int64, int) ([]store.TurnEvent, error) {
	return []store.TurnEvent{{Seq: 1, TS: time.Date(2026, 12, 1, 10, 0, 5, 0, time.UTC).UnixMilli(), Type: "approval_detected",
		Data: json.RawMessage(`{"command":"<b>bold</b>"}`)}}, nil
}

func terminalRig(t *testing.T, tokens string, shared bool) (*rig, *fakeTerminals) {
	ft := &fakeTerminals{status: store.TurnWaitingForOpenClaw}
	r := newRigWith(t, tokens, shared, func(o *dashboard.Options) {
		o.Terminals, o.TerminalRecords = ft, fakeRecords{}
	})
	return r, ft
}

func TestTerminalPages(t *testing.T) {
	r, ft := terminalRig(t, "", false)
	b := r.browser(t)
	code, _, body := b.get("/terminals")
	if code != http.StatusOK {
		t.Fatalf("terminals: %d", code)
	}
	for _, w := range []string{"terminal:v2:tmux:codex:work:0.0:4242", "awaiting_approval", "sess-1", "generation 3", `href="/turns/turn-1"`} {
		if !strings.Contains(body, w) {
			t.Errorf("terminals page lacks %q", w)
		}
	}
	code, _, body = b.get("/turns/" + turnID)
	if code != http.StatusOK {
		t.Fatalf("turn: %d", code)
	}
	for _, w := range []string{"waiting_for_openclaw", "fp-123", "rm -rf &lt;build&gt;", "approval_detected", "&lt;b&gt;bold&lt;/b&gt;", "Cancel Turn"} {
		if !strings.Contains(body, w) {
			t.Errorf("turn page lacks %q", w)
		}
	}
	if code, _, _ := b.get("/turns/nope"); code != http.StatusNotFound {
		t.Errorf("missing turn: %d, want 404", code)
	}
	if code, _, _ := b.post("/turns/"+turnID+"/cancel", url.Values{"csrf": {"forged"}}, "self"); code != http.StatusForbidden || len(ft.cancelled) != 0 {
		t.Errorf("forged cancel: %d, %v", code, ft.cancelled)
	}
	code, _, _ = b.post("/turns/"+turnID+"/cancel", url.Values{"csrf": {csrfOf(t, body)}}, "self")
	if code != http.StatusSeeOther || len(ft.cancelled) != 1 {
		t.Fatalf("cancel: %d, %v", code, ft.cancelled)
	}
	if _, _, body := b.get("/turns/" + turnID); !strings.Contains(body, "Cancel requested: the Turn is cancelling") {
		t.Errorf("no note after cancel")
	}

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	s := openStream(ctx, t, b, "/events?page=terminals")
	s.until(t, "generation 3")
	s = openStream(ctx, t, b, "/events?page=turn&id="+turnID)
	s.until(t, "cancelling")
}

// TestTerminalPagesNeedTheOperator: panes have no owner, so a personal token
// sees none of them (the team view does).
func TestTerminalPagesNeedTheOperator(t *testing.T) {
	r, ft := terminalRig(t, "alice:tok-alice", false)
	b := r.browser(t)
	b.login("tok-alice")
	for _, p := range []string{"/terminals", "/turns/" + turnID} {
		if code, _, body := b.get(p); code != http.StatusForbidden || strings.Contains(body, "4242") {
			t.Errorf("GET %s as a personal token: %d, want 403", p, code)
		}
	}
	_, _, page := b.get("/")
	if code, _, _ := b.post("/turns/"+turnID+"/cancel", url.Values{"csrf": {csrfOf(t, page)}}, "self"); code != http.StatusForbidden || len(ft.cancelled) != 0 {
		t.Errorf("cancel as a personal token: %d, %v", code, ft.cancelled)
	}

	team, _ := terminalRig(t, "alice:tok-alice", true)
	tb := team.browser(t)
	tb.login("tok-alice")
	if code, _, _ := tb.get("/terminals"); code != http.StatusOK {
		t.Errorf("team view: %d, want 200", code)
	}
}

func TestTerminalPagesWithoutService(t *testing.T) {
	r := newRig(t, "")
	if code, _, body := r.browser(t).get("/terminals"); code != http.StatusServiceUnavailable || !strings.Contains(body, "not running") {
		t.Errorf("no service: %d", code)
	}
}
