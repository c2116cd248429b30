package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/clawconnect/clawconnect/taskapi"
)

// hub wakes every open event stream when the dashboard itself changed
// something (a cancel), so the change shows at once. The zero value is
// ready to use.
type hub struct {
	mu sync.Mutex
	ch chan struct{}
}

// wait returns a channel closed at the next notify.
func (h *hub) wait() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ch == nil {
		h.ch = make(chan struct{})
	}
	return h.ch
}

func (h *hub) notify() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ch != nil {
		close(h.ch)
		h.ch = nil
	}
}

// fragment is one part of a page the stream replaces or extends.
type fragment struct {
	ID   string `json:"id"`
	HTML string `json:"html"`
}

// streamState is what one stream last sent.
type streamState struct {
	sent   map[string]string
	cursor int64
	watch  map[string]func() // change-feed watches of running tasks
}

// events serves the page's server-sent events: on every wake it re-renders
// the page's live fragments and sends those that changed ("swap"), and on
// a task page the new log rows ("append"). It wakes when the dashboard
// acts, when the store's change feed announces a change of a running task
// the page depends on or (on the lists) a new task, and at the latest
// every refresh (refreshFor).
func (d *Dashboard) events(w http.ResponseWriter, r *http.Request, q request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	// Only the dashboard's own pages stream: another site's page could
	// otherwise hold the streams a sign-in may open.
	if err := d.checkSite(r); err != nil {
		http.Error(w, "event stream refused: "+err.Error(), http.StatusForbidden)
		return
	}
	qs := r.URL.Query()
	pg := qs.Get("page")
	switch pg {
	case "tasks", "task", "sessions", "health", "terminals", "turn", "watch":
	default:
		http.Error(w, "unknown page: use page=tasks, task, sessions, health, terminals, turn or watch", http.StatusBadRequest)
		return
	}
	// A stream holds its connection for as long as the page is open: one
	// sign-in may hold only so many, so that it cannot take the slots of
	// /mcp, /health or anyone else's pages.
	release, err := d.srv.OpenStream(q.id)
	if err != nil {
		w.Header().Set("Retry-After", "5")
		http.Error(w, err.Error(), http.StatusTooManyRequests)
		return
	}
	defer release()
	st := &streamState{sent: map[string]string{}, watch: map[string]func(){}}
	st.cursor, _ = strconv.ParseInt(qs.Get("cursor"), 10, 64)
	// A reconnecting EventSource names the last log row it appended (the
	// id of an "append" event): start after it, not after the rows the
	// page was rendered with, or the log would show rows twice.
	if seen, err := strconv.ParseInt(r.Header.Get("Last-Event-ID"), 10, 64); err == nil && seen > st.cursor {
		st.cursor = seen
	}
	defer func() {
		for _, stop := range st.watch {
			stop()
		}
	}()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	ctx := r.Context()
	announced := make(chan struct{}, 1)
	// A list learns of a new task from the feed (a nil channel, never
	// ready, when the store cannot tell).
	var created <-chan struct{}
	if d.o.Feed != nil && (pg == "tasks" || pg == "sessions" || pg == "health") {
		ch, stop := d.o.Feed.WatchNewTasks()
		defer stop()
		created = ch
	}
	refresh := d.refreshFor(pg)
	first := true
	for {
		woke := d.hub.wait()
		var buf bytes.Buffer
		running, err := d.streamOnce(ctx, &buf, q, pg, qs, st, first)
		// The deadline bounds the write, not the read before it: a slow
		// read is not a reader gone.
		_ = rc.SetWriteDeadline(time.Now().Add(2 * d.o.Heartbeat))
		if err != nil {
			// The page's subject is gone or may not be shown (or the
			// service failed): say so once and end the stream.
			d.o.Logger.Debug("dashboard stream", "page", pg, "err", err)
			fmt.Fprintf(&buf, "event: gone\ndata: %s\n\n", mustJSON(err.Error()))
			_, _ = w.Write(buf.Bytes())
			flusher.Flush()
			return
		}
		first = false
		// A task's change between the read above and its new watch would
		// be announced to nobody: after adding a watch, read once more
		// (what changed since is then either in that read or announced).
		reread := d.syncWatches(st, running, announced)
		if buf.Len() > 0 {
			if _, err := w.Write(buf.Bytes()); err != nil {
				return
			}
			flusher.Flush()
		}
		if reread {
			continue
		}
		if !d.idle(ctx, w, rc, flusher, refresh, woke, announced, created) {
			return
		}
	}
}

// idle waits until something wakes the stream or refresh has passed,
// sending a comment every Heartbeat meanwhile, so that proxies keep the
// connection and the write deadline never lapses on a quiet page. It
// returns false when the stream should end.
func (d *Dashboard) idle(ctx context.Context, w http.ResponseWriter, rc *http.ResponseController, flusher http.Flusher,
	refresh time.Duration, woke, announced, created <-chan struct{}) bool {
	due := time.Now().Add(refresh)
	for {
		wait := min(time.Until(due), d.o.Heartbeat)
		if wait <= 0 {
			return true
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return false
		case <-woke:
		case <-announced:
		case <-created:
		case <-timer.C:
			if time.Now().Before(due) {
				_ = rc.SetWriteDeadline(time.Now().Add(2 * d.o.Heartbeat))
				if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil {
					return false
				}
				flusher.Flush()
				continue
			}
		}
		timer.Stop()
		return true
	}
}

