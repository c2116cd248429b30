package terminal

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	"github.com/clawconnect/clawconnect/internal/terminal/fswatch"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/internal/terminal/tmux"
	"github.com/clawconnect/clawconnect/internal/terminal/watch"
	"github.com/clawconnect/clawconnect/internal/testbed/cputime"
	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/poll"
	"github.com/clawconnect/clawconnect/internal/testbed/realcli"
	"github.com/clawconnect/clawconnect/termapi"
)

// BenchmarkE2ECodexCompletionLatency measures, over 100 Turns with the real
// Codex TUI, the time from the moment Codex stamps its task_complete record
// to the moment the Turn is stored done (idle_since), and reports p50 and
// p95. Run with CLAWCONNECT_E2E=1 -bench CompletionLatency -benchtime 1x.
func BenchmarkE2ECodexCompletionLatency(b *testing.B) {
	if os.Getenv("CLAWCONNECT_E2E") != "1" {
		b.Skip("set CLAWCONNECT_E2E=1 to run against the real Codex TUI")
	}
	turns := 100
	if v, err := strconv.Atoi(os.Getenv("CLAWCONNECT_BENCH_TURNS")); err == nil && v > 0 {
		turns = v
	}
	lat := codexLatencies(b, turns)
	slices.Sort(lat)
	if len(lat) == 0 {
		return
	}
	p := func(q float64) time.Duration { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
	b.ReportMetric(float64(p(0.50).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(p(0.95).Microseconds())/1000, "p95-ms")
	b.Logf("completion latency over %d turns: p50 %v, p95 %v, max %v", len(lat), p(0.50), p(0.95), lat[len(lat)-1])
}

func codexLatencies(b *testing.B, turns int) []time.Duration {
	model := fakemodel.New(b, fakemodel.Options{})
	rp := startRealTUI(b, realcli.Codex, model)
	st := newBenchSQLite(b)
	svc := NewService(Options{Store: st, Terminals: rp.terms, Agents: DefaultAgents()})
	h := hostpkg.New(svc, hostpkg.Options{Store: svc.o.Store})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = h.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	var out []time.Duration
	for i := range turns {
		res, err := svc.Send(ctx, termapi.SendRequest{TerminalID: rp.pane.TerminalID, Request: fmt.Sprintf("ECHO=bench-%d", i)})
		if err != nil {
			b.Fatalf("turn %d: send: %v", i, err)
		}
		wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
		v, err := svc.Wait(wctx, res.TurnID)
		wcancel()
		if err != nil || v.Status != termapi.TurnIdle || v.Result.Text != fmt.Sprintf("bench-%d", i) {
			b.Fatalf("turn %d = %+v, %v", i, v, err)
		}
		turn, err := st.GetTurn(ctx, res.TurnID)
		if err != nil {
			b.Fatal(err)
		}
		written, err := taskCompleteStamp(turn)
		if err != nil {
			b.Fatalf("turn %d: %v", i, err)
		}
		out = append(out, time.UnixMilli(turn.IdleSince).Sub(written))
		// The next send needs the idle composer back.
		var text string
		if !poll.WithinEvery(30*time.Second, 20*time.Millisecond, func() bool {
			text, _ = rp.terms.Capture(ctx, rp.pane)
			s := rp.agent.Screen(text)
			return s.Activity == "idle" && s.ComposerEmpty
		}) {
			b.Fatalf("pane not idle after turn %d; screen:\n%s", i, text)
		}
	}
	return out
}

// taskCompleteStamp returns the timestamp Codex wrote on the task_complete
// record of the Turn's native turn.
func taskCompleteStamp(t *store.Turn) (time.Time, error) {
	var ev agents.Evidence
	if err := json.Unmarshal(t.Takeover.Submission.AcceptanceEvidence, &ev); err != nil {
		return time.Time{}, err
	}
	var a struct {
		Path string `json:"path"`
	}
	if err := json.Unmarshal(ev.Anchor, &a); err != nil {
		return time.Time{}, err
	}
	f, err := os.Open(a.Path)
	if err != nil {
		return time.Time{}, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var r struct {
			Timestamp time.Time `json:"timestamp"`
			Type      string    `json:"type"`
			Payload   struct {
				Type   string `json:"type"`
				TurnID string `json:"turn_id"`
			} `json:"payload"`
		}
		if json.Unmarshal(sc.Bytes(), &r) == nil && r.Payload.Type == "task_complete" && r.Payload.TurnID == t.Takeover.Submission.NativeTurnID {
			return r.Timestamp, nil
		}
	}
	return time.Time{}, fmt.Errorf("no task_complete for native turn %s in %s", t.Takeover.Submission.NativeTurnID, a.Path)
}

// BenchmarkHostIdle50 follows 50 open Turns whose agents stay silent (fake
// panes, real fsnotify watches on 50 session files, default re-check) for
// 20 s and reports the host's CPU time per second and its heap.
func BenchmarkHostIdle50(b *testing.B) {
	const n = 50
	dir := b.TempDir()
	var fakes []*fakeAgent
	for i := range n {
		a := newFakeAgent(termapi.AgentCodex, 1000+i)
		a.pane.Key = filepath.Join(dir, fmt.Sprintf("rollout-%d.jsonl", i)) // WatchPaths = the key
		if err := os.WriteFile(a.pane.Key, []byte("{}\n"), 0o600); err != nil {
			b.Fatal(err)
		}
		fakes = append(fakes, a)
	}
	st := newBenchSQLite(b)
	ft := &fakeTerminals{agents: fakes}
	svc := NewService(Options{Store: st, Terminals: ft, Agents: map[string]agents.Agent{termapi.AgentCodex: fakeReader{ft}}, DraftTimeout: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, a := range fakes {
		if _, err := svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "work"}); err != nil {
			b.Fatal(err)
		}
	}
	h := hostpkg.New(svc, hostpkg.Options{Store: svc.o.Store})
	done := make(chan struct{})
	go func() { _ = h.Run(ctx); close(done) }()
	if !poll.WithinEvery(time.Minute, 10*time.Millisecond, func() bool { return h.Monitoring() >= n }) {
		b.Fatalf("the host monitors %d of the %d Turns", h.Monitoring(), n)
	}
	// Nothing announces the end of the host's start-up work (its first
	// rescan, the followers' first renewals): a pause keeps it out of the
	// idle figure.
	time.Sleep(time.Second) // let start-up settle
	runtime.GC()
	cpu0, wall0 := cputime.Self(), time.Now()
	window := 20 * time.Second
	if v, err := time.ParseDuration(os.Getenv("CLAWCONNECT_BENCH_IDLE")); err == nil && v > 0 {
		window = v
	}
	b.ResetTimer()
	time.Sleep(window) // the idle the figure is about
	b.StopTimer()
	cpu, wall := cputime.Self()-cpu0, time.Since(wall0)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(cpu.Microseconds())/1000/wall.Seconds(), "cpu-ms/s")
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
	b.Logf("%d monitored turns for %v: CPU %v (%.3f%% of one core), heap in use %.1f MiB, goroutines %d",
		h.Monitoring(), wall.Round(time.Millisecond), cpu, 100*cpu.Seconds()/wall.Seconds(), float64(ms.HeapInuse)/(1<<20), runtime.NumGoroutine())
	cancel()
	<-done
}

// BenchmarkList50Panes measures Service.List over 50 panes of a private
// tmux server, each running a process that classifies as Codex (a link
// named codex to sleep) and holds no rollout: one tmux list, one /proc
// snapshot, and per pane a capture, an open-file inventory and store reads.
func BenchmarkList50Panes(b *testing.B) {
	if _, err := exec.LookPath("tmux"); err != nil {
		b.Skip("no tmux")
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		b.Skip("no sleep")
	}
	dir, err := os.MkdirTemp("", "cc-list-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	codexBin := filepath.Join(dir, "codex")
	if err := os.Symlink(sleep, codexBin); err != nil {
		b.Fatal(err)
	}
	sock := filepath.Join(dir, "s")
	tm := func(args ...string) {
		if out, err := exec.Command("tmux", append([]string{"-S", sock, "-f", "/dev/null"}, args...)...).CombinedOutput(); err != nil {
			b.Fatalf("tmux %v: %v: %s", args, err, out)
		}
	}
	tm("new-session", "-d", "-s", "bench", "-x", "200", "-y", "50", codexBin+" 600")
	defer func() { _ = exec.Command("tmux", "-S", sock, "kill-server").Run() }()
	for i := 1; i < 50; i++ {
		tm("new-window", "-d", "-t", "bench", codexBin+" 600")
	}
	terms, err := NewTmuxTerminals(tmux.Options{Sockets: []string{sock}, NoDefaultServer: true})
	if err != nil {
		b.Fatal(err)
	}
	svc := NewService(Options{Store: newBenchSQLite(b), Terminals: terms, Agents: DefaultAgents()})
	ctx := context.Background()
	res, err := svc.List(ctx)
	if err != nil || len(res.Terminals) != 50 {
		b.Fatalf("list = %d rows, %v", len(res.Terminals), err)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := svc.List(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHostFollows500 follows 500 open Turns and 500 terminal watches
// on fake panes in one host, each through a real session file, with the
// default re-check, renewal and rescan. It reports, idle, the host's CPU
// per second (a window of CLAWCONNECT_BENCH_IDLE, 20 s), its inotify
// instances and watches and its RSS; then it writes each Turn's completion
// record, 10 ms apart, and reports the time until the Turn is stored done
// (its Wait returns; p50, p95). Run with -bench HostFollows500 -benchtime 1x.
func BenchmarkHostFollows500(b *testing.B) {
	n := 500
	if v, err := strconv.Atoi(os.Getenv("CLAWCONNECT_BENCH_FOLLOWERS")); err == nil && v > 0 {
		n = v
	}
	dir := b.TempDir()
	turnAgents, watchAgents := fileAgents(b, dir, n, 10000), fileAgents(b, dir, n, 20000)
	r := newRig(b, append(slices.Clone(turnAgents), watchAgents...)...)
	r.svc = NewService(Options{Store: r.st, Terminals: quietPanes{r.ft},
		Agents: map[string]agents.Agent{termapi.AgentCodex: fakeReader{r.ft}, termapi.AgentClaude: fakeReader{r.ft}}, DraftTimeout: time.Second})
	ctx := context.Background()
	turns := sendAll(b, r.svc, turnAgents)
	for _, a := range watchAgents {
		if _, err := r.svc.Watch(ctx, watch.Request{TerminalID: a.pane.TerminalID, OriginSession: watchOrigin}); err != nil {
			b.Fatal(err)
		}
	}
	h := hostpkg.New(r.svc, hostpkg.Options{Store: r.svc.o.Store})
	hctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = h.Run(hctx); close(done) }()
	defer func() { cancel(); <-done }()
	// Idle starts once every follower has claimed its lease and made its
	// first look (it then names its records to the re-check clock): on a
	// loaded machine the claims of 1000 followers outlast any fixed pause.
	if !poll.WithinEvery(5*time.Minute, 10*time.Millisecond, func() bool { return h.Monitoring() >= 2*n && h.Tracking() >= 2*n }) {
		b.Fatalf("after 5 minutes the host monitors %d and re-checks %d of %d followers", h.Monitoring(), h.Tracking(), 2*n)
	}
	// Nothing announces the end of the host's start-up work (its first
	// rescan, the followers' first renewals): a pause keeps it out of the
	// idle figure.
	time.Sleep(2 * time.Second) // let start-up settle
	runtime.GC()
	window := 20 * time.Second
	if v, err := time.ParseDuration(os.Getenv("CLAWCONNECT_BENCH_IDLE")); err == nil && v > 0 {
		window = v
	}
	b.ResetTimer()
	stopProfile := idleProfile(b)
	cpu0, wall0 := cputime.Self(), time.Now()
	time.Sleep(window) // the idle the figure is about
	cpu, wall := cputime.Self()-cpu0, time.Since(wall0)
	stopProfile()
	usage, err := fswatch.ProcessUsage(os.Getpid())
	if err != nil {
		b.Fatal(err)
	}
	rss := rssMiB(b)
	goroutines := runtime.NumGoroutine()

	// Each Turn's Wait returns once the monitor stored it done (a write
	// of this process wakes its Waits at once).
	stored := make([]time.Time, n)
	var wg, registered sync.WaitGroup
	registered.Add(n)
	for i, id := range turns {
		wg.Go(func() {
			wctx, wcancel := context.WithTimeout(ctx, 5*time.Minute)
			defer wcancel()
			var first sync.Once
			// Wait, told when it has registered and read the Turn once.
			v, err := r.svc.WaitFor(wctx, id, func(v termapi.TurnView) bool {
				first.Do(registered.Done)
				return !Running(v.Status)
			})
			first.Do(registered.Done) // a Wait that failed before its first read
			if err != nil || v.Status != termapi.TurnIdle {
				b.Errorf("turn %d = %s, %v", i, v.Status, err)
			}
			stored[i] = time.Now()
		})
	}
	registered.Wait()
	written := make([]time.Time, n)
	for i, a := range turnAgents {
		written[i] = time.Now()
		a.finishOnDisk(b, fmt.Sprintf("done-%d", i))
		time.Sleep(10 * time.Millisecond) // the load: completions 10 ms apart
	}
	wg.Wait()
	var lat []time.Duration
	for i := range n {
		lat = append(lat, stored[i].Sub(written[i]))
	}
	b.StopTimer()
	slices.Sort(lat)
	p := func(q float64) time.Duration { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
	b.ReportMetric(float64(p(0.50).Microseconds())/1000, "done-p50-ms")
	b.ReportMetric(float64(p(0.95).Microseconds())/1000, "done-p95-ms")
	b.ReportMetric(100*cpu.Seconds()/wall.Seconds(), "idle-cpu-%")
	b.ReportMetric(float64(usage.Instances), "inotify-instances")
	b.ReportMetric(float64(usage.Watches), "inotify-watches")
	b.ReportMetric(rss, "rss-MiB")
	b.Logf("%d Turns + %d watches followed: idle CPU %v over %v (%.3f%% of one core), inotify %d instances / %d watches, RSS %.1f MiB, %d goroutines; done after the completion record p50 %v p95 %v max %v",
		n, n, cpu, wall.Round(time.Millisecond), 100*cpu.Seconds()/wall.Seconds(), usage.Instances, usage.Watches, rss, goroutines, p(0.50), p(0.95), lat[len(lat)-1])
}

// quietPanes are fake panes whose output is watched, as tmux's control
// client watches a real pane's, and that never redraw while idle.
type quietPanes struct{ *fakeTerminals }

func (quietPanes) WatchOutput(context.Context, agents.Pane) (<-chan struct{}, error) {
	return make(chan struct{}), nil
}

// idleProfile writes a CPU profile of the idle window to the file
// CLAWCONNECT_BENCH_IDLE_PROFILE names (-cpuprofile would mix in start-up
// and completions); the returned func stops it.
func idleProfile(b *testing.B) func() {
	path := os.Getenv("CLAWCONNECT_BENCH_IDLE_PROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// rssMiB is the process's resident set from /proc/self/status.
func rssMiB(b *testing.B) float64 {
	st, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(st)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				b.Fatal(err)
			}
			return float64(kb) / 1024
		}
	}
	b.Fatal("no VmRSS in /proc/self/status")
	return 0
}
