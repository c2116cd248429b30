package task

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/gateway"
	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/postgres"
	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	"github.com/clawconnect/clawconnect/internal/testbed/fakegateway"
	"github.com/clawconnect/clawconnect/internal/testbed/poll"
)

// The multi-process tests re-run this test binary as replica processes:
// each opens the store named by its environment, dials the parent's fake
// gateway, runs a task manager and obeys line commands on stdin:
//
//	submit SESSION TASK...  ->  job ID  (SESSION "-": a new thread)
//	await ID                ->  done ID STATUS SUMMARY
//
// It logs to stderr and exits when stdin closes (a clean Close).
const (
	replicaEnv        = "CLAWCONNECT_TASK_TEST_REPLICA" // the store: sqlite:PATH or postgres:SCHEMA@URL
	replicaGatewayEnv = "CLAWCONNECT_TASK_TEST_GATEWAY"
	replicaLeaseEnv   = "CLAWCONNECT_TASK_TEST_LEASE_MS"
)

// openStoreSpec opens the store a replica spec names.
func openStoreSpec(ctx context.Context, spec string) (store.Store, error) {
	if path, ok := strings.CutPrefix(spec, "sqlite:"); ok {
		return sqlite.Open(ctx, sqlite.Options{Path: path})
	}
	if rest, ok := strings.CutPrefix(spec, "postgres:"); ok {
		schema, url, _ := strings.Cut(rest, "@")
		return postgres.Open(ctx, postgres.Options{URL: url, Schema: schema})
	}
	return nil, fmt.Errorf("unknown store spec %q", spec)
}

// replicaMain is the replica process's main.
func replicaMain() int {
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "replica:", err)
		return 1
	}
	st, err := openStoreSpec(ctx, os.Getenv(replicaEnv))
	if err != nil {
		return fail(err)
	}
	defer st.Close()
	c, err := gateway.Dial(ctx, gateway.Options{URL: os.Getenv(replicaGatewayEnv), Token: fakegateway.Token})
	if err != nil {
		return fail(err)
	}
	defer c.Close()
	o := fastOptions()
	o.Store, o.Gateway, o.Logger, o.Role = st, GatewayClient(c), logger, "replica"
	// A wait on another process's task must be woken by the store's change
	// feed: the fallback re-read is longer than any test.
	o.ForeignPollInterval = time.Hour
	if ms, err := strconv.Atoi(os.Getenv(replicaLeaseEnv)); err == nil {
		o.Lease = time.Duration(ms) * time.Millisecond
	}
	m, err := New(o)
	if err != nil {
		return fail(err)
	}
	defer m.Close()
	if err := m.Start(ctx); err != nil {
		return fail(err)
	}
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf(format+"\n", args...)
	}
	say("ready %s", m.o.Owner)
	var wg sync.WaitGroup
	defer wg.Wait()
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		cmd, rest, _ := strings.Cut(in.Text(), " ")
		switch cmd {
		case "submit":
			session, text, _ := strings.Cut(rest, " ")
			if session == "-" {
				session = ""
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := m.Submit(ctx, SubmitRequest{Task: text, SessionKey: session})
				if err != nil {
					say("error %v", err)
					return
				}
				say("job %s", res.JobID)
			}()
		case "await":
			wg.Add(1)
			go func(id string) {
				defer wg.Done()
				for {
					s, err := m.Check(ctx, CheckRequest{JobID: id, WaitMs: waitMs(5000)})
					if err != nil {
						say("error %v", err)
						return
					}
					if s.IsTerminal {
						say("done %s %s %s", id, s.Status, s.Summary)
						return
					}
				}
			}(rest)
		}
	}
	return 0
}

// replica is a replica process started by a test.
type replica struct {
	t     testing.TB
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   chan string // stdout lines
	logs  chan string // stderr lines
	owner string
	done  chan struct{}
}

