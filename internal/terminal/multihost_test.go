package terminal

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/agentproc"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/internal/terminal/outbox"
	"github.com/clawconnect/clawconnect/internal/terminal/watch"
	"github.com/clawconnect/clawconnect/termapi"
)

// hostRig is one machine of a multi-host rig: its own panes, Service
// (named by host, with its own sealing key) and Host, over the store
// every machine shares.
type hostRig struct {
	name  string
	agent *fakeAgent
	ft    *fakeTerminals
	svc   *Service
	stop  func()
	// outbox, when set before run, is the host's callback outbox.
	outbox *outbox.Outbox
}

// hostAgent is a fake Codex pane on host, named by its version 3 id.
func hostAgent(host string, pid int) *fakeAgent {
	a := newFakeAgent(termapi.AgentCodex, pid)
	a.pane.TerminalID = agentproc.FormatHostTerminalID(host, agentproc.Codex, "work:0.0", pid)
	return a
}

// addHost adds machine name with one pane (pid) to r's shared store; key
// is its sealing key.
func addHost(t testing.TB, r *rig, name string, pid int, key string) *hostRig {
	t.Helper()
	return addHostOn(t, r, r.st, name, pid, key)
}

// addHostOn is addHost with the machine's own connection st to the
// shared store.
func addHostOn(t testing.TB, r *rig, st store.Store, name string, pid int, key string) *hostRig {
	t.Helper()
	a := hostAgent(name, pid)
	ft := &fakeTerminals{agents: []*fakeAgent{a}}
	r.ft.agents = append(r.ft.agents, a) // the rig's fake watch wakes its monitors
	svc := NewService(Options{Store: st, Terminals: ft, Agents: map[string]agents.Agent{termapi.AgentCodex: fakeReader{ft}},
		DraftTimeout: time.Second, Host: name, HostKey: []byte(key)})
	return &hostRig{name: name, agent: a, ft: ft, svc: svc}
}

// run starts the machine's host with a short lease and rescan, until the
// test ends or stop is called.
func (m *hostRig) run(t testing.TB, r *rig) *hostpkg.Host {
	t.Helper()
	o := hostpkg.Options{Store: m.svc.o.Store, LeaseTTL: 2 * time.Second, Rescan: 50 * time.Millisecond, Watch: r.fakeWatch}
	if m.outbox != nil {
		o.Outbox = m.outbox
	}
	h := hostpkg.New(m.svc, o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = h.Run(ctx); close(done) }()
	m.stop = func() { cancel(); <-done }
	t.Cleanup(m.stop)
	r.until("host "+m.name+" publishes", func() bool {
		hs, err := m.svc.Hosts(t.Context())
		return err == nil && slicesHas(hs, m.name, true)
	})
	return h
}

// twoHosts runs hosts A (one pane, pid) and B (one pane, pid+1) on one
// store.
func twoHosts(t testing.TB, pid int) (*rig, *hostRig, *hostRig) {
	t.Helper()
	r := newRig(t)
	a := addHost(t, r, "hosta", pid, "key-a")
	b := addHost(t, r, "hostb", pid+1, "key-b")
	a.run(t, r)
	b.run(t, r)
	return r, a, b
}

func slicesHas(hs []hostpkg.View, name string, live bool) bool {
	for _, h := range hs {
		if h.Host == name && h.Live == live {
			return true
		}
	}
	return false
}

// prompts returns the sha256 hex of each prompt the agent took.
func prompts(a *fakeAgent) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, rec := range a.records {
		if rec.kind == "prompt" {
			out = append(out, rec.hash)
		}
	}
	return out
}

// TestSendToAnotherHostsPane: a send from host A to a pane of host B is
// run by B (typed into B's pane, sealed by B), A's wait sees B's reply,
// and A lists B's pane under host B.
func TestSendToAnotherHostsPane(t *testing.T) {
	r, a, b := twoHosts(t, 301)
	ctx := t.Context()

	hosts, err := a.svc.Hosts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, h := range hosts {
		for _, row := range h.Terminals {
			seen = append(seen, h.Host+" "+row.ID)
		}
	}
	if want := "hostb " + b.agent.pane.TerminalID; !strings.Contains(strings.Join(seen, "\n"), want) {
		t.Fatalf("A lists %q, want B's pane %q", seen, want)
	}

	res, err := a.svc.Send(ctx, termapi.SendRequest{TerminalID: b.agent.pane.TerminalID, Request: "hello from A"})
	if err != nil {
		t.Fatal(err)
	}
	if res.SubmissionOutcome != termapi.OutcomeAccepted {
		t.Fatalf("outcome %q, want accepted", res.SubmissionOutcome)
	}
	if got := prompts(b.agent); len(got) != 1 || got[0] != hashOf("hello from A") {
		t.Fatalf("B's pane got prompts %q", got)
	}
	if got := prompts(a.agent); len(got) != 0 {
		t.Fatalf("A's own pane got prompts %q", got)
	}
	turn, err := r.st.GetTurn(ctx, res.TurnID)
	if err != nil {
		t.Fatal(err)
	}
	if !b.svc.sealed(turn) || a.svc.sealed(turn) {
		t.Fatalf("the Turn is not sealed by B alone (seal %q)", turn.HostSeal)
	}
	b.agent.finish("B's exact reply", false)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := a.svc.WaitFor(wctx, res.TurnID, func(v termapi.TurnView) bool { return !Running(v.Status) })
	if err != nil {
		t.Fatal(err)
	}
	if v.Result == nil || v.Result.Text != "B's exact reply" {
		t.Fatalf("A sees %+v, want B's reply", v)
	}
	if n := completionClaims(t, r.st, res.TurnID); n != 1 {
		t.Fatalf("%d completion claims, want 1", n)
	}
}

