package dashboard_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/dashboard"
	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/watch"
	"github.com/clawconnect/clawconnect/termapi"
)

const (
	watchID      = "watch-20261201T101500-0a1b2c3d"
	watchPane    = "terminal:v2:tmux:claude:work:0.1:5151"
	conflictPane = "terminal:v2:tmux:codex:work:0.2:6161"
)

// Watches, WatchStatus and Unwatch behave as the service's: one watch,
// listed while active, cancelled once by Unwatch and left as it is after.
func (f *fakeTerminals) Watches(context.Context, int) ([]watch.View, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.watchErr != nil {
		return nil, f.watchErr
	}
	if f.watch == nil || f.watch.Status != store.WatchActive {
		return []watch.View{}, nil
	}
	return []watch.View{f.watchCopy()}, nil
}

func (f *fakeTerminals) WatchStatus(_ context.Context, id string) (watch.View, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.watch == nil || id != f.watch.WatchID {
		return watch.View{}, fmt.Errorf("watch status: %w: no watch %s", termapi.ErrNotFound, id)
	}
	return f.watchCopy(), nil
}

func (f *fakeTerminals) Unwatch(_ context.Context, id string) (watch.View, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unwatched = append(f.unwatched, id)
	if f.watch == nil || id != f.watch.WatchID {
		return watch.View{}, fmt.Errorf("unwatch: %w: no watch %s", termapi.ErrNotFound, id)
	}
	if f.watch.Status == store.WatchActive {
		f.watch.Status = store.WatchCancelled
		f.watch.Settlement = &store.WatchSettlement{Kind: store.WatchCancelled, Text: "unwatched", SettledAt: time.Date(2026, 12, 1, 10, 20, 0, 0, time.UTC).UnixMilli()}
		f.watch.PendingActions = nil
	}
	return f.watchCopy(), nil
}

func (f *fakeTerminals) watchCopy() watch.View {
	v := *f.watch
	if v.Settlement != nil {
		s := *v.Settlement
		v.Settlement = &s
	}
	v.Notifications = append([]termapi.CallbackView(nil), v.Notifications...)
	return v
}

func (f *fakeTerminals) setWatch(v *watch.View) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.watch = v
}

func (f *fakeTerminals) unwatchCalls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.unwatched...)
}

// activeWatch is a watch of a Claude Code pane whose task the human has
// started; its approval notification failed once, with markup in the
// origin session and the error (untrusted text).
func activeWatch() *watch.View {
	return &watch.View{WatchID: watchID, Status: store.WatchActive, Agent: "claude", TerminalID: watchPane,
		SessionID: "sess-w", OriginSession: "agent:main:<b>w</b>", NativeTurnID: "native-7", TaskSeen: true,
		CreatedAt: "2026-12-01T10:15:00Z", DeadlineAt: "2026-12-01T22:15:00Z",
		Notifications: []termapi.CallbackView{{MessageID: "msg-watch-1", Type: "question", Kind: "watch_approval",
			SessionKey: "agent:main:<b>w</b>", Status: termapi.CallbackFailed, Attempts: 2,
			LastError: `gateway said <script>alert(2)</script>`, NextAttemptAt: "2026-12-01T10:20:00Z"}},
		PendingActions: []string{"clawconnect terminal unwatch " + watchID}}
}