// startReplica starts a replica over the store spec and the fake gateway
// and waits until it is ready.
func startReplica(t testing.TB, fg *fakegateway.Server, spec string, lease time.Duration) *replica {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), replicaEnv+"="+spec, replicaGatewayEnv+"="+fg.URL(),
		replicaLeaseEnv+"="+strconv.FormatInt(lease.Milliseconds(), 10))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &replica{t: t, cmd: cmd, stdin: stdin, out: make(chan string, 1<<14), logs: make(chan string, 1<<14), done: make(chan struct{})}
	var readers sync.WaitGroup
	readers.Add(2)
	pump := func(src io.Reader, dst chan string) {
		defer readers.Done()
		s := bufio.NewScanner(src)
		s.Buffer(make([]byte, 64<<10), 1<<20)
		for s.Scan() {
			select {
			case dst <- s.Text():
			default:
			}
		}
	}
	go pump(stdout, r.out)
	go pump(stderr, r.logs)
	go func() {
		readers.Wait()
		_ = cmd.Wait()
		close(r.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-r.done
	})
	r.owner = strings.TrimPrefix(r.expect("ready "), "ready ")
	return r
}

// send writes one command line.
func (r *replica) send(line string) {
	r.t.Helper()
	if _, err := io.WriteString(r.stdin, line+"\n"); err != nil {
		r.t.Fatalf("replica %d: %v", r.cmd.Process.Pid, err)
	}
}

// expect returns the next stdout line that starts with prefix; an "error"
// line fails the test.
func (r *replica) expect(prefix string) string {
	r.t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l := <-r.out:
			if strings.HasPrefix(l, prefix) {
				return l
			}
			if strings.HasPrefix(l, "error ") {
				r.t.Fatalf("replica %d: %s", r.cmd.Process.Pid, l)
			}
		case <-r.done:
			r.t.Fatalf("replica %d exited while the test expected %q", r.cmd.Process.Pid, prefix)
		case <-timeout:
			r.t.Fatalf("replica %d: no %q line", r.cmd.Process.Pid, prefix)
		}
	}
}

// awaitLog waits for a stderr line containing s, at most limit.
func (r *replica) awaitLog(s string, limit time.Duration) {
	r.t.Helper()
	timeout := time.After(limit)
	for {
		select {
		case l := <-r.logs:
			if strings.Contains(l, s) {
				return
			}
		case <-r.done:
			r.t.Fatalf("replica %d exited while the test waited for log %q", r.cmd.Process.Pid, s)
		case <-timeout:
			r.t.Fatalf("replica %d: no log %q within %v", r.cmd.Process.Pid, s, limit)
		}
	}
}

// signal sends sig to the replica.
func (r *replica) signal(sig syscall.Signal) {
	r.t.Helper()
	if err := r.cmd.Process.Signal(sig); err != nil {
		r.t.Fatal(err)
	}
}

// stopBetweenWrites stops the replica (SIGSTOP) at a moment it is not
// writing. On SQLite a process stopped inside a write transaction keeps
// the file's write lock, and no other process can write until it resumes:
// the lock file every writer holds for its whole transaction
// (sqlite.LockSuffix) is held here until the replica has stopped. On
// PostgreSQL it is stopped at once.
func (r *replica) stopBetweenWrites(spec string) {
	r.t.Helper()
	path, ok := strings.CutPrefix(spec, "sqlite:")
	if !ok {
		r.signal(syscall.SIGSTOP)
		return
	}
	f, err := os.OpenFile(path+sqlite.LockSuffix, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		r.t.Fatal(err)
	}
	defer f.Close() // lets the lock go
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		r.t.Fatal(err)
	}
	r.signal(syscall.SIGSTOP)
	poll.Until(r.t, 30*time.Second, "the replica to stop", func() bool { return processState(r.cmd.Process.Pid) == 'T' })
}

// processState is the state letter of /proc/PID/stat (T: stopped), or 0.
func processState(pid int) byte {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')') // the command name may hold spaces
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}

// kill9 kills the replica (nothing written on the way down) and waits.
func (r *replica) kill9() {
	r.signal(syscall.SIGKILL)
	<-r.done
}

// stop closes its stdin (a clean exit) and waits.
func (r *replica) stop() {
	_ = r.stdin.Close()
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		r.t.Fatalf("replica %d did not exit after its stdin closed", r.cmd.Process.Pid)
	}
}

