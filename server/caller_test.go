package server_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/clawconnect/clawconnect/server"
	"github.com/clawconnect/clawconnect/taskapi"
)

// TestCallerIsTheTools: the in-process Caller answers as the MCP tools do,
// refusals included.
func TestCallerIsTheTools(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	res, err := b.tasks.Run(ctx, server.RunRequest{Agent: "alpha", Task: "work"})
	if err != nil {
		t.Fatal(err)
	}
	c := b.srv.Caller(taskapi.Identity{})
	if !c.SeesAll() {
		t.Error("a caller without a credential sees all")
	}
	rows, err := c.ListTasks(ctx, taskapi.ViewAll)
	if err != nil || len(rows) != 1 || rows[0].TaskID != res.JobID {
		t.Fatalf("ListTasks = %+v, %v", rows, err)
	}
	if d, err := c.GetTask(ctx, res.JobID, taskapi.DetailSummary, 0); err != nil || d.Status != "running" {
		t.Fatalf("GetTask = %+v, %v", d, err)
	}
	if p, err := c.GetPrompt(ctx, res.JobID); err != nil || p.Prompt.Task != "work" {
		t.Fatalf("GetPrompt = %+v, %v", p, err)
	}
	if _, err := c.GetTask(ctx, "missing", taskapi.DetailSummary, 0); !errors.Is(err, server.ErrRefused) {
		t.Errorf("GetTask of a missing task: %v, want ErrRefused", err)
	}
	if _, _, err := c.CancelTask(ctx, ""); !errors.Is(err, server.ErrRefused) || !strings.Contains(err.Error(), "taskId") {
		t.Errorf("CancelTask without an id: %v, want the tool's refusal", err)
	}
	r, note, err := c.CancelTask(ctx, res.JobID)
	if err != nil || !r.Requested || note == "" {
		t.Errorf("CancelTask = %+v %q %v", r, note, err)
	}
	if s, err := c.ListSessions(ctx); err != nil || len(s) != 1 {
		t.Errorf("ListSessions = %+v, %v", s, err)
	}
	if b.srv.Caller(taskapi.Identity{User: "ana"}).SeesAll() {
		t.Error("a personal token sees all without the team view")
	}
}

func TestSetPagesMountsAtRoot(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.srv.SetPages(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("pages " + r.URL.Path)) }))
	ts := httptest.NewServer(b.srv.Handler())
	defer ts.Close()
	for path, want := range map[string]string{"/": "pages /", "/tasks/x": "pages /tasks/x", "/health": `{"ok":true}`} {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != want {
			t.Errorf("GET %s = %q, want %q", path, body, want)
		}
	}
}
