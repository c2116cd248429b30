package dashboard_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/dashboard"
	"github.com/clawconnect/clawconnect/server"
)

// feedOnly is a rig whose pages re-read only when something wakes them
// (the hour-long Refresh never fires in a test).
func feedOnly(t *testing.T, tokens string) *rig {
	t.Helper()
	return newRigWith(t, tokens, false, func(o *dashboard.Options) {
		o.Refresh = time.Hour
	})
}

// TestNewTaskAppearsAtOnce: with no periodic re-read, a new task reaches
// the Tasks and Sessions streams, because the store's change feed announces
// its creation; and a filtered list that shows only finished tasks still
// hears a running one end.
func TestNewTaskAppearsAtOnce(t *testing.T) {
	r := feedOnly(t, "")
	b := r.browser(t)
	b.get("/")
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	tasks := openStream(ctx, t, b, "/events?page=tasks")
	sessions := openStream(ctx, t, b, "/events?page=sessions")
	doneOnly := openStream(ctx, t, b, "/events?page=tasks&status=done")
	for _, s := range []*stream{tasks, sessions, doneOnly} {
		s.until(t, "event: live")
	}
	held := r.run(t, "alpha", "HOLD a new task", "")
	tasks.until(t, `data-task=\"`+held+`\" data-status=\"running\"`)
	sessions.until(t, `href=\"/tasks/`+held+`\"`)

	quick := r.run(t, "beta", "a quick one", "")
	doneOnly.until(t, `data-task=\"`+quick+`\" data-status=\"done\"`)
	sessions.until(t, "result: all good") // its session's last result
}

// TestLogStreamResumesAfterLastEventID: a reconnecting page names the last
// log row it appended; the stream goes on from there instead of sending the
// rows the page already shows again.
func TestLogStreamResumesAfterLastEventID(t *testing.T) {
	r := newRig(t, "")
	id := r.run(t, "alpha", "a task with a log", "")
	r.waitDone(t, id)
	b := r.browser(t)
	b.get("/")
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	// The first connection, from the page rendered with no rows, appends
	// them all and says how far it got.
	first := openStream(ctx, t, b, "/events?page=task&id="+id+"&cursor=0")
	var last string
	for line := range first.lines {
		if v, ok := strings.CutPrefix(line, "id: "); ok {
			last = v
		}
		if line == "event: live" {
			break
		}
	}
	if last == "" || last == "0" {
		t.Fatalf("the first round sent no append with an id (last %q)", last)
	}
	again := openStreamWith(ctx, t, b, "/events?page=task&id="+id+"&cursor=0", http.Header{"Last-Event-Id": {last}})
	for line := range again.lines {
		if strings.HasPrefix(line, "event: append") {
			t.Fatalf("a reconnect after row %s sent log rows again", last)
		}
		if line == "event: live" {
			return
		}
	}
	t.Fatal("the reconnected stream ended before it was live")
}

// TestTaskPageShowsAttachmentLineage: a session attached to one runtime
// session and then replaced shows both records on its tasks' pages, oldest
// first, the first superseded with the (escaped) reason it was given and
// the second current; another credential sees neither.
func TestTaskPageShowsAttachmentLineage(t *testing.T) {
	r := newRig(t, "alice:tok-alice-0123456789,bob:tok-bob-0123456789")
	ctx := t.Context()
	first, err := r.b.Run(ctx, server.RunRequest{Agent: "alpha", Task: "start the work", Principal: "user:alice",
		Context: `<agent-session>{"runtime":"local-tmux","sessionId":"pane-one","state":"running"}</agent-session>`})
	if err != nil {
		t.Fatal(err)
	}
	r.waitDone(t, first.JobID)
	second, err := r.b.Run(ctx, server.RunRequest{Agent: "alpha", Task: "go on elsewhere", Principal: "user:alice",
		SessionKey: first.SessionKey,
		Context: `[[clawconnect:agent-session]]{"op":"replace","runtime":"local-tmux","handle":"pane-two","host":"box",` +
			`"reason":"pane one <b>died</b>"}[[/clawconnect:agent-session]]`})
	if err != nil {
		t.Fatal(err)
	}
	r.waitDone(t, second.JobID)

	alice, bob := r.browser(t), r.browser(t)
	alice.login("tok-alice-0123456789")
	bob.login("tok-bob-0123456789")
	for _, id := range []string{first.JobID, second.JobID} {
		code, _, body := alice.get("/tasks/" + id)
		if code != http.StatusOK {
			t.Fatalf("GET /tasks/%s: %d", id, code)
		}
		one, two := strings.Index(body, "pane-one"), strings.Index(body, "pane-two")
		if one < 0 || two < 0 || one > two {
			t.Errorf("task %s: lineage not shown oldest first (pane-one at %d, pane-two at %d)", id, one, two)
		}
		for _, want := range []string{`data-state="superseded"`, "pane one &lt;b&gt;died&lt;/b&gt;", `aria-current="true"`, ">current<", ">this task<"} {
			if !strings.Contains(body, want) {
				t.Errorf("task %s: lineage lacks %q", id, want)
			}
		}
		if strings.Contains(body, "<b>died") {
			t.Errorf("task %s: the reason was not escaped", id)
		}
		code, _, body = bob.get("/tasks/" + id)
		if code != http.StatusNotFound || strings.Contains(body, "pane-one") || strings.Contains(body, "died") {
			t.Errorf("bob opens alice's task %s: %d, lineage shown: %v", id, code, strings.Contains(body, "pane-one"))
		}
	}
	// "this task" marks the record each task delegated to.
	_, _, body := alice.get("/tasks/" + first.JobID)
	row := body[strings.Index(body, `data-state="superseded"`):]
	row = row[:strings.Index(row, "</tr>")]
	if !strings.Contains(row, ">this task<") || !strings.Contains(row, "replaced by") {
		t.Errorf("the first task's record is not marked as its own, or not linked to its successor:\n%s", row)
	}

	// The lineage is part of the task page's live fragments.
	ctx2, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	alice.get("/tasks/" + second.JobID)
	s := openStream(ctx2, t, alice, "/events?page=task&id="+second.JobID+"&cursor=0")
	s.until(t, `"id":"task-lineage"`)
}

// TestQuietStreamStaysOpen: a page nothing changes on gets a comment every
// Heartbeat (its write deadline is two heartbeats), and an announcement
// long after the last change still reaches it on the same connection.
func TestQuietStreamStaysOpen(t *testing.T) {
	r := newRigWith(t, "", false, func(o *dashboard.Options) {
		o.Refresh, o.Heartbeat = time.Hour, 50*time.Millisecond
	})
	b := r.browser(t)
	b.get("/")
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	s := openStream(ctx, t, b, "/events?page=tasks")
	s.until(t, "event: live")
	// Six heartbeats: three times the write deadline.
	for range 6 {
		s.until(t, ": keep-alive")
	}
	id := r.run(t, "alpha", "HOLD after a quiet spell", "")
	s.until(t, `data-task=\"`+id+`\"`)
}
