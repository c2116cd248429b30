package terminal

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/termapi"
)

// resumeSpy is the fake reader, logging the resume point each completion
// check was given and the one it returned.
type resumeSpy struct {
	fakeReader
	mu    sync.Mutex
	calls [][2]json.RawMessage
}

func (r *resumeSpy) Completion(ctx context.Context, p agents.Pane, anchor json.RawMessage, acc agents.Acceptance) (*agents.Completion, json.RawMessage, error) {
	c, next, err := r.fakeReader.Completion(ctx, p, anchor, acc)
	r.mu.Lock()
	r.calls = append(r.calls, [2]json.RawMessage{acc.Resume, next})
	r.mu.Unlock()
	return c, next, err
}

func (r *resumeSpy) log() [][2]json.RawMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][2]json.RawMessage(nil), r.calls...)
}

// TestMonitorResumesCompletion: each completion check of a running Turn
// is given the resume point the check before it returned, so it reads only
// the records written since; the first starts from the anchor.
func TestMonitorResumesCompletion(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 250)
	r := newRig(t, a)
	spy := &resumeSpy{fakeReader: fakeReader{r.ft}}
	r.svc = NewService(Options{Store: r.st, Terminals: r.ft, DraftTimeout: time.Second,
		Agents: map[string]agents.Agent{termapi.AgentCodex: spy}})
	r.start(r.svc, hostpkg.Options{})
	res, err := r.svc.Send(t.Context(), termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "do it", OriginSession: "agent:main:s1"})
	if err != nil {
		t.Fatal(err)
	}
	r.waitStatus(res.TurnID, termapi.TurnWaitingForAgent)
	for range 5 {
		a.mu.Lock()
		a.records = append(a.records, fakeRecord{kind: "progress"})
		n := len(a.records)
		a.mu.Unlock()
		a.poke()
		want, _ := json.Marshal(fakeAnchor{Offset: n, Thread: a.thread})
		r.until("a check reads up to the new record", func() bool {
			log := spy.log()
			return len(log) > 0 && bytes.Equal(log[len(log)-1][1], want)
		})
	}
	a.finish("done", false)
	if v := r.waitStatus(res.TurnID, termapi.TurnIdle); v.Result == nil || v.Result.Text != "done" {
		t.Fatalf("turn = %+v", v)
	}
	log := spy.log()
	if len(log) < 6 || log[0][0] != nil {
		t.Fatalf("checks %q: want the first from the anchor and one per record", log)
	}
	for i := 1; i < len(log); i++ {
		if !bytes.Equal(log[i][0], log[i-1][1]) {
			t.Fatalf("check %d was given %s, the check before returned %s", i, log[i][0], log[i-1][1])
		}
	}
}