// TestAwayHostRefusesControl: while a pane's host is away, a send to it
// and an approve of its Turn are refused at once, saying so.
func TestAwayHostRefusesControl(t *testing.T) {
	r, a, b := twoHosts(t, 311)
	ctx := t.Context()
	res, err := b.svc.Send(ctx, termapi.SendRequest{TerminalID: b.agent.pane.TerminalID, Request: "work"})
	if err != nil {
		t.Fatal(err)
	}
	b.stop()
	r.until("B is away", func() bool {
		hs, err := a.svc.Hosts(ctx)
		return err == nil && slicesHas(hs, "hostb", false)
	})
	_, err = a.svc.Send(ctx, termapi.SendRequest{TerminalID: b.agent.pane.TerminalID, Request: "more"})
	if !errors.Is(err, termapi.ErrRefused) || !strings.Contains(err.Error(), "hostb, which is away") {
		t.Fatalf("send to an away host's pane: %v, want refused naming the host", err)
	}
	b.agent.set(func(f *fakeAgent) { f.activity = "awaiting_approval" })
	_, err = a.svc.Cancel(ctx, res.TurnID)
	if !errors.Is(err, termapi.ErrRefused) || !strings.Contains(err.Error(), "away") {
		t.Fatalf("cancel of an away host's Turn: %v, want refused", err)
	}
}

