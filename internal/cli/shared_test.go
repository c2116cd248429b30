package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clawconnect/clawconnect/internal/testbed/cputime"
	"github.com/clawconnect/clawconnect/internal/testbed/fakegateway"
)

// asMainEnv makes this test binary behave as the clawconnect binary (the
// arguments after "--"), so tests run real clawconnect processes without
// building one.
const asMainEnv = "CLAWCONNECT_CLI_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMainEnv) != "" {
		os.Exit(asMain())
	}
	code := m.Run()
	for _, f := range AfterTests {
		f()
	}
	os.Exit(code)
}

// AfterTests are run by TestMain once every test ended (the external test
// package removes what it built once per test binary).
var AfterTests []func()

// asMain is cmd/clawconnect's main over the arguments after "--".
func asMain() int {
	args := os.Args[1:]
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := Run(ctx, Env{Args: args, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv, OwnProcess: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "clawconnect:", err)
		return ExitCode(err)
	}
	return 0
}

// clawconnectCmd returns a clawconnect process (this binary as main) with
// the env's variables and args.
func (e *bridgeEnv) clawconnectCmd(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), asMainEnv+"=1")
	for k, v := range e.vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return cmd
}

// lineWatch is a writer that keeps a process's stderr and tells waiters
// when a text appears in it.
type lineWatch struct {
	mu    sync.Mutex
	all   strings.Builder
	waits []lineWait
}

type lineWait struct {
	s  string
	ch chan struct{}
}

func newLineWatch() *lineWatch { return &lineWatch{} }

func (w *lineWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.all.Write(p)
	all := w.all.String()
	keep := w.waits[:0]
	for _, x := range w.waits {
		if strings.Contains(all, x.s) {
			close(x.ch)
			continue
		}
		keep = append(keep, x)
	}
	w.waits = keep
	return len(p), nil
}

func (w *lineWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.all.String()
}

// waitFor returns a channel closed once s has been written.
func (w *lineWatch) waitFor(s string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch := make(chan struct{})
	if strings.Contains(w.all.String(), s) {
		close(ch)
		return ch
	}
	w.waits = append(w.waits, lineWait{s, ch})
	return ch
}

// awaitAny waits until s appears in any of ws and returns which.
func awaitAny(t *testing.T, s string, limit time.Duration, ws ...*lineWatch) int {
	t.Helper()
	found := make(chan int, len(ws))
	stop := make(chan struct{})
	defer close(stop)
	for i, w := range ws {
		ch := w.waitFor(s)
		go func() {
			select {
			case <-ch:
				found <- i
			case <-stop:
			}
		}()
	}
	select {
	case i := <-found:
		return i
	case <-time.After(limit):
		t.Fatalf("no %q within %v", s, limit)
		return -1
	}
}

