package cli

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/clawconnect/clawconnect/gateway"
	"github.com/clawconnect/clawconnect/internal/testbed/cputime"
	"github.com/clawconnect/clawconnect/internal/testbed/fakegateway"
)

// BenchmarkTables measures what scripts/bench.sh prints: for each build
// (CLAWCONNECT_BENCH_BINS="name=path …", default: the current tree) one
// `clawconnect mcp` process against an instant fake gateway (start →
// initialize answered, resident memory after 1.5 s idle, the median of 50
// sequential run_task + check_task round trips beside the gateway floor: a
// direct gateway client's chat.send → final on the same gateway, and the
// resident memory after CLAWCONNECT_BENCH_TASKS/2 and CLAWCONNECT_BENCH_TASKS
// finished tasks, default 24000), then ten `clawconnect mcp` processes on
// one store doing 40 round trips each (SQLite, and PostgreSQL when
// TEST_DATABASE_URL is set). It prints both tables to standard output; run
// it once (-benchtime=1x): its figures are in the tables, not in ns/op.
// CLAWCONNECT_BENCH_TABLES=2 measures table two alone (the ten processes),
// skipping table one and its minutes-long plateau.
func BenchmarkTables(b *testing.B) {
	bins := benchBins(b)
	tasks := 24000
	if v := os.Getenv("CLAWCONNECT_BENCH_TASKS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 2 {
			b.Fatalf("CLAWCONNECT_BENCH_TASKS=%q: want a number of tasks ≥ 2", v)
		}
		tasks = n
	}
	pgURL := os.Getenv("TEST_DATABASE_URL")
	var onlyMulti bool
	switch v := os.Getenv("CLAWCONNECT_BENCH_TABLES"); v {
	case "", "1,2":
	case "2":
		onlyMulti = true
	default:
		b.Fatalf("CLAWCONNECT_BENCH_TABLES=%q: want 2 (table two alone) or unset (both)", v)
	}
	for b.Loop() {
		fg := fakegateway.New(b, fakegateway.Options{Password: "pw"})
		one := make([]single, len(bins))
		multi := make([]multiRun, len(bins))
		multiPG := make([]multiRun, len(bins))
		for i, bin := range bins {
			if !onlyMulti {
				one[i] = measureSingle(b, bin.path, fg, tasks)
			}
		}
		for i, bin := range bins {
			multi[i] = measureMulti(b, bin.path, fg, "")
			if pgURL != "" {
				multiPG[i] = measureMulti(b, bin.path, fg, pgURL)
			}
		}
		if onlyMulti {
			one = nil
		}
		printTables(os.Stdout, bins, one, multi, multiPG, tasks, pgURL != "")
	}
}