// TestHostLostStallsThenResumes: a host that dies leaves its open Turn to
// no one; another host stalls it host_lost with a callback once the dead
// host's lease passed, and the returning host follows it again (same pane,
// same process) to its completion.
func TestHostLostStallsThenResumes(t *testing.T) {
	r, a, b := twoHosts(t, 321)
	ctx := t.Context()
	res, err := b.svc.Send(ctx, termapi.SendRequest{TerminalID: b.agent.pane.TerminalID, Request: "long work", OriginSession: "agent:main:origin"})
	if err != nil {
		t.Fatal(err)
	}
	b.stop()
	r.until("A stalls B's Turn host_lost", func() bool {
		v, err := a.svc.Status(ctx, res.TurnID)
		return err == nil && v.Status == termapi.TurnStalled
	})
	turn, err := r.st.GetTurn(ctx, res.TurnID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(turn.StalledReason, "host_lost") {
		t.Fatalf("stalled reason %q, want host_lost", turn.StalledReason)
	}
	cbs, err := r.st.TurnCallbacks(ctx, res.TurnID, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(cbs) != 1 || cbs[0].Kind != KindStall || !strings.Contains(string(cbs[0].Message), "host_lost") {
		t.Fatalf("callbacks %+v, want one stall callback saying host_lost", cbs)
	}

	b.run(t, r)
	r.until("B follows its Turn again", func() bool {
		v, err := a.svc.Status(ctx, res.TurnID)
		return err == nil && v.Status != termapi.TurnStalled
	})
	b.agent.finish("done after the host returned", false)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := a.svc.WaitFor(wctx, res.TurnID, func(v termapi.TurnView) bool { return !Running(v.Status) })
	if err != nil {
		t.Fatal(err)
	}
	if v.Result == nil || v.Result.Text != "done after the host returned" {
		t.Fatalf("Turn after B returned: %+v", v)
	}
}

// TestForgedTurnRefused: a Turn for B's pane written by a process that is
// not B (it names host B but lacks B's key) is refused by B: failed, its
// input released, nothing typed into B's pane, and no operation runs on it.
func TestForgedTurnRefused(t *testing.T) {
	r := newRig(t)
	b := addHost(t, r, "hostb", 331, "key-b")
	b.run(t, r)
	ctx := t.Context()
	// The forger sees a copy of B's pane and claims to be host B.
	copyOfB := hostAgent("hostb", 331)
	fft := &fakeTerminals{agents: []*fakeAgent{copyOfB}}
	forger := NewService(Options{Store: r.st, Terminals: fft, Agents: map[string]agents.Agent{termapi.AgentCodex: fakeReader{fft}},
		DraftTimeout: time.Second, Host: "hostb", HostKey: []byte("key-a")})
	res, err := forger.Send(ctx, termapi.SendRequest{TerminalID: copyOfB.pane.TerminalID, Request: "rm -rf /"})
	if err != nil {
		t.Fatal(err)
	}
	r.until("B refuses the forged Turn", func() bool {
		v, err := b.svc.Status(ctx, res.TurnID)
		return err == nil && v.Status == termapi.TurnFailed
	})
	turn, err := r.st.GetTurn(ctx, res.TurnID)
	if err != nil {
		t.Fatal(err)
	}
	if turn.Result == nil || turn.Result.Match != "forged_turn" {
		t.Fatalf("forged Turn ended %+v, want failed forged_turn", turn.Result)
	}
	if got := prompts(b.agent); len(got) != 0 {
		t.Fatalf("B's pane got prompts %q from a forged Turn", got)
	}
	if _, err := b.svc.Cancel(ctx, res.TurnID); err == nil {
		t.Fatal("B cancelled a forged Turn")
	}
	// The pane's input is free again: B's own send goes through.
	if _, err := b.svc.Send(ctx, termapi.SendRequest{TerminalID: b.agent.pane.TerminalID, Request: "real work"}); err != nil {
		t.Fatalf("B's own send after the refusal: %v", err)
	}
}

// TestLocalIDAcceptedOnOwnHost: on the pane's own host the version 2 id
// (no host) still names the pane.
func TestLocalIDAcceptedOnOwnHost(t *testing.T) {
	r := newRig(t)
	b := addHost(t, r, "hostb", 341, "key-b")
	id, err := agentproc.ParseTerminalID(b.agent.pane.TerminalID)
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.svc.Send(t.Context(), termapi.SendRequest{TerminalID: id.Local(), Request: "local form"})
	if err != nil {
		t.Fatal(err)
	}
	if got := prompts(b.agent); len(got) != 1 || res.SubmissionOutcome != termapi.OutcomeAccepted {
		t.Fatalf("prompts %q, outcome %q", got, res.SubmissionOutcome)
	}
}

// TestWatchOfAnotherHostsPaneIsLeftToIt: a host asked to follow a watch
// of another host's pane (as its rescan does once the owner's lease
// lapsed) leaves it without claiming the watch's lease, so the owner
// takes it back when it returns and no machine follows a pane it cannot
// see.
func TestWatchOfAnotherHostsPaneIsLeftToIt(t *testing.T) {
	r := newRig(t)
	a := addHost(t, r, "hosta", 341, "key-a")
	b := addHost(t, r, "hostb", 342, "key-b")
	ha := a.run(t, r)
	b.run(t, r)
	ctx := t.Context()
	w, err := b.svc.Watch(ctx, watch.Request{TerminalID: b.agent.pane.TerminalID, OriginSession: "agent:main:origin"})
	if err != nil {
		t.Fatal(err)
	}
	b.stop() // B's follower gives its lease back
	if err := a.svc.Follow(ctx, ha, w.WatchID); err != nil {
		t.Fatalf("A following B's watch: %v, want it left to B", err)
	}
	leases, err := r.st.WorkLeases(ctx, store.LeaseWatch, []string{w.WatchID})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	for _, l := range leases {
		if l.Until > now {
			t.Fatalf("after A was asked to follow B's watch its lease is held: %+v", l)
		}
	}
}

// TestRecordedSocketOfAnotherHostIsNotFollowed: a host lists the tmux
// servers of its own open Turns but not another host's: the socket path in
// B's pane key is B's, and on A (hosts sharing /tmp) following it would list
// B's pane under A's id.
func TestRecordedSocketOfAnotherHostIsNotFollowed(t *testing.T) {
	r := newRig(t)
	sock := filepath.Join(t.TempDir(), "b")
	listenUnix(t, sock)
	b := addHost(t, r, "hostb", 351, "key-b")
	b.agent.pane.Key = sock + "\t%3"
	fb := &followingTerminals{fakeTerminals: b.ft}
	b.svc = NewService(Options{Store: r.st, Terminals: fb, Agents: map[string]agents.Agent{termapi.AgentCodex: fakeReader{b.ft}},
		DraftTimeout: time.Second, Host: b.name, HostKey: []byte("key-b")})
	b.run(t, r)
	a := addHost(t, r, "hosta", 352, "key-a")
	fa := &followingTerminals{fakeTerminals: a.ft}
	a.svc = NewService(Options{Store: r.st, Terminals: fa, Agents: map[string]agents.Agent{termapi.AgentCodex: fakeReader{a.ft}},
		DraftTimeout: time.Second, Host: a.name, HostKey: []byte("key-a")})
	ctx := t.Context()
	res, err := b.svc.Send(ctx, termapi.SendRequest{TerminalID: b.agent.pane.TerminalID, Request: "an open Turn on B"})
	if err != nil || res.SubmissionOutcome != termapi.OutcomeAccepted {
		t.Fatalf("send on B: %+v, %v", res, err)
	}
	if _, err := a.svc.List(ctx); err != nil {
		t.Fatal(err)
	}
	if got := fa.followed(); len(got) != 0 {
		t.Fatalf("A follows %q, B's socket; want none", got)
	}
	if _, err := b.svc.List(ctx); err != nil {
		t.Fatal(err)
	}
	if got := fb.followed(); !slices.Equal(got, []string{sock}) {
		t.Fatalf("B follows %q, want its own %q", got, sock)
	}
}