// refreshFor is the longest page pg goes without re-reading when nothing
// woke it. Tasks, a task and sessions are announced by the change feed, so
// Options.Refresh is only a safety net there (for a lost announcement, or
// a provisional outcome replaced later). Health shows gateway states and
// process heartbeats, which no feed announces, and the terminal pages
// capture every pane on each look: each has a period of its own.
func (d *Dashboard) refreshFor(pg string) time.Duration {
	switch pg {
	case "health":
		return min(d.o.Refresh, healthRefresh)
	case "terminals", "turn", "watch":
		return terminalsRefresh
	}
	return d.o.Refresh
}

// syncWatches keeps one change-feed watch per running task on the page,
// and reports whether it added one.
func (d *Dashboard) syncWatches(st *streamState, running []string, announced chan struct{}) (added bool) {
	if d.o.Feed == nil {
		return false
	}
	want := map[string]bool{}
	for _, id := range running {
		want[id] = true
		if _, ok := st.watch[id]; ok {
			continue
		}
		ch, stop := d.o.Feed.WatchTask(id)
		if ch == nil {
			stop()
			continue
		}
		done := make(chan struct{})
		go func() { // owned by the stream: ends when the watch is stopped
			for {
				select {
				case <-done:
					return
				case <-ch:
					select {
					case announced <- struct{}{}:
					default:
					}
				}
			}
		}()
		st.watch[id] = func() { stop(); close(done) }
		added = true
	}
	for id, stop := range st.watch {
		if !want[id] {
			stop()
			delete(st.watch, id)
		}
	}
	return added
}

// streamOnce renders the page's fragments into buf (only those that
// changed) and returns the ids of running tasks shown.
func (d *Dashboard) streamOnce(ctx context.Context, buf *bytes.Buffer, q request, pg string, qs map[string][]string, st *streamState, first bool) ([]string, error) {
	get := func(k string) string {
		if v := qs[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	var running []string
	frags := map[string]string{}
	render := func(name string, data any) error {
		var b bytes.Buffer
		if err := d.tpl.ExecuteTemplate(&b, name, data); err != nil {
			return err
		}
		frags[name] = b.String()
		return nil
	}
	switch pg {
	case "tasks":
		b, err := d.tasksData(ctx, q, filterOf(get))
		if err != nil {
			return nil, err
		}
		running = b.Running
		if err := render("tasks-rows", b); err != nil {
			return nil, err
		}
		if err := render("tasks-counts", b); err != nil {
			return nil, err
		}
	case "task":
		id := get("id")
		t, err := q.caller.GetTask(ctx, id, taskapi.DetailFull, st.cursor)
		if err != nil {
			return nil, err
		}
		// Watched even when it ended: a provisional outcome may still be
		// replaced by the real one.
		running = append(running, t.TaskID)
		b := taskBody{Task: t, Running: !t.IsTerminal, CSRF: q.sess.csrf}
		d.withAttachments(ctx, &b, t)
		if err := render("task-head", b); err != nil {
			return nil, err
		}
		if err := render("task-lineage", b); err != nil {
			return nil, err
		}
		var fresh []taskapi.LogEntry
		for _, e := range t.Updates {
			if e.Seq > st.cursor {
				fresh = append(fresh, e)
				st.cursor = e.Seq
			}
		}
		if len(fresh) > 0 {
			var b bytes.Buffer
			if err := d.tpl.ExecuteTemplate(&b, "log-rows", fresh); err != nil {
				return nil, err
			}
			// The id is the log cursor the page has reached (see events).
			fmt.Fprintf(buf, "id: %d\n", st.cursor)
			writeEvent(buf, "append", fragment{ID: "log-rows", HTML: b.String()})
		}
	case "sessions":
		// A session's last result changes when its running task ends. The
		// running tasks are read first: one that ends after this read is
		// watched (and read again, see events), one that ended before shows
		// its result in the sessions read below.
		active, err := q.caller.ListTasks(ctx, taskapi.ViewActive)
		if err != nil {
			return nil, err
		}
		for _, r := range active {
			running = append(running, r.TaskID)
		}
		b, err := d.sessionsData(ctx, q)
		if err != nil {
			return nil, err
		}
		if err := render("sessions-rows", b); err != nil {
			return nil, err
		}
	case "health":
		b, err := d.healthData(ctx, q)
		if err != nil {
			return nil, err
		}
		running = b.Running
		if err := render("health-live", b); err != nil {
			return nil, err
		}
	case "terminals":
		b, err := d.terminalsData(ctx, q)
		if err != nil {
			return nil, err
		}
		if err := render("terminals-live", b); err != nil {
			return nil, err
		}
	case "turn":
		b, err := d.turnData(ctx, q, get("id"))
		if err != nil {
			return nil, err
		}
		if err := render("turn-live", b); err != nil {
			return nil, err
		}
	case "watch":
		b, err := d.watchData(ctx, q, get("id"))
		if err != nil {
			return nil, err
		}
		if err := render("watch-live", b); err != nil {
			return nil, err
		}
	}
	for id, html := range frags {
		if st.sent[id] == html {
			continue
		}
		if _, seen := st.sent[id]; seen || !first {
			writeEvent(buf, "swap", fragment{ID: id, HTML: html})
		}
		st.sent[id] = html
	}
	if first {
		// The page was rendered a moment ago: only say the stream is live,
		// and send what changed since in the next round.
		st.sent = map[string]string{}
		for id, html := range frags {
			writeEvent(buf, "swap", fragment{ID: id, HTML: html})
			st.sent[id] = html
		}
		// The server's clock lets the page tick elapsed times between
		// events without trusting the browser's clock.
		writeEvent(buf, "live", map[string]int64{"now": d.o.Now().UnixMilli()})
	}
	return running, nil
}

func writeEvent(buf *bytes.Buffer, name string, v any) {
	fmt.Fprintf(buf, "event: %s\ndata: %s\n\n", name, mustJSON(v))
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte(`null`)
	}
	return b
}
