package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/dashboard"
	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal"
	"github.com/clawconnect/clawconnect/internal/terminal/watch"
	"github.com/clawconnect/clawconnect/termapi"
)

// fakeTerminals is the Turn service as the dashboard sees it: one Codex
// pane with a Turn waiting for approval, whose callback to its origin
// session failed once.
type fakeTerminals struct {
	mu        sync.Mutex
	status    termapi.TurnStatus
	principal string // who sent the Turn through MCP
	cancelled []string
	// origin and cb are the Turn's origin session and callback state;
	// retryErr, when set, is what RetryCallback refuses with.
	origin   string
	cb       *termapi.CallbackView
	retryErr error
	retried  []string
	// watch is the one watch the fake knows, extra the panes listed after
	// the first one, watchErr what Watches fails with; unwatched records
	// the Unwatch calls (watches_test.go).
	watch     *watch.View
	extra     []termapi.TerminalRow
	watchErr  error
	unwatched []string
}

const turnID = "turn-1"

func (f *fakeTerminals) List(context.Context) (termapi.ListResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return termapi.ListResult{Terminals: append([]termapi.TerminalRow{{
		ID: "terminal:v2:tmux:codex:work:0.0:4242", Agent: "codex", PID: 4242, Cwd: "/src/app",
		ActivityState: "awaiting_approval", ManagementState: "managed", SessionID: "sess-1",
		// Shown as the service fills it: the fake's Turn waits at a prompt.
		CurrentTurn: &termapi.TurnRef{TurnID: turnID, Status: f.status,
			Shown: terminal.ShownStatus(termapi.TurnView{Status: f.status, OriginSession: f.origin, Approval: &termapi.Approval{}})},
	}}, f.extra...)}, nil
}

func (f *fakeTerminals) Status(_ context.Context, id string) (termapi.TurnView, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id != turnID {
		return termapi.TurnView{}, store.ErrNotFound
	}
	return termapi.TurnView{TurnID: turnID, SessionID: "sess-1", Agent: "codex", TerminalID: "terminal:v2:tmux:codex:work:0.0:4242",
		Status: f.status, Approval: &termapi.Approval{Fingerprint: "fp-123", Kind: "exec", Command: "rm -rf <build>"},
		CreatedAt: "2026-12-01T10:00:00Z", UpdatedAt: "2026-12-01T10:01:00Z",
		OriginSession: f.origin, CallbackDelivery: f.cbCopy(), Principal: f.principal}, nil
}

func (f *fakeTerminals) cbCopy() *termapi.CallbackView {
	if f.cb == nil {
		return nil
	}
	c := *f.cb
	return &c
}

// RetryCallback behaves as the service's: refused with retryErr, a
// delivered callback left alone, anything else pending again with a fresh
// budget.
func (f *fakeTerminals) RetryCallback(_ context.Context, id string) (termapi.TurnView, error) {
	f.mu.Lock()
	f.retried = append(f.retried, id)
	err := f.retryErr
	if id != turnID {
		err = fmt.Errorf("retry-callback: %w: no turn %s", termapi.ErrNotFound, id)
	}
	if err == nil && f.cb != nil && f.cb.Status != termapi.CallbackDelivered {
		f.cb.Status, f.cb.Attempts, f.cb.NextAttemptAt = termapi.CallbackPending, 0, "2026-12-01T10:02:00Z"
	}
	f.mu.Unlock()
	if err != nil {
		return termapi.TurnView{}, err
	}
	return f.Status(context.Background(), id)
}

func (f *fakeTerminals) setCallback(origin string, cb *termapi.CallbackView, retryErr error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.origin, f.cb, f.retryErr = origin, cb, retryErr
}

func (f *fakeTerminals) retries() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.retried...)
}

// failedCallback is a callback whose first delivery failed; its session key
// and error carry markup, as untrusted text may.
func failedCallback() *termapi.CallbackView {
	return &termapi.CallbackView{MessageID: "cbm-1", Type: "turn_completed", Kind: "completed",
		SessionKey: "agent:main:<i>x</i>", Status: termapi.CallbackFailed, Attempts: 1,
		LastError: `gateway said <script>alert(1)</script>`, NextAttemptAt: "2026-12-01T10:01:30Z"}
}