// watchedPanes are the panes listed after the fake's first: one watched,
// one whose thread a human switched, with an uncertain transition left.
func watchedPanes() []termapi.TerminalRow {
	adopt := "clawconnect terminal adopt-thread " + conflictPane
	detach := "clawconnect terminal detach sess-9"
	return []termapi.TerminalRow{
		{ID: watchPane, Agent: "claude", PID: 5151, Cwd: "/src/web", ActivityState: "working", ManagementState: "managed",
			SessionID: "sess-w", BindingGeneration: 5, AvailableActions: []termapi.Action{}},
		{ID: conflictPane, Agent: "codex", PID: 6161, Cwd: "/src/api", ActivityState: "idle", ManagementState: "conflict",
			SessionID: "sess-9", BindingGeneration: 2, NativeThreadID: "thread-new",
			Conflict: &termapi.ThreadConflict{SessionID: "sess-9", BoundThreadID: "thread-old", PaneThreadID: "thread-new",
				Reason: "the pane's native thread changed by hand", Choices: []string{adopt, detach}},
			Transition: &termapi.TransitionView{TransitionID: "transition-42", Kind: "new_thread", Status: store.TransitionUncertain,
				TerminalID: conflictPane, Agent: "codex", Reason: "the process died <mid-way>",
				RecoveryActions: []string{"clawconnect terminal resolve-transition transition-42 --adopt",
					"clawconnect terminal resolve-transition transition-42 --abort"}},
			Reason: "the pane's native thread changed by hand", AvailableActions: []termapi.Action{}},
	}
}

func watchRig(t *testing.T, tokens string, shared bool) (*rig, *fakeTerminals) {
	t.Helper()
	r, ft := terminalRig(t, tokens, shared)
	ft.mu.Lock()
	ft.watch, ft.extra = activeWatch(), watchedPanes()
	ft.mu.Unlock()
	return r, ft
}

// row returns the table row of the pane id in a Terminals page.
func row(t *testing.T, body, id string) string {
	t.Helper()
	i := strings.Index(body, `<tr data-terminal="`+id+`"`)
	if i < 0 {
		t.Fatalf("no row for %s in:\n%s", id, body)
	}
	end := strings.Index(body[i:], "</tr>")
	return body[i : i+end]
}

// TestTerminalsPageShowsWatchAndConflict: each pane shows its active watch
// (a link to its page, origin session, task seen, deadline), a conflict row
// its two ways out as the exact commands, and an unfinished transition its
// state and recovery commands; untrusted text is escaped.
func TestTerminalsPageShowsWatchAndConflict(t *testing.T) {
	r, ft := watchRig(t, "", false)
	b := r.browser(t)
	code, _, body := b.get("/terminals")
	if code != http.StatusOK {
		t.Fatalf("terminals: %d", code)
	}
	watched := row(t, body, watchPane)
	for _, w := range []string{`data-watch="` + watchID + `"`, `href="/watches/` + watchID + `"`,
		"agent:main:&lt;b&gt;w&lt;/b&gt;", "task seen", "until 2026-12-01T22:15:00Z", "generation 5"} {
		if !strings.Contains(watched, w) {
			t.Errorf("watched row lacks %q:\n%s", w, watched)
		}
	}
	if strings.Contains(body, "<b>w</b>") {
		t.Error("the origin session is shown unescaped")
	}
	if first := row(t, body, "terminal:v2:tmux:codex:work:0.0:4242"); strings.Contains(first, "/watches/") {
		t.Errorf("an unwatched pane shows a watch:\n%s", first)
	}
	conflict := row(t, body, conflictPane)
	for _, w := range []string{`data-conflict="true"`, "badge m-conflict", "thread-old", "thread-new",
		"Adopt the pane&#39;s thread (a transition: new Session binding): <code>clawconnect terminal adopt-thread " + conflictPane + "</code>",
		"Keep the old Session detached from this pane: <code>clawconnect terminal detach sess-9</code>",
		`data-transition="transition-42"`, "badge tr-uncertain", "the process died &lt;mid-way&gt;",
		"<code>clawconnect terminal resolve-transition transition-42 --adopt</code>",
		"<code>clawconnect terminal resolve-transition transition-42 --abort</code>", "generation 2"} {
		if !strings.Contains(conflict, w) {
			t.Errorf("conflict row lacks %q:\n%s", w, conflict)
		}
	}

	// A watch the human has not started yet says so; the stream shows it.
	w := activeWatch()
	w.TaskSeen, w.NativeTurnID = false, ""
	ft.setWatch(w)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	openStream(ctx, t, b, "/events?page=terminals").until(t, "waiting for the human")

	// Watches failing leaves the panes shown, with the reason.
	ft.mu.Lock()
	ft.watchErr = errors.New("store <down>")
	ft.mu.Unlock()
	code, _, body = b.get("/terminals")
	if code != http.StatusOK || !strings.Contains(body, "The active watches could not be read: store &lt;down&gt;") ||
		!strings.Contains(body, `data-terminal="`+watchPane+`"`) {
		t.Errorf("terminals with a failing watch list: %d\n%s", code, body)
	}
}

