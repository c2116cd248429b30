package cli

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// startMCP starts the binary's mcp command, sends initialize and returns
// how long the answer took and the process's resident set size right
// after it (idle). It then closes stdin and requires a clean exit.
func startMCP(b *testing.B, bin string, env []string) (time.Duration, int, int) {
	b.Helper()
	cmd := exec.Command(bin, "mcp")
	cmd.Env = env
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = io.Discard
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	if _, err := io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`+"\n"); err != nil {
		b.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	elapsed := time.Since(start)
	if err != nil || !strings.Contains(line, `"serverInfo"`) {
		b.Fatalf("initialize answer %q: %v", line, err)
	}
	rss, anon := rssKiB(b, cmd.Process.Pid)
	_ = stdin.Close()
	if err := cmd.Wait(); err != nil {
		b.Fatalf("clawconnect mcp did not exit cleanly when stdin closed: %v", err)
	}
	return elapsed, rss, anon
}

// rssKiB reads VmRSS (all resident pages, including the binary's shared
// file-backed text) and RssAnon (the process's own memory) from /proc.
func rssKiB(b *testing.B, pid int) (total, anon int) {
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
// starting `clawconnect mcp` to its initialize answer and its resident
// memory right after (KiB-rss: VmRSS, including the binary's shared
// file-backed pages; KiB-rss-anon: the process's own memory), with one agent
// from the environment and an existing SQLite store. Gateways are dialled
// lazily and the store opens in the background, so neither number depends
// on the gateway. The "version" sub-benchmark is the process-start baseline
// of the same binary on this machine (spawn to exit of clawconnect version).
func BenchmarkMCPStartup(b *testing.B) {
	dir := b.TempDir()
	bin := filepath.Join(dir, "clawconnect")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/clawconnect/clawconnect/cmd/clawconnect").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
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
		var total time.Duration
		var rss, anon int
		for b.Loop() {
			d, r, a := startMCP(b, bin, env)
			total += d
			rss, anon = max(rss, r), max(anon, a)
		}
		b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "ms-to-initialize")
		b.ReportMetric(float64(rss), "KiB-rss")
		b.ReportMetric(float64(anon), "KiB-rss-anon")
	})
}