func (f *fakeTerminals) Cancel(_ context.Context, id string) (termapi.TurnView, error) {
	f.mu.Lock()
	f.cancelled = append(f.cancelled, id)
	f.status = termapi.TurnCancelling
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
	ft := &fakeTerminals{status: termapi.TurnWaitingForOpenClaw, origin: "agent:main:<i>x</i>", cb: failedCallback()}
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
// sees none of them (the team view does). A Turn has one: a personal token
// sees and cancels its own Turn, and another's answers as a missing one.
func TestTerminalPagesNeedTheOperator(t *testing.T) {
	r, ft := terminalRig(t, "alice:tok-alice-0123456789,bob:tok-bob-0123456789", false)
	ft.principal = "user:alice"
	bob := r.browser(t)
	bob.login("tok-bob-0123456789")
	if code, _, body := bob.get("/terminals"); code != http.StatusForbidden || strings.Contains(body, "4242") {
		t.Errorf("GET /terminals as a personal token: %d, want 403", code)
	}
	code, _, got := bob.get("/turns/" + turnID)
	_, _, missing := bob.get("/turns/turn-2")
	if code != http.StatusNotFound || strings.Contains(got, "4242") || strings.Contains(got, "fp-123") ||
		strings.ReplaceAll(got, turnID, "turn-2") != missing {
		t.Errorf("GET alice's turn as bob: %d, want the missing-turn page:\n%s", code, got)
	}
	_, _, page := bob.get("/")
	if code, _, _ := bob.post("/turns/"+turnID+"/cancel", url.Values{"csrf": {csrfOf(t, page)}}, "self"); code != http.StatusNotFound || len(ft.cancelled) != 0 {
		t.Errorf("cancel of alice's turn as bob: %d, %v", code, ft.cancelled)
	}

	alice := r.browser(t)
	alice.login("tok-alice-0123456789")
	code, _, body := alice.get("/turns/" + turnID)
	if code != http.StatusOK || !strings.Contains(body, "fp-123") || !strings.Contains(body, "Cancel Turn") {
		t.Errorf("GET her own turn as alice: %d", code)
	}
	if strings.Contains(body, "Retry callback") {
		t.Errorf("alice's turn page offers the operator's callback retry")
	}
	if code, _, _ := alice.post("/turns/"+turnID+"/cancel", url.Values{"csrf": {csrfOf(t, body)}}, "self"); code != http.StatusSeeOther || len(ft.cancelled) != 1 {
		t.Errorf("cancel of her own turn as alice: %d, %v", code, ft.cancelled)
	}
	if code, _, _ := alice.post("/turns/"+turnID+"/retry-callback", url.Values{"csrf": {csrfOf(t, body)}}, "self"); code != http.StatusForbidden || len(ft.retries()) != 0 {
		t.Errorf("retry-callback as alice: %d, %v", code, ft.retries())
	}

	team, _ := terminalRig(t, "alice:tok-alice-0123456789", true)
	tb := team.browser(t)
	tb.login("tok-alice-0123456789")
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

// TestTurnCallbackDelivery: the Turn page shows its origin session and its
// callback's delivery state in each status, escaped, with the Retry button
// only where a retry can do something.
func TestTurnCallbackDelivery(t *testing.T) {
	r, ft := terminalRig(t, "", false)
	b := r.browser(t)
	const escKey = "agent:main:&lt;i&gt;x&lt;/i&gt;"
	for _, tt := range []struct {
		status    termapi.CallbackStatus
		edit      func(*termapi.CallbackView)
		want      []string
		wantRetry bool
	}{
		{termapi.CallbackPending, func(c *termapi.CallbackView) { c.Attempts, c.LastError = 0, "" },
			[]string{"Next attempt", "2026-12-01T10:01:30Z"}, true},
		{termapi.CallbackFailed, nil,
			[]string{"Next attempt", "gateway said &lt;script&gt;alert(1)&lt;/script&gt;", `id="callback-error"`}, true},
		{termapi.CallbackExhausted, func(c *termapi.CallbackView) { c.Attempts, c.NextAttemptAt = 8, "" },
			[]string{"<dd>8</dd>", "gateway said &lt;script&gt;"}, true},
		{termapi.CallbackDelivered, func(c *termapi.CallbackView) {
			c.Attempts, c.LastError, c.NextAttemptAt, c.DeliveredAt = 2, "", "", "2026-12-01T10:03:00Z"
		}, []string{"Delivered", "2026-12-01T10:03:00Z"}, false},
	} {
		t.Run(string(tt.status), func(t *testing.T) {
			cb := failedCallback()
			cb.Status = tt.status
			if tt.edit != nil {
				tt.edit(cb)
			}
			ft.setCallback("agent:main:<i>x</i>", cb, nil)
			code, _, body := b.get("/turns/" + turnID)
			if code != http.StatusOK {
				t.Fatalf("turn: %d", code)
			}
			want := append([]string{`id="callback-delivery"`, `class="badge cb-` + string(tt.status) + `"`, "turn_completed", "cbm-1", escKey}, tt.want...)
			for _, w := range want {
				if !strings.Contains(body, w) {
					t.Errorf("turn page lacks %q", w)
				}
			}
			for _, raw := range []string{"<i>x</i>", "<script>alert"} {
				if strings.Contains(body, raw) {
					t.Errorf("turn page shows %q unescaped", raw)
				}
			}
			if got := strings.Contains(body, `id="retry-callback"`); got != tt.wantRetry {
				t.Errorf("retry button shown = %v, want %v", got, tt.wantRetry)
			}
			if tt.status != termapi.CallbackPending && tt.status != termapi.CallbackFailed && strings.Contains(body, "Next attempt") {
				t.Errorf("a %s callback shows a next attempt", tt.status)
			}
		})
	}

	ft.setCallback("", nil, nil)
	_, _, body := b.get("/turns/" + turnID)
	for _, w := range []string{"No callback recorded", "none (no callback)"} {
		if !strings.Contains(body, w) {
			t.Errorf("turn without callback lacks %q", w)
		}
	}
	if strings.Contains(body, `id="retry-callback"`) {
		t.Errorf("retry offered for a Turn without a callback")
	}
}

// TestTurnRetryCallback: the Retry button calls the service's RetryCallback
// behind the same Origin and CSRF checks as Cancel, shows the outcome or the
// refusal, and the open Turn page's stream shows the new delivery state.
func TestTurnRetryCallback(t *testing.T) {
	r, ft := terminalRig(t, "", false)
	b := r.browser(t)
	_, _, page := b.get("/turns/" + turnID)
	token := csrfOf(t, page)
	path := "/turns/" + turnID + "/retry-callback"

	for _, tt := range []struct {
		name   string
		form   url.Values
		origin string
	}{
		{"no token", url.Values{}, "self"},
		{"forged token", url.Values{"csrf": {"forged"}}, "self"},
		{"cross origin", url.Values{"csrf": {token}}, "http://evil.example"},
	} {
		if code, _, _ := b.post(path, tt.form, tt.origin); code != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", tt.name, code)
		}
	}
	if got := ft.retries(); len(got) != 0 {
		t.Fatalf("refused requests reached the service: %v", got)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	s := openStream(ctx, t, b, "/events?page=turn&id="+turnID)
	s.until(t, "cb-failed")
	code, hdr, _ := b.post(path, url.Values{"csrf": {token}}, "self")
	if code != http.StatusSeeOther || hdr.Get("Location") != "/turns/"+turnID {
		t.Fatalf("retry: %d %q", code, hdr.Get("Location"))
	}
	if got := ft.retries(); len(got) != 1 || got[0] != turnID {
		t.Fatalf("retries = %v, want [%s]", got, turnID)
	}
	s.until(t, "cb-pending")
	if _, _, body := b.get("/turns/" + turnID); !strings.Contains(body, "Retry requested: the callback is pending.") ||
		!strings.Contains(body, `class="badge cb-pending"`) {
		t.Errorf("no note or pending state after retry")
	}

	ft.setCallback("agent:main:x", failedCallback(), fmt.Errorf("retry-callback: %w: this store keeps no callback outbox <b>", termapi.ErrRefused))
	if code, _, _ := b.post(path, url.Values{"csrf": {token}}, "self"); code != http.StatusSeeOther {
		t.Fatalf("refused retry: %d, want 303 with the error shown", code)
	}
	_, _, body := b.get("/turns/" + turnID)
	if !strings.Contains(body, "Retry refused: retry-callback: refused: this store keeps no callback outbox &lt;b&gt;") {
		t.Errorf("refusal not shown (escaped) on the page")
	}
	if !strings.Contains(body, `class="badge cb-failed"`) {
		t.Errorf("a refused retry changed the shown state")
	}

	ft.setCallback("agent:main:x", failedCallback(), nil)
	if code, _, _ := b.post("/turns/turn-nope/retry-callback", url.Values{"csrf": {token}}, "self"); code != http.StatusSeeOther {
		t.Errorf("retry of an unknown turn: %d, want 303 with the error shown", code)
	}
	if _, _, body := b.get("/turns/" + turnID); !strings.Contains(body, "Retry refused: retry-callback: not found: no turn turn-nope") {
		t.Errorf("the unknown turn's refusal is not shown")
	}
}

// TestTurnPageWithoutOriginSaysWhoWaits: a Turn that reports to no
// OpenClaw session (sent from the command line or an MCP client) and stops
// at a prompt does not read waiting_for_openclaw, on its page nor as its
// pane's current Turn on the Terminals page.
func TestTurnPageWithoutOriginSaysWhoWaits(t *testing.T) {
	ft := &fakeTerminals{status: termapi.TurnWaitingForOpenClaw, cb: failedCallback()}
	r := newRigWith(t, "", false, func(o *dashboard.Options) { o.Terminals, o.TerminalRecords = ft, fakeRecords{} })
	b := r.browser(t)
	code, _, body := b.get("/turns/" + turnID)
	if code != http.StatusOK || !strings.Contains(body, `id="turn-status" class="badge big t-waiting_for_openclaw">waiting_for_approval<`) ||
		strings.Contains(body, ">waiting_for_openclaw<") {
		t.Fatalf("turn page: %d\n%s", code, body)
	}
	// The Terminals page names the pane's current Turn the same way.
	code, _, body = b.get("/terminals")
	if code != http.StatusOK || !strings.Contains(body, `<span class="badge t-waiting_for_openclaw">waiting_for_approval</span>`) ||
		strings.Contains(body, ">waiting_for_openclaw<") {
		t.Fatalf("terminals page: %d\n%s", code, body)
	}
}