// storeSpecs returns the stores the multi-process tests run on: a SQLite
// file, and a fresh PostgreSQL schema when TEST_DATABASE_URL is set. The
// parent's own connection to each is returned too.
func storeSpecs(t testing.TB) map[string]func(t testing.TB) (string, store.Store) {
	specs := map[string]func(t testing.TB) (string, store.Store){
		"sqlite": func(t testing.TB) (string, store.Store) {
			spec := "sqlite:" + t.TempDir() + "/clawconnect.db"
			st, err := openStoreSpec(t.Context(), spec)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return spec, st
		},
	}
	url := os.Getenv("TEST_DATABASE_URL")
	if url == "" {
		return specs
	}
	specs["postgres"] = func(t testing.TB) (string, store.Store) {
		b := make([]byte, 6)
		_, _ = rand.Read(b)
		schema := "ccmp_" + hex.EncodeToString(b)
		t.Cleanup(func() {
			if db, err := sql.Open("pgx", url); err == nil {
				_, _ = db.Exec(`DROP SCHEMA IF EXISTS ` + schema + ` CASCADE`)
				_ = db.Close()
			}
		})
		spec := "postgres:" + schema + "@" + url
		st, err := openStoreSpec(t.Context(), spec)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return spec, st
	}
	return specs
}

// heldGateway is a fake gateway whose runs end only on Release.
func heldGateway(t testing.TB) *fakegateway.Server {
	return fakegateway.New(t, fakegateway.Options{Token: fakegateway.Token, Script: func(s fakegateway.Submit) fakegateway.Turn {
		return fakegateway.Turn{Reply: "answer: " + s.Message[strings.LastIndex(s.Message, "\n")+1:], Hold: true}
	}})
}

// TestKillRestartResumesAtOnce (issue: a restart waited a whole lease for
// its own tasks): a replica is killed with SIGKILL while it follows a task,
// and a new process on the same host starts. The lease is an hour, so only
// the proof that the old owner is dead (its pid is gone) lets the new
// process resume the task before the test times out; it then finishes it
// with the run's text.
func TestKillRestartResumesAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	for name, open := range storeSpecs(t) {
		t.Run(name, func(t *testing.T) {
			spec, _ := open(t)
			fg := heldGateway(t)
			a := startReplica(t, fg, spec, time.Hour)
			a.send("submit agent:main:restart long job")
			id := strings.TrimPrefix(a.expect("job "), "job ")
			if err := fg.AwaitRun(t.Context(), id); err != nil {
				t.Fatal(err)
			}
			a.kill9()
			start := time.Now()
			b := startReplica(t, fg, spec, time.Hour)
			b.awaitLog("rehydrated running task", 30*time.Second)
			t.Logf("the restarted process resumed the task %v after it started", time.Since(start).Round(time.Millisecond))
			fg.Release(id)
			b.send("await " + id)
			if got, want := b.expect("done "+id), "done "+id+" completed answer: long job"; got != want {
				t.Fatalf("got %q, want %q", got, want)
			}
		})
	}
}

// TestPausedReplicaChangesNothing (issue: outcome writes were not fenced by
// owner): replica A follows a task and is stopped (SIGSTOP) past its
// lease; replica B takes the task over and finishes it; A is continued
// (SIGCONT), finds it lost the lease, and by the time it has exited it has
// changed nothing: record, log and outcome version are B's.
func TestPausedReplicaChangesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	for name, open := range storeSpecs(t) {
		t.Run(name, func(t *testing.T) {
			spec, st := open(t)
			fg := heldGateway(t)
			const lease = 2 * time.Second
			a := startReplica(t, fg, spec, lease)
			a.send("submit agent:main:paused contested task")
			id := strings.TrimPrefix(a.expect("job "), "job ")
			// Stop A once it has written what the run's start brings (run id,
			// first log entry), outside any write of its own.
			awaitStored(t, st, id, func(x *store.Task) bool { return x.ParentRunID != "" && x.LogCount >= 1 })
			a.stopBetweenWrites(spec)
			b := startReplica(t, fg, spec, lease)
			b.awaitLog("rehydrated running task", 30*time.Second)
			fg.Release(id)
			b.send("await " + id)
			if got, want := b.expect("done "+id), "done "+id+" completed answer: contested task"; got != want {
				t.Fatalf("got %q, want %q", got, want)
			}
			before, err := st.GetTask(t.Context(), "main", id)
			if err != nil {
				t.Fatal(err)
			}
			logsBefore, err := st.Logs(t.Context(), id, 0, store.MaxPage)
			if err != nil {
				t.Fatal(err)
			}
			a.signal(syscall.SIGCONT)
			a.awaitLog("lease lost", 30*time.Second)
			a.stop()
			after, err := st.GetTask(t.Context(), "main", id)
			if err != nil {
				t.Fatal(err)
			}
			logsAfter, err := st.Logs(t.Context(), id, 0, store.MaxPage)
			if err != nil {
				t.Fatal(err)
			}
			before.PollCount, before.LastPollAt = after.PollCount, after.LastPollAt // B's own check_task polls
			if before.Version != after.Version || before.OutcomeVersion != after.OutcomeVersion || before.Summary != after.Summary ||
				before.Owner != after.Owner || before.Fence != after.Fence || len(logsBefore) != len(logsAfter) {
				t.Fatalf("the woken replica changed the task:\nbefore %+v (%d log entries)\nafter  %+v (%d)", before, len(logsBefore), after, len(logsAfter))
			}
			if after.Owner != b.owner || after.OutcomeVersion != 1 {
				t.Fatalf("owner %q (B is %q), outcome version %d", after.Owner, b.owner, after.OutcomeVersion)
			}
		})
	}
}

