package terminal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/terminal/fswatch"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/termapi"
)

// fileAgents returns n fake Codex agents whose session file (their pane
// key, which fakeReader.WatchPaths names) is a real file, each in its own
// directory under dir, so that the host's real file watching follows them.
func fileAgents(t testing.TB, dir string, n, pid0 int) []*fakeAgent {
	t.Helper()
	var agents []*fakeAgent
	for i := range n {
		a := newFakeAgent(termapi.AgentCodex, pid0+i)
		d := filepath.Join(dir, fmt.Sprintf("s%d", pid0+i))
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		a.pane.Key = filepath.Join(d, "rollout.jsonl")
		if err := os.WriteFile(a.pane.Key, []byte("{}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		agents = append(agents, a)
	}
	return agents
}

// finishOnDisk records the completion and appends to the session file, as
// an agent does: the file event is what wakes the monitor.
func (f *fakeAgent) finishOnDisk(t testing.TB, text string) {
	t.Helper()
	f.finish(text, false)
	fh, err := os.OpenFile(f.pane.Key, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := fh.WriteString(`{"type":"task_complete"}` + "\n"); err != nil {
		t.Fatal(err)
	}
}

// sendAll sends one Turn to each agent, 25 at a time (a send waits for
// its draft to show on screen, so one after the other would take seconds,
// and hundreds at once outwait their draft timeout on the store's lock).
func sendAll(t testing.TB, svc *Service, agents []*fakeAgent) []string {
	t.Helper()
	turns := make([]string, len(agents))
	errs := make([]error, len(agents))
	var wg sync.WaitGroup
	slots := make(chan struct{}, 25)
	for i, a := range agents {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			res, err := svc.Send(context.Background(), termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "work"})
			turns[i], errs[i] = res.TurnID, err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return turns
}

func inotifyInstances(t testing.TB) int {
	t.Helper()
	u, err := fswatch.ProcessUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	return u.Instances
}

// TestHostInotifyInstancesStaySmall: a host following 50 Turns through
// their session files holds at most two inotify instances (its shared file
// watcher and the store's change listener), not one per Turn, and a file
// event still wakes exactly the Turn whose file changed.
func TestHostInotifyInstancesStaySmall(t *testing.T) {
	const n = 50
	before := inotifyInstances(t)
	agents := fileAgents(t, t.TempDir(), n, 3000)
	r := newRig(t, agents...)
	ctx := t.Context()
	turns := sendAll(t, r.svc, agents)
	// No re-check within the test: only the file event can finish a Turn.
	h := hostpkg.New(r.svc, hostpkg.Options{Store: r.svc.o.Store, Recheck: time.Hour})
	hctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = h.Run(hctx); close(done) }()
	defer func() { cancel(); <-done }()
	r.until("the host follows every Turn", func() bool { return h.Monitoring() == n })
	if got := inotifyInstances(t) - before; got > 2 {
		t.Fatalf("a host following %d Turns holds %d inotify instances, want at most 2", n, got)
	}
	agents[7].finishOnDisk(t, "seven")
	if v := r.waitStatus(turns[7], termapi.TurnIdle); v.Result == nil || v.Result.Text != "seven" {
		t.Fatalf("turn 7 = %+v", v)
	}
	if v, err := r.svc.Status(ctx, turns[8]); err != nil || !Running(v.Status) {
		t.Fatalf("turn 8 = %s, %v; want still running", v.Status, err)
	}
	cancel()
	<-done
	if got := inotifyInstances(t) - before; got > 1 {
		t.Fatalf("after the host stopped %d inotify instances remain beyond the store's, want none", got-1)
	}
}