// BenchmarkMCPRoundTrip is table one's round trip with enough of them for
// benchstat: per build (CLAWCONNECT_BENCH_BINS, as BenchmarkTables) one
// `clawconnect mcp` against an instant fake gateway, each op a sequential
// run_task + check_task (ns/op, wall) with the process's CPU time per op
// (ms-cpu/op), and "floor", a direct gateway client's chat.send → final on
// the same gateway. -count repeats each build's runs back to back; on a
// loaded machine run it several times instead, so the builds alternate:
//
//	CLAWCONNECT_BENCH_BINS="a=/tmp/a b=/tmp/b" go test -run '^$' \
//	  -bench '^BenchmarkMCPRoundTrip$' -benchtime 300x ./internal/cli
func BenchmarkMCPRoundTrip(b *testing.B) {
	bins := benchBins(b)
	fg := fakegateway.New(b, fakegateway.Options{Password: "pw"})
	b.Run("floor", func(b *testing.B) {
		gc, err := gateway.Dial(b.Context(), gateway.Options{URL: fg.URL(), Password: "pw"})
		if err != nil {
			b.Fatal(err)
		}
		defer gc.Close()
		i := 0
		for b.Loop() {
			i++
			run, err := gc.StartRun(b.Context(), gateway.RunRequest{SessionKey: fmt.Sprint("floor-", i), Message: "ECHO=ok bench",
				IdempotencyKey: fmt.Sprint("floor-", time.Now().UnixNano()), Mode: gateway.ModeChatSend})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := run.Wait(b.Context()); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, bin := range bins {
		b.Run(strings.ReplaceAll(bin.name, " ", "-"), func(b *testing.B) {
			env := benchEnv(b, fg, "")
			c, _ := startClient(b, bin.path, env)
			defer c.close(b)
			for range 20 { // the store open, the gateway dialled, caches warm
				if err := c.roundTrip(b.Context()); err != nil {
					b.Fatal(err)
				}
			}
			cpu0 := cputime.Of(c.cmd.Process.Pid)
			for b.Loop() {
				if err := c.roundTrip(b.Context()); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((cputime.Of(c.cmd.Process.Pid)-cpu0).Microseconds())/1000/float64(b.N), "ms-cpu/op")
		})
	}
}

// BenchmarkMCPTenProcesses is table two's SQLite row for benchstat: per
// build (CLAWCONNECT_BENCH_BINS, as BenchmarkTables) each op is ten
// `clawconnect mcp` processes on one fresh store doing 40 round trips each
// at once, reported as tasks/s, the round trip's median and p90, and the
// ten processes' CPU per task. One op takes about a second; run the test
// binary several times with -benchtime 1x so the builds alternate.
func BenchmarkMCPTenProcesses(b *testing.B) {
	bins := benchBins(b)
	fg := fakegateway.New(b, fakegateway.Options{Password: "pw"})
	for _, bin := range bins {
		b.Run(strings.ReplaceAll(bin.name, " ", "-"), func(b *testing.B) {
			var sum multiRun
			n := 0
			for b.Loop() {
				r := measureMulti(b, bin.path, fg, "")
				sum.perSec += r.perSec
				sum.median += r.median
				sum.p90 += r.p90
				sum.cpu += r.cpu
				n++
			}
			b.ReportMetric(sum.perSec/float64(n), "tasks/s")
			b.ReportMetric(float64(sum.median.Microseconds())/1000/float64(n), "median-ms")
			b.ReportMetric(float64(sum.p90.Microseconds())/1000/float64(n), "p90-ms")
			b.ReportMetric(float64(sum.cpu.Microseconds())/1000/float64(n), "ms-cpu/task")
			b.ReportMetric(0, "ns/op") // an op's wall time includes ten starts: not a figure
		})
	}
}

type benchBin struct{ name, path string }

// benchBins returns the builds to compare, building the current tree
// when none is named.
func benchBins(b *testing.B) []benchBin {
	var out []benchBin
	for f := range strings.FieldsSeq(os.Getenv("CLAWCONNECT_BENCH_BINS")) {
		name, path, ok := strings.Cut(f, "=")
		if !ok {
			name, path = filepath.Base(f), f
		}
		out = append(out, benchBin{name, path})
	}
	if len(out) > 0 {
		return out
	}
	bin := filepath.Join(b.TempDir(), "clawconnect")
	build := exec.Command("go", "build", "-o", bin, "github.com/clawconnect/clawconnect/cmd/clawconnect")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return []benchBin{{"this tree", bin}}
}

// single is what one process measured.
type single struct {
	toInit        time.Duration // median over the starts
	idleKiB       int           // VmRSS after initialize + 1.5 s idle, median
	idleAnonKiB   int
	rtMedian      time.Duration
	rtCPU         time.Duration // CPU time of the process per round trip
	floorMedian   time.Duration
	halfKiB, kiB  int // VmRSS after tasks/2 and tasks finished tasks
	plateauPerSec float64
}

// multiRun is ten processes on one store.
type multiRun struct {
	perSec      float64
	median, p90 time.Duration
	cpu         time.Duration // CPU time of all ten processes per task
}

func benchEnv(b *testing.B, fg *fakegateway.Server, dbURL string) []string {
	dir := b.TempDir()
	env := []string{"HOME=" + dir, "CLAWCONNECT_HOME=" + filepath.Join(dir, "home"), "OPENCLAW_URL=" + fg.URL(),
		"OPENCLAW_PASSWORD=pw", "PATH=" + os.Getenv("PATH")}
	if dbURL != "" {
		env = append(env, "CLAWCONNECT_DATABASE_URL="+dbURL)
	}
	// Extra variables for the processes, e.g. GOGC=200, to try a runtime
	// setting against the defaults.
	return append(env, strings.Fields(os.Getenv("CLAWCONNECT_BENCH_ENV"))...)
}

func measureSingle(b *testing.B, bin string, fg *fakegateway.Server, tasks int) single {
	var s single
	env := benchEnv(b, fg, "")
	ctx := b.Context()
	// The first start creates and migrates the store.
	c, _ := startClient(b, bin, env)
	c.close(b)
	var inits []time.Duration
	var idle, anon []int
	for range 3 {
		c, d := startClient(b, bin, env)
		inits = append(inits, d)
		time.Sleep(1500 * time.Millisecond) // the idle the figure is about
		rss, a := rssKiB(b, c.cmd.Process.Pid)
		idle, anon = append(idle, rss), append(anon, a)
		c.close(b)
	}
	s.toInit, s.idleKiB, s.idleAnonKiB = median(inits), median(idle), median(anon)

	s.floorMedian = gatewayFloor(b, fg, 50)
	c, _ = startClient(b, bin, env)
	defer c.close(b)
	var rts []time.Duration
	cpu0 := cputime.Of(c.cmd.Process.Pid)
	for range 50 {
		start := time.Now()
		if err := c.roundTrip(ctx); err != nil {
			b.Fatal(err)
		}
		rts = append(rts, time.Since(start))
	}
	s.rtMedian = median(rts)
	s.rtCPU = (cputime.Of(c.cmd.Process.Pid) - cpu0) / 50

	// The plateau: tasks run by 8 concurrent callers of the one process.
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	start := time.Now()
	half := make(chan struct{})
	var halfOnce sync.Once
	for range 8 {
		wg.Go(func() {
			for {
				n := next.Add(1)
				if n > int64(tasks) || failed.Load() != nil {
					return
				}
				if err := c.roundTrip(ctx); err != nil {
					failed.Store(&err)
					return
				}
				if n == int64(tasks/2) {
					halfOnce.Do(func() { close(half) })
				}
			}
		})
	}
	<-half
	s.halfKiB, _ = rssKiB(b, c.cmd.Process.Pid)
	wg.Wait()
	if p := failed.Load(); p != nil {
		b.Fatal(*p)
	}
	s.plateauPerSec = float64(tasks) / time.Since(start).Seconds()
	s.kiB, _ = rssKiB(b, c.cmd.Process.Pid)
	return s
}

// gatewayFloor is the median of n chat.send → final round trips of a
// direct gateway client: what the gateway itself costs.
func gatewayFloor(b *testing.B, fg *fakegateway.Server, n int) time.Duration {
	ctx := b.Context()
	gc, err := gateway.Dial(ctx, gateway.Options{URL: fg.URL(), Password: "pw"})
	if err != nil {
		b.Fatal(err)
	}
	defer gc.Close()
	var ds []time.Duration
	for i := range n {
		start := time.Now()
		run, err := gc.StartRun(ctx, gateway.RunRequest{SessionKey: fmt.Sprint("floor-", i), Message: "ECHO=ok bench",
			IdempotencyKey: fmt.Sprint("floor-", time.Now().UnixNano()), Mode: gateway.ModeChatSend})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := run.Wait(ctx); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(start))
	}
	return median(ds)
}

// measureMulti runs ten processes on one store (SQLite in a fresh home, or
// a fresh PostgreSQL database on the server of baseURL), each doing 40
// sequential round trips at once.
func measureMulti(b *testing.B, bin string, fg *fakegateway.Server, baseURL string) multiRun {
	const procs, each = 10, 40
	dbURL := ""
	if baseURL != "" {
		dbURL = freshDatabase(b, baseURL)
	}
	env := benchEnv(b, fg, dbURL)
	ctx := b.Context()
	c, _ := startClient(b, bin, env) // creates the store
	c.close(b)
	clients := make([]*stdioClient, procs)
	for i := range clients {
		clients[i], _ = startClient(b, bin, env)
		defer clients[i].close(b)
		if _, err := clients[i].tool(ctx, "list_tasks", map[string]any{}); err != nil { // store open
			b.Fatal(err)
		}
	}
	cpu := func() (sum time.Duration) {
		for _, c := range clients {
			sum += cputime.Of(c.cmd.Process.Pid)
		}
		return sum
	}
	cpu0 := cpu()
	var mu sync.Mutex
	var all []time.Duration
	var wg sync.WaitGroup
	errs := make(chan error, procs)
	start := time.Now()
	for _, c := range clients {
		wg.Go(func() {
			for range each {
				t0 := time.Now()
				if err := c.roundTrip(ctx); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				all = append(all, time.Since(t0))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	used := cpu() - cpu0
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	slices.Sort(all)
	return multiRun{perSec: float64(len(all)) / wall.Seconds(), median: all[len(all)/2], p90: all[len(all)*9/10],
		cpu: used / time.Duration(len(all))}
}

// freshDatabase creates a database on the server of baseURL, dropped at
// cleanup, and returns its URL.
func freshDatabase(b testing.TB, baseURL string) string {
	db, err := sql.Open("pgx", baseURL)
	if err != nil {
		b.Fatal(err)
	}
	name := fmt.Sprintf("ccbench_%d", time.Now().UnixNano())
	if _, err := db.ExecContext(b.Context(), "CREATE DATABASE "+name); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_, _ = db.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		_ = db.Close()
	})
	i := strings.LastIndex(baseURL, "/")
	rest := ""
	if q := strings.Index(baseURL[i:], "?"); q >= 0 {
		rest = baseURL[i+q:]
	}
	return baseURL[:i+1] + name + rest
}

func median[T int | time.Duration](v []T) T {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func printTables(w io.Writer, bins []benchBin, one []single, multi, multiPG []multiRun, tasks int, pg bool) {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }
	row := func(label string, f func(i int) string) {
		fmt.Fprintf(w, "| %s |", label)
		for i := range bins {
			fmt.Fprintf(w, " %s |", f(i))
		}
		fmt.Fprintln(w)
	}
	head := func(first string) {
		fmt.Fprintf(w, "\n| %s |", first)
		for _, b := range bins {
			fmt.Fprintf(w, " %s |", b.name)
		}
		fmt.Fprintf(w, "\n|---|%s\n", strings.Repeat("---|", len(bins)))
	}
	if one != nil {
		printSingle(w, bins, one, tasks, head, row)
	}
	head("10 clawconnect mcp × 40 tasks, one store")
	row("SQLite throughput", func(i int) string { return fmt.Sprintf("%.0f tasks/s", multi[i].perSec) })
	row("SQLite round trip median / p90", func(i int) string { return ms(multi[i].median) + " / " + ms(multi[i].p90) })
	row("SQLite CPU time of the ten per task", func(i int) string { return ms(multi[i].cpu) })
	if pg {
		row("PostgreSQL throughput", func(i int) string { return fmt.Sprintf("%.0f tasks/s", multiPG[i].perSec) })
		row("PostgreSQL round trip median / p90", func(i int) string { return ms(multiPG[i].median) + " / " + ms(multiPG[i].p90) })
		row("PostgreSQL CPU time of the ten per task", func(i int) string { return ms(multiPG[i].cpu) })
	}
}

func printSingle(w io.Writer, bins []benchBin, one []single, tasks int, head func(string), row func(string, func(int) string)) {
	mib := func(k int) string { return fmt.Sprintf("%.1f MiB", float64(k)/1024) }
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }
	head("one clawconnect mcp (instant fake gateway)")
	row("idle RSS after initialize (+1.5 s)", func(i int) string {
		return fmt.Sprintf("%s (anon %s)", mib(one[i].idleKiB), mib(one[i].idleAnonKiB))
	})
	row("round trip run_task+check_task (median of 50)", func(i int) string { return ms(one[i].rtMedian) })
	row("gateway floor chat.send→final (median of 50)", func(i int) string { return ms(one[i].floorMedian) })
	row("overhead over the floor", func(i int) string { return ms(one[i].rtMedian - one[i].floorMedian) })
	row("CPU time of the mcp process per round trip", func(i int) string { return ms(one[i].rtCPU) })
	row("start → initialize answered (median of 3)", func(i int) string { return ms(one[i].toInit) })
	row(fmt.Sprintf("RSS at %d / %d finished tasks", tasks/2, tasks), func(i int) string {
		return fmt.Sprintf("%s / %s (%.0f tasks/s, 8 callers)", mib(one[i].halfKiB), mib(one[i].kiB), one[i].plateauPerSec)
	})
}

// stdioClient speaks newline-delimited JSON-RPC to one clawconnect mcp
// process; calls may overlap (answers are matched by id).
type stdioClient struct {
	cmd     *exec.Cmd
	in      io.WriteCloser
	wmu     sync.Mutex
	id      atomic.Int64
	mu      sync.Mutex
	pending map[int64]chan rpcAnswer
	done    chan struct{}
}

type rpcAnswer struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// startClient starts bin's mcp command and initializes it, returning the
// time from the start to the initialize answer.
func startClient(b testing.TB, bin string, env []string) (*stdioClient, time.Duration) {
	b.Helper()
	cmd := exec.Command(bin, "mcp")
	cmd.Env = env
	cmd.Stderr = io.Discard
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	c := &stdioClient{cmd: cmd, in: in, pending: map[int64]chan rpcAnswer{}, done: make(chan struct{})}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go c.read(out)
	if _, err := c.call(b.Context(), "initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "bench", "version": "1"}}); err != nil {
		b.Fatal(err)
	}
	d := time.Since(start)
	c.send([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	return c, d
}

func (c *stdioClient) read(out io.Reader) {
	defer close(c.done)
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	for sc.Scan() {
		var m struct {
			ID     *int64 `json:"id"`
			Method string `json:"method"`
			rpcAnswer
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || m.ID == nil || m.Method != "" {
			continue // a notification or a request of the server's
		}
		c.mu.Lock()
		ch := c.pending[*m.ID]
		delete(c.pending, *m.ID)
		c.mu.Unlock()
		if ch != nil {
			ch <- m.rpcAnswer
		}
	}
}

func (c *stdioClient) send(line []byte) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, _ = c.in.Write(append(line, '\n'))
}

func (c *stdioClient) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	id := c.id.Add(1)
	ch := make(chan rpcAnswer, 1)
	c.mu.Lock()
	c.pending[id] = ch
	c.mu.Unlock()
	line, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	c.send(line)
	select {
	case a := <-ch:
		if a.Error != nil {
			return nil, fmt.Errorf("%s: %s", method, a.Error.Message)
		}
		return a.Result, nil
	case <-c.done:
		return nil, fmt.Errorf("%s: the process closed its output", method)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// tool calls a tool and returns its structured content.
func (c *stdioClient) tool(ctx context.Context, name string, args map[string]any) (map[string]any, error) {
	raw, err := c.call(ctx, "tools/call", map[string]any{"name": name, "arguments": args})
	if err != nil {
		return nil, err
	}
	var res struct {
		IsError           bool            `json:"isError"`
		Content           json.RawMessage `json:"content"`
		StructuredContent map[string]any  `json:"structuredContent"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, err
	}
	if res.IsError {
		return nil, fmt.Errorf("%s: %s", name, res.Content)
	}
	return res.StructuredContent, nil
}

// roundTrip is one run_task and the check_task calls until it ends.
func (c *stdioClient) roundTrip(ctx context.Context) error {
	run, err := c.tool(ctx, "run_task", map[string]any{"task": "ECHO=ok bench"})
	if err != nil {
		return err
	}
	id, _ := run["jobId"].(string)
	for {
		sc, err := c.tool(ctx, "check_task", map[string]any{"jobId": id, "waitMs": 10000})
		if err != nil {
			return err
		}
		if sc["isTerminal"] == true {
			if sc["status"] != "completed" {
				return fmt.Errorf("task %s ended %v", id, sc["status"])
			}
			return nil
		}
	}
}

func (c *stdioClient) close(b testing.TB) {
	_ = c.in.Close()
	if err := c.cmd.Wait(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		b.Errorf("clawconnect mcp did not exit cleanly when stdin closed: %v", err)
	}
}
