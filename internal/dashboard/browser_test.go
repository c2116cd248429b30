package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/clawconnect/clawconnect/internal/dashboard"
	"github.com/clawconnect/clawconnect/internal/testbed/chromium"
	"github.com/clawconnect/clawconnect/internal/testbed/peers"
)

// ArtifactsEnv names a directory the browser test saves its screenshots
// in; unset, they go to the test's temporary directory (printed in the log).
const ArtifactsEnv = "CLAWCONNECT_DASHBOARD_ARTIFACTS"

// TestBrowser drives the dashboard in headless Chromium (Debian's chromium
// package): sign in, watch a task started over MCP appear and finish
// without a reload, read its log, cancel another task from the page with
// the keyboard, see an agent's <script> reply as text and an attachment
// lineage, unwatch a terminal watch from its page and see it end live, and
// save a screenshot of every page. One browser serves every
// step. The dashboard's periodic re-read is an hour here, so whatever
// appears on an open page came through the event stream, woken by the
// store's change feed; the test waits for it with MutationObservers in the
// page (event-driven, no timer).
func TestBrowser(t *testing.T) {
	peers.RequireE2E(t)
	r := newRigWith(t, "alice:tok-alice-0123456789,bob:tok-bob-0123456789", false, func(o *dashboard.Options) { o.Refresh = time.Hour })
	base := r.ts.URL

	// A request without the token is refused.
	resp, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET / without a token: %d, want 401", resp.StatusCode)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	br := chromium.Start(ctx, t, ArtifactsEnv, 1280, 860)
	bctx := br.Ctx

	do := func(step string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, actions...); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	shot := br.Shot
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return v
	}
	visible := func(sel string) chromedp.Action[chromedp.Void] { return chromedp.WaitVisible(chromedp.CSS(sel)) }
	// appears waits, inside the page, for the first DOM change after which
	// an element matches sel (at once if one does): a MutationObserver,
	// no polling.
	appears := func(sel string) chromedp.Action[chromedp.Void] {
		q, _ := json.Marshal(sel)
		js := `new Promise(function (resolve) {
			var sel = ` + string(q) + `;
			if (document.querySelector(sel)) return resolve(true);
			var mo = new MutationObserver(function () {
				if (document.querySelector(sel)) { mo.disconnect(); resolve(true); }
			});
			mo.observe(document.documentElement, {childList: true, subtree: true, attributes: true, characterData: true});
		})`
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := chromedp.Evaluate[bool](js, chromedp.EvalAwaitPromise)(ctx, tg)
			return err
		})
	}
	// ticks waits, inside the page, for the page's own script to change the
	// element sel names in place (a mutation of that very node, not a
	// server-sent swap of the fragment around it, after which it follows
	// the new node).
	ticks := func(sel string) chromedp.Action[chromedp.Void] {
		q, _ := json.Marshal(sel)
		js := `new Promise(function (resolve) {
			var sel = ` + string(q) + `;
			var el = document.querySelector(sel);
			var mo = new MutationObserver(function (records) {
				for (var i = 0; i < records.length; i++) {
					var t = records[i].target;
					if (el && el.isConnected && (t === el || el.contains(t))) { mo.disconnect(); resolve(true); return; }
				}
				el = document.querySelector(sel);
			});
			mo.observe(document.documentElement, {childList: true, subtree: true, characterData: true});
		})`
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := chromedp.Evaluate[bool](js, chromedp.EvalAwaitPromise)(ctx, tg)
			return err
		})
	}

	do("sign in",
		chromedp.Navigate(base+"/"),
		visible(`#token`),
		shot("01-login"),
		chromedp.SendKeys(chromedp.CSS(`#token`), "tok-alice-0123456789"),
		chromedp.Submit(chromedp.CSS(`#token`)),
		visible(`#live.on`),
	)

	// A task started over MCP appears and finishes on the open page; a
	// marker set in the page survives, so nothing reloaded it.
	do("mark page", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Evaluate[int](`window.ccMarker = 42`)(ctx, tg)
		return err
	}))
	done := r.mcpRun(t, "tok-alice-0123456789", "SLOW: summarize the release notes")
	running := `tr[data-task="` + done + `"][data-status="running"]`
	do("task appears live",
		appears(running),
		shot("02-tasks-running"),
		appears(`tr[data-task="`+done+`"][data-status="done"]`),
	)
	marker, err := chromedp.Run(bctx, chromedp.Evaluate[int](`window.ccMarker || 0`))
	if err != nil || marker != 42 {
		t.Fatalf("the page reloaded (marker %d, %v)", marker, err)
	}

	// A keyboard user on a task's link keeps the focus there while the list
	// changes under it (a new task arrives).
	link := `tr[data-task="` + done + `"] a`
	do("focus a task", chromedp.Focus(chromedp.CSS(link)), chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		// Armed before the change is caused: resolves when the rows are
		// replaced (not when a clock inside them ticks).
		_, err := chromedp.Evaluate[bool](`window.ccSwapped = new Promise(function (resolve) {
			new MutationObserver(function (m, mo) { mo.disconnect(); resolve(true); })
				.observe(document.getElementById("tasks-rows"), {childList: true});
		}); true`)(ctx, tg)
		return err
	}))
	held := r.mcpRun(t, "tok-alice-0123456789", "HOLD: watch the build")
	do("list changes", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](`window.ccSwapped`, chromedp.EvalAwaitPromise)(ctx, tg)
		return err
	}), appears(`tr[data-task="`+held+`"]`),
		// A running task's elapsed time ticks between events (it runs
		// until cancelled below).
		ticks(`tr[data-task="`+held+`"] [data-since]`))
	if href, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`document.activeElement.getAttribute("href") || document.activeElement.tagName`)); href != "/tasks/"+done {
		t.Errorf("after a live update the focus is on %q, want the link to /tasks/%s", href, done)
	}

	// Its log.
	do("open log",
		chromedp.Click(chromedp.CSS(`tr[data-task="`+done+`"] a`)),
		visible(`#log-rows li`),
		shot("03-task-log"),
	)
	if logText := text(`#log-rows`); !strings.Contains(logText, "Agent lifecycle: end") {
		t.Errorf("log shows %q, want the run's end", logText)
	}

	// Cancel another task from its page, with the keyboard.
	do("cancel",
		chromedp.Navigate(base+"/tasks/"+held),
		visible(`#cancel`),
		chromedp.Focus(chromedp.CSS(`#cancel`)),
		chromedp.KeyEvent("\r"),
		visible(`#task-status.s-cancelled`),
		shot("04-task-cancelled"),
	)
	// Its elapsed time runs from its start to the cancel (get_task's
	// endedAt), not to its last event.
	got, err := r.b.GetTask(bctx, held, "core", 0)
	if err != nil || got.EndedAt == 0 || got.EndedAt < got.LastEventAt { // the same millisecond is possible
		t.Fatalf("get_task of the cancelled task: endedAt %d, last event %d, %v", got.EndedAt, got.LastEventAt, err)
	}
	if el, want := text(`#task-elapsed`), fmt.Sprintf("%.1fs", float64(got.EndedAt-got.StartedAt)/1000); el != want {
		t.Errorf("Elapsed of the cancelled task = %q, want %q (start to end)", el, want)
	}

	// A reply with <script> renders as text.
	xss := r.mcpRun(t, "tok-alice-0123456789", "XSS: reply with markup")
	r.waitDone(t, xss)
	do("escape",
		chromedp.Navigate(base+"/tasks/"+xss),
		visible(`#task-result`),
		shot("05-task-escaped"),
	)
	result := text(`#task-result`)
	title, _ := chromedp.Run(bctx, chromedp.Title())
	imgs, _ := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("main img").length`))
	if !strings.Contains(result, `<script>document.title="pwned"</script>`) || strings.Contains(title, "pwned") || imgs != 0 {
		t.Errorf("reply not shown as text: result %q, title %q, %d img elements", result, title, imgs)
	}

	// An attachment replaced by another: the task page shows both records,
	// the first superseded with its reason.
	attached, key := r.mcpRunWith(t, "tok-alice-0123456789", map[string]any{"task": "check the pane",
		"context": `<agent-session>{"runtime":"local-tmux","sessionId":"pane-one","state":"running"}</agent-session>`})
	r.waitDone(t, attached)
	replaced, _ := r.mcpRunWith(t, "tok-alice-0123456789", map[string]any{"task": "use the other pane", "sessionKey": key,
		"context": `[[clawconnect:agent-session]]{"op":"replace","runtime":"local-tmux","handle":"pane-two","host":"box",` +
			`"reason":"pane one stopped answering"}[[/clawconnect:agent-session]]`})
	r.waitDone(t, replaced)
	do("lineage",
		chromedp.Navigate(base+"/tasks/"+replaced),
		visible(`table.lineage tr[data-state="superseded"]`),
		visible(`table.lineage tr[aria-current="true"]`),
		shot("14-task-lineage"),
	)
	if got := text(`table.lineage tr[data-state="superseded"]`); !strings.Contains(got, "pane one stopped answering") {
		t.Errorf("superseded record shows %q, want its reason", got)
	}

	// The list says what each task asked: the request's first line, its
	// markup as text; the search box keeps the tasks whose request holds
	// the words typed, ignoring case.
	asked := r.mcpRun(t, "tok-alice-0123456789", "Ship <b>the</b> release notes\nsecond line stays on the task page")
	r.waitDone(t, asked)
	do("search requests",
		chromedp.Navigate(base+"/"),
		visible(`#live.on`),
		chromedp.SendKeys(chromedp.CSS(`input[name="q"]`), "SHIP <B>"),
		chromedp.Submit(chromedp.CSS(`input[name="q"]`)),
		visible(`#live.on`),
		visible(`tr[data-task="`+asked+`"] td.request`),
		shot("23-tasks-search"),
	)
	if got, want := text(`#tasks-rows`), "Ship <b>the</b> release notes …"; !strings.Contains(got, want) || strings.Contains(got, "second line") {
		t.Errorf("searched rows show %q, want the request's first line %q only", got, want)
	}
	if n, _ := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("#tasks-rows tr[data-task]").length`)); n != 1 {
		t.Errorf("the search kept %d tasks, want 1", n)
	}
	if n, _ := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("#tasks-rows b").length`)); n != 0 {
		t.Errorf("the request's markup became %d elements", n)
	}

	do("sessions and health",
		chromedp.Navigate(base+"/sessions"),
		visible(`#sessions-rows a`),
		shot("06-sessions"),
		chromedp.Navigate(base+"/system"),
		visible(`svg.chart`),
		shot("07-health"),
		chromedp.Navigate(base+"/"),
		visible(`#live.on`),
		shot("08-tasks"),
		chromedp.EmulateViewport(390, 844),
		chromedp.Navigate(base+"/"),
		visible(`#live.on`),
		shot("09-tasks-phone"),
		chromedp.Navigate(base+"/tasks/"+done),
		visible(`#log-rows li`),
		shot("10-task-phone"),
		chromedp.Navigate(base+"/tasks/"+replaced),
		visible(`table.lineage tr[data-state="superseded"]`),
		shot("15-task-lineage-phone"),
	)
	// Nothing is wider than a phone's screen.
	if w, _ := chromedp.Run(bctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`)); w > 390 {
		t.Errorf("the task page is %d px wide on a 390 px screen", w)
	}
	// Likewise the other pages.
	for _, p := range []struct{ path, ready, name string }{
		{"/sessions", `#sessions-rows a`, "16-sessions-phone"},
		{"/system", `svg.chart`, "17-health-phone"},
	} {
		do("phone "+p.path, chromedp.Navigate(base+p.path), visible(p.ready), shot(p.name))
		if w, _ := chromedp.Run(bctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`)); w > 390 {
			t.Errorf("%s is %d px wide on a 390 px screen", p.path, w)
		}
	}

	// Terminals, on an open loopback rig with a fake Turn service (its
	// cookie replaces the first rig's: cookies ignore the port).
	tr, ft := watchRig(t, "", false)
	do("terminals",
		chromedp.EmulateViewport(1280, 860),
		chromedp.Navigate(tr.ts.URL+"/terminals"),
		visible(`#live.on`),
		visible(`tr[data-terminal]`),
		shot("11-terminals"),
		chromedp.Click(chromedp.CSS(`tr[data-terminal] a`)),
		visible(`#cancel-turn`),
		visible(`#callback-status.cb-failed`),
		visible(`#callback-error`),
		shot("12-turn"),
		chromedp.Click(chromedp.CSS(`#retry-callback`)),
		visible(`#callback-status.cb-pending`),
		shot("13-turn-callback-retried"),
		chromedp.Click(chromedp.CSS(`#cancel-turn`)),
		visible(`#turn-status.t-cancelling`),
	)
	if got := text(`#callback-error`); !strings.Contains(got, `<script>alert(1)</script>`) {
		t.Errorf("callback error shows %q, want the markup as text", got)
	}

	// A watched pane and a conflict row; the watch page; Unwatch with the
	// keyboard, the new status arriving over the stream (a marker set in
	// the page survives: nothing reloaded it).
	do("watch",
		chromedp.Navigate(tr.ts.URL+"/terminals"),
		visible(`#live.on`),
		visible(`tr[data-watch] a`),
		visible(`tr[data-conflict] ul.choices code`),
		shot("18-terminals-watch-conflict"),
		chromedp.Click(chromedp.CSS(`tr[data-watch] a`)),
		visible(`#live.on`),
		visible(`#watch-status.w-active`),
		visible(`tr[data-message] .badge.cb-failed`),
		shot("19-watch"),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := chromedp.Evaluate[int](`window.ccMarker = 7`)(ctx, tg)
			return err
		}),
		chromedp.Focus(chromedp.CSS(`#unwatch`)),
		chromedp.KeyEvent("\r"),
		appears(`#watch-status.w-cancelled`),
		appears(`main > .flash`),
		shot("20-watch-unwatched"),
	)
	if marker, err := chromedp.Run(bctx, chromedp.Evaluate[int](`window.ccMarker || 0`)); err != nil || marker != 7 {
		t.Errorf("the watch page reloaded on Unwatch (marker %d, %v)", marker, err)
	}
	if got := ft.unwatchCalls(); len(got) != 1 || got[0] != watchID {
		t.Errorf("Unwatch calls = %v, want [%s]", got, watchID)
	}
	if got := text(`main > .flash`); !strings.Contains(got, "Unwatched: the watch is cancelled") {
		t.Errorf("the note after Unwatch is %q", got)
	}
	if n, _ := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("#unwatch").length`)); n != 0 {
		t.Error("Unwatch is still offered for a cancelled watch")
	}
	if got := text(`#settlement-kind`); got != "cancelled" {
		t.Errorf("settlement kind = %q, want cancelled", got)
	}
	// Both pages fit a phone's screen.
	ft.setWatch(activeWatch())
	for _, p := range []struct{ path, ready, name string }{
		{"/terminals", `tr[data-watch] a`, "21-terminals-phone"},
		{"/watches/" + watchID, `#unwatch`, "22-watch-phone"},
	} {
		do("phone "+p.path, chromedp.EmulateViewport(390, 844), chromedp.Navigate(tr.ts.URL+p.path), visible(p.ready), shot(p.name))
		if w, _ := chromedp.Run(bctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`)); w > 390 {
			t.Errorf("%s is %d px wide on a 390 px screen", p.path, w)
		}
	}
	do("desktop again", chromedp.EmulateViewport(1280, 860))

	// Keyboard: Tab from the top reaches the skip link, then the nav.
	do("keyboard",
		chromedp.Navigate(tr.ts.URL+"/"),
		visible(`#live.on`),
		chromedp.KeyEvent("\t"),
	)
	focused, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`document.activeElement.textContent`))
	if focused != "Skip to content" {
		t.Errorf("first Tab focuses %q, want the skip link", focused)
	}
}