// TestStdioServersAndServeShareTasks: two clawconnect mcp processes (as two
// MCP clients start them) and one serve share the machine's store. A task
// started through the first stdio server is listed, read and awaited
// through the other two; the first is killed with SIGKILL while it follows
// the task, another process takes the task over and finishes it with the
// run's text, and every process reads that outcome.
func TestStdioServersAndServeShareTasks(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	e := newBridgeEnv(t, func(s fakegateway.Submit) fakegateway.Turn {
		return fakegateway.Turn{Reply: "answer: " + s.Message[strings.LastIndex(s.Message, "\n")+1:], Hold: true}
	})
	e.vars["CLAWCONNECT_LOG_LEVEL"] = "info"
	e.vars["CLAWCONNECT_LEASE_MS"] = "3000" // renewal and takeover ticks every second
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()

	stdio := func(name string) (*mcp.ClientSession, *exec.Cmd, *lineWatch) {
		cmd := e.clawconnectCmd("mcp")
		logs := newLineWatch()
		cmd.Stderr = logs
		cs, err := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatalf("%s: connect: %v\n%s", name, err, logs)
		}
		t.Cleanup(func() {
			_ = cs.Close()
			if t.Failed() {
				t.Logf("%s stderr:\n%s", name, logs)
			}
		})
		return cs, cmd, logs
	}
	first, firstCmd, _ := stdio("client-1")
	second, _, secondLogs := stdio("client-2")

	serveCmd := e.clawconnectCmd("serve", "--addr", "127.0.0.1:0")
	serveLogs := newLineWatch()
	serveCmd.Stderr = serveLogs
	if err := serveCmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = serveCmd.Process.Signal(syscall.SIGTERM)
		_ = serveCmd.Wait()
		if t.Failed() {
			t.Logf("serve stderr:\n%s", serveLogs)
		}
	})
	awaitAny(t, "listening on http://", 30*time.Second, serveLogs)
	line := serveLogs.String()
	addr := strings.Fields(line[strings.Index(line, "http://"):])[0]
	web, err := mcp.NewClient(&mcp.Implementation{Name: "web", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: addr}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = web.Close() })

	run := mcpCall(ctx, t, first, "run_task", map[string]any{"task": "shared work"})
	jobID, _ := mcpStructured(t, run)["jobId"].(string)
	if run.IsError || jobID == "" {
		t.Fatalf("run_task: %s", mcpText(run))
	}
	if err := e.fg.AwaitRun(ctx, jobID); err != nil {
		t.Fatal(err)
	}
	for name, cs := range map[string]*mcp.ClientSession{"client-2": second, "serve": web} {
		if l := mcpText(mcpCall(ctx, t, cs, "list_tasks", map[string]any{})); !strings.Contains(l, jobID) {
			t.Fatalf("%s's list_tasks lacks the task: %s", name, l)
		}
		if g := mcpStructured(t, mcpCall(ctx, t, cs, "get_task", map[string]any{"taskId": jobID})); g["status"] != "running" {
			t.Fatalf("%s's get_task = %v", name, g)
		}
	}
	type waited struct {
		name string
		snap map[string]any
	}
	results := make(chan waited, 2)
	for name, cs := range map[string]*mcp.ClientSession{"client-2": second, "serve": web} {
		go func() {
			for ctx.Err() == nil {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "check_task", Arguments: map[string]any{"jobId": jobID, "mode": "wait", "waitMs": 60000}})
				if err != nil {
					results <- waited{name, map[string]any{"error": err.Error()}}
					return
				}
				var s map[string]any
				raw, _ := json.Marshal(res.StructuredContent)
				_ = json.Unmarshal(raw, &s)
				if s == nil || s["isTerminal"] == true {
					results <- waited{name, s}
					return
				}
			}
		}()
	}

	// The process following the task dies; another takes the task over
	// (the dead process is proven dead at once, no lease wait) and
	// rejoins the run.
	if err := firstCmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	who := awaitAny(t, "rehydrated running task", 60*time.Second, secondLogs, serveLogs)
	t.Logf("taken over by %s", []string{"client-2's mcp", "serve"}[who])
	e.fg.Release(jobID)
	for range 2 {
		select {
		case r := <-results:
			if r.snap["status"] != "completed" || r.snap["summary"] != "answer: shared work" {
				t.Fatalf("%s's waiting check_task = %v", r.name, r.snap)
			}
		case <-ctx.Done():
			t.Fatal("a waiting check_task did not return")
		}
	}
	if g := mcpStructured(t, mcpCall(ctx, t, web, "get_task", map[string]any{"taskId": jobID})); g["status"] != "completed" || g["summary"] != "answer: shared work" {
		t.Fatalf("serve's get_task after the takeover = %v", g)
	}
	for name, logs := range map[string]*lineWatch{"client-2": secondLogs, "serve": serveLogs} {
		if strings.Contains(logs.String(), "private store") {
			t.Fatalf("%s fell back to a private store:\n%s", name, logs)
		}
	}
}

func mcpCall(ctx context.Context, t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func mcpText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func mcpStructured(t *testing.T, r *mcp.CallToolResult) map[string]any {
	t.Helper()
	raw, err := json.Marshal(r.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("structured content %s: %v", raw, err)
	}
	return m
}

// BenchmarkIdleCPU5Processes: five clawconnect mcp processes (five MCP
// clients) share one store with nothing to do. Each op is one second of
// idleness; cpu-ms/s is their CPU time per second, all five together (the
// target: no busy polling — only the lease heartbeats and the poll-counter
// flush wake an idle process).
func BenchmarkIdleCPU5Processes(b *testing.B) {
	e := &bridgeEnv{vars: map[string]string{"CLAWCONNECT_HOME": b.TempDir(),
		"OPENCLAW_URL": "ws://127.0.0.1:1", "OPENCLAW_PASSWORD": "x"}}
	ctx := context.Background()
	var pids []int
	for i := range 5 {
		cmd := e.clawconnectCmd("mcp")
		cs, err := mcp.NewClient(&mcp.Implementation{Name: fmt.Sprint("idle-", i), Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cs.Close() })
		// A store-backed call: the store, the task managers and their
		// lease loops are running.
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_tasks", Arguments: map[string]any{}}); err != nil {
			b.Fatal(err)
		}
		pids = append(pids, cmd.Process.Pid)
	}
	total := func() time.Duration {
		var sum time.Duration
		for _, pid := range pids {
			sum += cputime.Of(pid)
		}
		return sum
	}
	before, start := total(), time.Now()
	for b.Loop() {
		time.Sleep(time.Second) // the idle the figure is about
	}
	used, wall := total()-before, time.Since(start)
	b.ReportMetric(float64(used.Microseconds())/1000/wall.Seconds(), "cpu-ms/s")
}