// TestMeasureTakeoverAfterRestart measures, with the default 30 s lease, how
// long a process restarted after SIGKILL takes to resume its predecessor's
// task: when the predecessor is provably dead (same host, pid gone), and
// when it is not (its registry row rewritten to another host, as every
// stranger's lease was before the registry existed). It only reports; run
// it with CLAWCONNECT_MEASURE_TAKEOVER=1 (it takes about a lease).
func TestMeasureTakeoverAfterRestart(t *testing.T) {
	if os.Getenv("CLAWCONNECT_MEASURE_TAKEOVER") == "" {
		t.Skip("set CLAWCONNECT_MEASURE_TAKEOVER=1 to measure (takes about 40 s per store)")
	}
	for name, open := range storeSpecs(t) {
		for _, provable := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/provably-dead=%v", name, provable), func(t *testing.T) {
				spec, st := open(t)
				fg := heldGateway(t)
				lease := DefaultOptions().Lease
				a := startReplica(t, fg, spec, lease)
				a.send("submit agent:main:measure long job")
				id := strings.TrimPrefix(a.expect("job "), "job ")
				if err := fg.AwaitRun(t.Context(), id); err != nil {
					t.Fatal(err)
				}
				a.kill9()
				if !provable {
					ps, err := st.Processes(t.Context())
					if err != nil {
						t.Fatal(err)
					}
					for _, p := range ps {
						if p.ID == a.owner {
							p.Host = "another-host"
							if err := st.Heartbeat(t.Context(), p); err != nil {
								t.Fatal(err)
							}
						}
					}
				}
				start := time.Now()
				b := startReplica(t, fg, spec, lease)
				b.awaitLog("rehydrated running task", 2*lease)
				t.Logf("takeover after restart (lease %v, previous owner provably dead: %v): %v", lease, provable, time.Since(start).Round(time.Millisecond))
				b.stop()
			})
		}
	}
}

