package terminal

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	"github.com/clawconnect/clawconnect/internal/store/sqlstore"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/internal/terminal/watch"
	"github.com/clawconnect/clawconnect/termapi"
)

// twoProcesses is a rig whose host runs on one handle of a SQLite store
// and whose sender, a Service without a host as a command has when a host
// is live, works on a second handle of the same file, as two processes do.
type twoProcesses struct {
	*rig
	sender *Service
	// started receives the first watched path of each monitor that
	// begins following (the host's Watch hook).
	started chan string
}

func newTwoProcesses(t testing.TB, o hostpkg.Options, fakes ...*fakeAgent) *twoProcesses {
	t.Helper()
	path := filepath.Join(t.TempDir(), sqlite.FileName)
	open := func() *sqlstore.DB {
		st, err := sqlite.Open(t.Context(), sqlite.Options{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	r := newRig(t, fakes...)
	r.st = open()
	r.svc = r.service()
	p := &twoProcesses{rig: r, started: make(chan string, 16)}
	p.sender = NewService(Options{Store: open(), Terminals: r.ft,
		Agents: map[string]agents.Agent{termapi.AgentCodex: fakeReader{r.ft}, termapi.AgentClaude: fakeReader{r.ft}}, DraftTimeout: time.Second})
	o.Watch = func(ctx context.Context, paths []string) (<-chan struct{}, error) {
		select {
		case p.started <- paths[0]:
		default:
		}
		return r.fakeWatch(ctx, paths)
	}
	r.start(r.svc, o)
	return p
}

// TestAnnouncedTurnIsFollowedByAnotherProcessHost: a Turn sent by a
// process without a host of its own is followed by the live host of
// another process at once, through the store's feed, not at that host's
// next rescan (an hour here).
func TestAnnouncedTurnIsFollowedByAnotherProcessHost(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 501)
	p := newTwoProcesses(t, hostpkg.Options{Rescan: time.Hour, LeaseTTL: time.Hour}, a)
	ctx := t.Context()
	res, err := p.sender.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "follow me"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the other process's host never began following the sent Turn")
	}
	a.finish("followed", false)
	if v := p.waitStatus(res.TurnID, termapi.TurnIdle); v.Result == nil || v.Result.Text != "followed" {
		t.Fatalf("turn = %+v, want idle with the reply", v)
	}
	// The sender's Wait wakes on the other handle's write too.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if v, err := p.sender.Wait(wctx, res.TurnID); err != nil || v.Status != termapi.TurnIdle {
		t.Fatalf("sender's wait = %+v, %v", v, err)
	}
}

// TestAnnouncedWatchIsFollowedByAnotherProcessHost: a watch set by a
// process without a host is followed by another process's live host at
// once.
func TestAnnouncedWatchIsFollowedByAnotherProcessHost(t *testing.T) {
	a := newFakeAgent(termapi.AgentClaude, 504)
	p := newTwoProcesses(t, hostpkg.Options{Rescan: time.Hour, LeaseTTL: time.Hour}, a)
	if _, err := p.sender.Watch(t.Context(), watch.Request{TerminalID: a.pane.TerminalID, OriginSession: watchOrigin}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the other process's host never began following the watch")
	}
}

// TestHostStopAnnouncesReleasedWork: when a host that followed a Turn
// stops, another process's host takes the Turn at once (the stopping host
// announces the leases it gave back) instead of at its next rescan.
func TestHostStopAnnouncesReleasedWork(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 502)
	p := newTwoProcesses(t, hostpkg.Options{Rescan: time.Hour, LeaseTTL: time.Hour}, a)
	ctx := t.Context()
	// A first host on the sender's handle follows the Turn it sends.
	first := hostpkg.New(p.sender, hostpkg.Options{Store: p.sender.o.Store, Owner: "first-host", Rescan: time.Hour, LeaseTTL: time.Hour, Watch: p.fakeWatch})
	fctx, stopFirst := context.WithCancel(ctx)
	firstDone := make(chan struct{})
	go func() { _ = first.Run(fctx); close(firstDone) }()
	t.Cleanup(func() { stopFirst(); <-firstDone })
	p.until("the first host runs", func() bool { return first.Monitoring() == 0 && hostRegistered(t, p.st, first.Owner()) })
	res, err := p.sender.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "hand me over"})
	if err != nil {
		t.Fatal(err)
	}
	p.until("the first host follows the Turn", func() bool { return first.Monitoring() == 1 })
	// Drain what the second host saw so far: it may have raced for the
	// lease and lost.
	for len(p.started) > 0 {
		<-p.started
	}
	stopFirst()
	<-firstDone
	select {
	case <-p.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the remaining host never took over the released Turn")
	}
	a.finish("taken over", false)
	if v := p.waitStatus(res.TurnID, termapi.TurnIdle); v.Result == nil || v.Result.Text != "taken over" {
		t.Fatalf("turn = %+v, want idle with the reply", v)
	}
}

// hostRegistered reports whether the host named owner is in reg's process
// registry: its Run has begun (it registers right after it starts taking
// work).
func hostRegistered(t testing.TB, reg hostpkg.Registered, owner string) bool {
	ps, err := reg.Processes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(ps, func(p store.Process) bool { return p.ID == owner })
}

// BenchmarkAnnouncedTurnPickup measures the delay from a send returning in
// one process (store handle) to the monitor of another process's host
// beginning to follow the Turn: the store's feed carries it (before, the
// host found it at its next rescan, up to 15 s later). Reported as p50 and
// p95 in ms.
func BenchmarkAnnouncedTurnPickup(b *testing.B) {
	a := newFakeAgent(termapi.AgentCodex, 503)
	p := newTwoProcesses(b, hostpkg.Options{Rescan: time.Hour, LeaseTTL: time.Hour}, a)
	ctx := b.Context()
	var delays []time.Duration
	for b.Loop() {
		res, err := p.sender.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		sent := time.Now()
		select {
		case <-p.started:
			delays = append(delays, time.Since(sent))
		case <-time.After(10 * time.Second):
			b.Fatal("no host followed the Turn")
		}
		a.finish("ok", false)
		p.waitStatus(res.TurnID, termapi.TurnIdle)
		p.rig.until("the pane is sendable", func() bool {
			l, err := p.sender.List(ctx)
			return err == nil && len(l.Terminals) == 1 && len(l.Terminals[0].AvailableActions) > 0
		})
	}
	slices.Sort(delays)
	b.ReportMetric(float64(delays[len(delays)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(delays[len(delays)*95/100].Microseconds())/1000, "p95-ms")
}