// TestWatchPage: the watch page shows the watch, its notifications'
// delivery and its settlement, escaped; an unknown watch is 404.
func TestWatchPage(t *testing.T) {
	r, ft := watchRig(t, "", false)
	b := r.browser(t)
	code, _, body := b.get("/watches/" + watchID)
	if code != http.StatusOK {
		t.Fatalf("watch: %d", code)
	}
	for _, w := range []string{`id="watch-status" class="badge big w-active"`, "claude", watchPane, "sess-w",
		"agent:main:&lt;b&gt;w&lt;/b&gt;", "native-7", "2026-12-01T22:15:00Z", `id="unwatch"`,
		`action="/watches/` + watchID + `/unwatch"`, "Not settled",
		`data-message="msg-watch-1"`, "watch_approval", "badge cb-failed", "<td data-label=\"Attempts\">2</td>",
		"gateway said &lt;script&gt;alert(2)&lt;/script&gt;", "2026-12-01T10:20:00Z"} {
		if !strings.Contains(body, w) {
			t.Errorf("watch page lacks %q", w)
		}
	}

	done := activeWatch()
	done.Status = store.WatchCompleted
	done.Settlement = &store.WatchSettlement{Kind: store.WatchCompleted, Text: `<script>document.title="pwned"</script> all done`,
		Match: "claude_end_turn", MessageID: "msg-watch-2", SettledAt: time.Date(2026, 12, 1, 12, 15, 0, 0, time.UTC).UnixMilli()}
	ft.setWatch(done)
	_, _, body = b.get("/watches/" + watchID)
	for _, w := range []string{"badge big w-completed", `id="settlement-text" class="text">&lt;script&gt;document.title=&#34;pwned&#34;&lt;/script&gt; all done`,
		"claude_end_turn", "msg-watch-2", "2026-12-01 12:15:00 UTC"} {
		if !strings.Contains(body, w) {
			t.Errorf("settled watch page lacks %q", w)
		}
	}
	for _, raw := range []string{"<script>document", "<script>alert"} {
		if strings.Contains(body, raw) {
			t.Errorf("watch page shows %q unescaped", raw)
		}
	}
	if strings.Contains(body, `id="unwatch"`) {
		t.Error("Unwatch offered for a settled watch")
	}

	for _, id := range []string{"watch-20261201T000000-ffffffff", "nope"} {
		if code, _, _ := b.get("/watches/" + id); code != http.StatusNotFound {
			t.Errorf("GET /watches/%s: %d, want 404", id, code)
		}
	}
}

