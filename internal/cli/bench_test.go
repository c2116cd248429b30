package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/testbed/cputime"
)

// startup is one start of clawconnect mcp as measured by startMCP.
type startup struct {
	toInit   time.Duration // spawn to the initialize answer read
	cpu      time.Duration // CPU time of all threads until then
	rss      int           // VmRSS (KiB) right after the answer
	anon     int           // RssAnon (KiB) right after the answer
	rssReady int           // VmRSS (KiB) once a list_tasks call (which needs the store) is answered
}

// startMCP starts the binary's mcp command, sends initialize and measures
// how long the answer took, the CPU the process used until then and its
// resident set size right after it. It then calls list_tasks, which waits
// for the store opened in the background, and measures the resident set
// again (idle with the store open). It then closes stdin and requires a
// clean exit.
func startMCP(b *testing.B, bin string, env []string) startup {
	b.Helper()
	c, toInit := startClient(b, bin, env)
	st := startup{toInit: toInit, cpu: cputime.Of(c.cmd.Process.Pid)}
	st.rss, st.anon = rssKiB(b, c.cmd.Process.Pid)
	if _, err := c.tool(b.Context(), "list_tasks", map[string]any{}); err != nil {
		b.Fatalf("list_tasks: %v", err)
	}
	st.rssReady, _ = rssKiB(b, c.cmd.Process.Pid)
	c.close(b)
	return st
}

// rssKiB reads VmRSS (all resident pages, including the binary's shared
// file-backed text) and RssAnon (the process's own memory) from /proc.
func rssKiB(b testing.TB, pid int) (total, anon int) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		b.Skipf("no /proc: %v", err)
	}
	kib := func(v string) int {
		n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		return n
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			total = kib(v)
		}
		if v, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			anon = kib(v)
		}
	}
	if total == 0 {
		b.Fatal("no VmRSS")
	}
	return total, anon
}

// BenchmarkMCPStartup measures, for the built binary, the time from
// starting `clawconnect mcp` to its initialize answer (ms-to-initialize,
// wall; ms-cpu-to-initialize, CPU time of all its threads until then) and
// its resident memory right after (KiB-rss: VmRSS, including the binary's
// shared file-backed pages; KiB-rss-anon: the process's own memory) and
// once the store has opened (KiB-rss-ready: VmRSS after a list_tasks call,
// the figure for an idle server), with one agent from the environment and
// an existing SQLite store. Memory figures are the maximum over the
// iterations. Gateways are dialled lazily, and the tools are registered
// and then the store opened in the background once initialize is
// answered, so KiB-rss is the process before that work and neither number
// depends on the gateway.
// The "version" sub-benchmark is the process-start baseline
// of the same binary on this machine (spawn to exit of clawconnect version).
// CLAWCONNECT_BENCH_BIN names a prebuilt binary to measure instead of
// building the current tree (to compare two builds in interleaved runs).
func BenchmarkMCPStartup(b *testing.B) {
	dir := b.TempDir()
	bin := os.Getenv("CLAWCONNECT_BENCH_BIN") // a prebuilt binary, to compare builds in interleaved runs
	if bin == "" {
		bin = filepath.Join(dir, "clawconnect")
		// As scripts/run.sh and the README build it: without cgo, the
		// binary starts without the dynamic loader (idle RSS 22.2 → 20.8 MiB).
		build := exec.Command("go", "build", "-o", bin, "github.com/clawconnect/clawconnect/cmd/clawconnect")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			b.Fatalf("go build: %v\n%s", err, out)
		}
	}
	env := []string{"HOME=" + dir, "CLAWCONNECT_HOME=" + filepath.Join(dir, "home"), "OPENCLAW_URL=ws://127.0.0.1:9", "OPENCLAW_PASSWORD=x", "PATH=" + os.Getenv("PATH")}
	b.Run("version", func(b *testing.B) {
		for b.Loop() {
			cmd := exec.Command(bin, "version")
			cmd.Env = env
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("mcp", func(b *testing.B) {
		startMCP(b, bin, env) // creates and migrates the store once
		var wall, cpu time.Duration
		var rss, anon, ready int
		for b.Loop() {
			st := startMCP(b, bin, env)
			wall += st.toInit
			cpu += st.cpu
			rss, anon, ready = max(rss, st.rss), max(anon, st.anon), max(ready, st.rssReady)
		}
		b.ReportMetric(float64(wall.Microseconds())/float64(b.N)/1000, "ms-to-initialize")
		b.ReportMetric(float64(cpu.Microseconds())/float64(b.N)/1000, "ms-cpu-to-initialize")
		b.ReportMetric(float64(rss), "KiB-rss")
		b.ReportMetric(float64(anon), "KiB-rss-anon")
		b.ReportMetric(float64(ready), "KiB-rss-ready")
	})
}
