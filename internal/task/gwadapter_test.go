package task

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clawconnect/clawconnect/gateway"
	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	"github.com/clawconnect/clawconnect/internal/testbed/fakegateway"
)

// gwManager runs a manager over the real gateway client connected to the
// in-process fake gateway.
func gwManager(t *testing.T, fg *fakegateway.Server, dbPath string) (*Manager, func()) {
	t.Helper()
	ctx := context.Background()
	c, err := gateway.Dial(ctx, gateway.Options{URL: fg.URL(), Token: fakegateway.Token})
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(ctx, sqlite.Options{Path: dbPath})
	if err != nil {
		t.Fatal(err)
	}
	o := fastOptions()
	o.Store, o.Gateway = st, GatewayClient(c)
	m, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var closed bool
	stop := func() {
		if closed {
			return
		}
		closed = true
		m.Close()
		_ = c.Close()
		_ = st.Close()
	}
	t.Cleanup(stop)
	return m, stop
}

func TestGatewayClientEndToEnd(t *testing.T) {
	fg := fakegateway.New(t, fakegateway.Options{Token: fakegateway.Token, Script: func(s fakegateway.Submit) fakegateway.Turn {
		if strings.Contains(s.Message, "say nothing") {
			return fakegateway.Turn{EmptyFinal: true, NoTranscript: true}
		}
		return fakegateway.Turn{Reply: "answer to: " + s.Message[strings.LastIndex(s.Message, "\n")+1:], Chunks: 3}
	}})
	m, _ := gwManager(t, fg, filepath.Join(t.TempDir(), "clawconnect.db"))
	res, err := m.Submit(t.Context(), SubmitRequest{Task: "compute 6*7"})
	if err != nil {
		t.Fatal(err)
	}
	s := await(t, m, res.JobID)
	if s.Status != "completed" || s.Summary != "answer to: compute 6*7" || s.ParentRunID != res.JobID {
		t.Fatalf("snapshot %s %q run %q", s.Status, s.Summary, s.ParentRunID)
	}
	res, err = m.Submit(t.Context(), SubmitRequest{Task: "say nothing"})
	if err != nil {
		t.Fatal(err)
	}
	s = await(t, m, res.JobID)
	if s.Status != "completed_no_summary" || s.Summary != NoSummarySentinel {
		t.Fatalf("empty turn: %s %q %s", s.Status, s.Summary, s.TerminalReason)
	}
}

// TestGatewayClientRestartJoinsRun: kill the bridge mid-run, start a fresh
// one over the same database; it rejoins the same run (same idempotency
// key, no second run) and records its answer.
func TestGatewayClientRestartJoinsRun(t *testing.T) {
	fg := fakegateway.New(t, fakegateway.Options{Token: fakegateway.Token, Script: func(s fakegateway.Submit) fakegateway.Turn {
		return fakegateway.Turn{Reply: "held answer", Hold: true}
	}})
	db := filepath.Join(t.TempDir(), "clawconnect.db")
	m1, kill := gwManager(t, fg, db)
	res, err := m1.Submit(t.Context(), SubmitRequest{Task: "long"})
	if err != nil {
		t.Fatal(err)
	}
	if err := fg.AwaitRun(t.Context(), res.JobID); err != nil {
		t.Fatal(err)
	}
	kill()
	m2, _ := gwManager(t, fg, db)
	fg.Release(res.JobID)
	s := await(t, m2, res.JobID)
	if s.Status != "completed" || s.Summary != "held answer" {
		t.Fatalf("after restart: %s %q %s", s.Status, s.Summary, s.TerminalReason)
	}
	runs := 0
	for _, r := range fg.Requests() {
		if r.Method == "agent" && strings.Contains(string(r.Params), res.JobID) {
			runs++
		}
	}
	if runs != 2 {
		t.Fatalf("%d submits of the key, want 2 (the original and the idempotent rejoin)", runs)
	}
}