// TestUnwatch: the Unwatch button calls the service's Unwatch behind the
// same Origin and CSRF checks as the Turn buttons; the open watch page's
// stream shows the new status; the page's script gets the outcome as text.
func TestUnwatch(t *testing.T) {
	r, ft := watchRig(t, "", false)
	b := r.browser(t)
	_, _, page := b.get("/watches/" + watchID)
	token := csrfOf(t, page)
	path := "/watches/" + watchID + "/unwatch"
	for _, tt := range []struct {
		name   string
		form   url.Values
		origin string
		inline bool
	}{
		{"no token", url.Values{}, "self", false},
		{"forged token", url.Values{"csrf": {"forged"}}, "self", false},
		{"cross origin", url.Values{"csrf": {token}}, "http://evil.example", false},
		{"inline without token", url.Values{}, "self", true},
		{"inline cross origin", url.Values{"csrf": {token}}, "http://evil.example", true},
	} {
		if code, _ := postInline(t, b, path, tt.form, tt.origin, tt.inline); code != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", tt.name, code)
		}
	}
	if got := ft.unwatchCalls(); len(got) != 0 {
		t.Fatalf("refused requests reached the service: %v", got)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	s := openStream(ctx, t, b, "/events?page=watch&id="+watchID)
	s.until(t, "w-active")
	code, hdr, _ := b.post(path, url.Values{"csrf": {token}}, "self")
	if code != http.StatusSeeOther || hdr.Get("Location") != "/watches/"+watchID {
		t.Fatalf("unwatch: %d %q", code, hdr.Get("Location"))
	}
	if got := ft.unwatchCalls(); len(got) != 1 || got[0] != watchID {
		t.Fatalf("unwatch calls = %v, want [%s]", got, watchID)
	}
	s.until(t, "w-cancelled")
	_, _, body := b.get("/watches/" + watchID)
	if !strings.Contains(body, "Unwatched: the watch is cancelled") || strings.Contains(body, `id="unwatch"`) {
		t.Errorf("no note, or Unwatch still offered, after unwatch")
	}
	if _, _, body := b.get("/terminals"); strings.Contains(body, "/watches/") {
		t.Error("the Terminals page still shows the cancelled watch")
	}

	// Submitted in place by the page's script: the outcome as text.
	code, note := postInline(t, b, path, url.Values{"csrf": {token}}, "self", true)
	if code != http.StatusOK || note != "The watch had already ended (cancelled); nothing to unwatch." {
		t.Errorf("inline unwatch of an ended watch: %d %q", code, note)
	}
	code, note = postInline(t, b, "/watches/watch-20261201T000000-ffffffff/unwatch", url.Values{"csrf": {token}}, "self", true)
	if code != http.StatusOK || !strings.Contains(note, "Unwatch refused: unwatch: not found: no watch watch-20261201T000000-ffffffff") {
		t.Errorf("inline unwatch of an unknown watch: %d %q", code, note)
	}
}

// TestWatchPagesNeedTheOperator: a watch, like a pane, has no owner: a
// personal token neither sees nor unwatches it.
func TestWatchPagesNeedTheOperator(t *testing.T) {
	r, ft := watchRig(t, "alice:tok-alice-0123456789", false)
	b := r.browser(t)
	b.login("tok-alice-0123456789")
	if code, _, body := b.get("/watches/" + watchID); code != http.StatusForbidden || strings.Contains(body, watchPane) {
		t.Errorf("GET the watch as a personal token: %d, want 403", code)
	}
	_, _, page := b.get("/")
	for _, inline := range []bool{false, true} {
		if code, _ := postInline(t, b, "/watches/"+watchID+"/unwatch", url.Values{"csrf": {csrfOf(t, page)}}, "self", inline); code != http.StatusForbidden {
			t.Errorf("unwatch as a personal token (inline %v): %d, want 403", inline, code)
		}
	}
	if got := ft.unwatchCalls(); len(got) != 0 {
		t.Errorf("a personal token reached Unwatch: %v", got)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	openStream(ctx, t, b, "/events?page=watch&id="+watchID).until(t, "event: gone")
}

// postInline posts a form as the page's script does when inline is set
// (origin as in browser.post) and returns the status and body.
func postInline(t *testing.T, b *browser, path string, form url.Values, origin string, inline bool) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.ts.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin == "self" {
		origin = b.ts.URL
	}
	req.Header.Set("Origin", origin)
	if inline {
		req.Header.Set("X-Dashboard-Inline", "1")
	}
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

var _ dashboard.Terminals = (*fakeTerminals)(nil)