// TestProcessesShareTasks is the store's multi-process conformance, run
// with real OS processes on each store: 4 processes submit tasks
// concurrently, and each task is awaited in a process other than the one
// that submitted it (woken only by the store's change feed). Every task is
// followed exactly once (one run submitted to the gateway under its key)
// and its outcome written once, with its own run's text.
func TestProcessesShareTasks(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	perProcess := 25
	if n, err := strconv.Atoi(os.Getenv("CLAWCONNECT_MULTIPROC_TASKS")); err == nil && n > 0 {
		perProcess = n // e.g. 2500: 10^4 tasks from 4 processes
	}
	for name, open := range storeSpecs(t) {
		t.Run(name, func(t *testing.T) {
			spec, st := open(t)
			fg := fakegateway.New(t, fakegateway.Options{Token: fakegateway.Token})
			const procs = 4
			rs := make([]*replica, procs)
			for i := range rs {
				rs[i] = startReplica(t, fg, spec, 30*time.Second)
			}
			ids := make([][]string, procs)
			for i, r := range rs {
				for k := range perProcess {
					r.send(fmt.Sprintf("submit - p%d task %d", i, k))
				}
			}
			for i, r := range rs {
				for range perProcess {
					ids[i] = append(ids[i], strings.TrimPrefix(r.expect("job "), "job "))
				}
			}
			for i := range rs {
				waiter := rs[(i+1)%procs]
				for _, id := range ids[i] {
					waiter.send("await " + id)
				}
			}
			for i := range rs {
				waiter := rs[(i+1)%procs]
				for range ids[i] {
					l := waiter.expect("done ")
					if !strings.Contains(l, " completed FAKE-REPLY: ") {
						t.Fatalf("await through another process: %q", l)
					}
				}
			}
			starts := map[string]int{}
			for _, r := range fg.Requests() {
				if r.Method != "agent" {
					continue
				}
				var p struct {
					IdempotencyKey string `json:"idempotencyKey"`
				}
				if err := json.Unmarshal(r.Params, &p); err == nil {
					starts[p.IdempotencyKey]++
				}
			}
			for i, list := range ids {
				seen := map[string]bool{}
				for _, id := range list {
					task, err := st.GetTask(t.Context(), "main", id)
					if err != nil {
						t.Fatal(err)
					}
					_, asked, _ := strings.Cut(task.Summary, fmt.Sprintf("p%d ", i))
					if task.Status != store.StatusCompleted || task.OutcomeVersion != 1 || !strings.HasPrefix(task.Summary, "FAKE-REPLY: ") || seen[asked] {
						t.Fatalf("task %s: %s outcome version %d summary %q", id, task.Status, task.OutcomeVersion, task.Summary)
					}
					seen[asked] = true
					if starts[id] != 1 {
						t.Fatalf("task %s was started %d times, want once", id, starts[id])
					}
				}
				if len(seen) != perProcess {
					t.Fatalf("process %d: %d distinct answers for %d tasks", i, len(seen), perProcess)
				}
			}
		})
	}
}

// BenchmarkCrossProcessRoundTrip: run_task then a waiting check_task that
// returns when the task ends, against a gateway that answers each run
// after 2 ms. same-process: both calls go to the process that follows the
// task. other-process: run_task goes to a replica process (which follows
// the task) and check_task to this one, which is woken by the store's
// change feed (its fallback re-read is an hour). The target is the
// other-process round trip within 2 ms of the same-process one.
func BenchmarkCrossProcessRoundTrip(b *testing.B) {
	for name, open := range storeSpecs(b) {
		b.Run(name, func(b *testing.B) {
			spec, st := open(b)
			fg := fakegateway.New(b, fakegateway.Options{Token: fakegateway.Token, Script: func(s fakegateway.Submit) fakegateway.Turn {
				return fakegateway.Turn{Reply: "ok", Delay: 2 * time.Millisecond}
			}})
			c, err := gateway.Dial(context.Background(), gateway.Options{URL: fg.URL(), Token: fakegateway.Token})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = c.Close() })
			o := fastOptions()
			o.Store, o.Gateway, o.ForeignPollInterval = st, GatewayClient(c), time.Hour
			m, err := New(o)
			if err != nil {
				b.Fatal(err)
			}
			if err := m.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(m.Close)
			ctx := context.Background()
			wait := func(id string) {
				s, err := m.Check(ctx, CheckRequest{JobID: id, WaitMs: waitMs(30000)})
				if err != nil || s.Status != "completed" {
					b.Fatalf("%v %+v", err, s)
				}
			}
			b.Run("same-process", func(b *testing.B) {
				for b.Loop() {
					res, err := m.Submit(ctx, SubmitRequest{Task: "bench"})
					if err != nil {
						b.Fatal(err)
					}
					wait(res.JobID)
				}
			})
			r := startReplica(b, fg, spec, 30*time.Second)
			b.Run("other-process", func(b *testing.B) {
				for b.Loop() {
					r.send("submit - bench")
					wait(strings.TrimPrefix(r.expect("job "), "job "))
				}
			})
		})
	}
}

// awaitStored waits until the stored task satisfies ok, re-reading it on
// each change the store announces.
func awaitStored(t *testing.T, st store.Store, id string, ok func(*store.Task) bool) {
	t.Helper()
	changed, stop := st.WatchTask(id)
	defer stop()
	timeout := time.After(30 * time.Second)
	for {
		x, err := st.GetTask(t.Context(), "main", id)
		if err != nil {
			t.Fatal(err)
		}
		if ok(x) {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("task %s never reached the awaited state: %+v", id, x)
		}
	}
}
