package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/testbed/peers"
	"github.com/clawconnect/clawconnect/internal/testbed/realgateway"
)

// binDir holds the clawconnect binary built for this test binary; TestMain
// removes it.
var binDir = sync.OnceValues(func() (string, error) { return os.MkdirTemp("", "clawconnect-e2e-bin-") })

// buildBinary builds cmd/clawconnect once per test binary.
var buildBinary = sync.OnceValues(func() (string, error) {
	dir, err := binDir()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "clawconnect")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/clawconnect/clawconnect/cmd/clawconnect")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

func TestMain(m *testing.M) {
	code := m.Run()
	if err := realgateway.StopShared(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: stop shared gateway:", err)
		code = max(code, 1)
	}
	if dir, err := binDir(); err == nil {
		_ = os.RemoveAll(dir)
	}
	os.Exit(code)
}

var allTools = []string{"cancel_task", "check_task", "get_connection_info", "get_session", "get_task", "list_agents", "list_sessions", "list_tasks", "run_task"}

// fixture is one test's clawconnect binary, CLAWCONNECT_HOME (with an
// agents.json pointing at the shared real gateway) and installed clients.
type fixture struct {
	bin  string
	home string
	in   *peers.Installer
	// extraEnv is appended to the environment of clawconnect processes.
	extraEnv []string
}

func setup(t *testing.T) *fixture {
	t.Helper()
	peers.RequireE2E(t)
	gw := realgateway.Shared(t)
	in := peers.Require(t, peers.Node, peers.MCPInspector, peers.MCPSDK)
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	agents := fmt.Sprintf(`{"agents":[{"id":"main","url":%q,"password":%q,"openclawAgentId":"main","role":"e2e"}]}`, gw.URL(), gw.Token())
	if err := os.WriteFile(filepath.Join(home, "agents.json"), []byte(agents), 0o600); err != nil {
		t.Fatal(err)
	}
	return &fixture{bin: bin, home: home, in: in}
}

// env is the environment of clawconnect processes: this process's, with the
// fixture's home and no stray gateway settings.
func (f *fixture) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OPENCLAW_") && !strings.HasPrefix(kv, "CLAWCONNECT_") && !strings.HasPrefix(kv, "MCP_") && !strings.HasPrefix(kv, "PUBLIC_MCP_PASS") {
			env = append(env, kv)
		}
	}
	return append(append(env, "CLAWCONNECT_HOME="+f.home, "CLAWCONNECT_LOG_LEVEL=info"), f.extraEnv...)
}

// serve starts clawconnect serve on a free loopback port and returns its
// /mcp URL; the process is stopped with SIGTERM when the test ends, and
// must exit cleanly.
func (f *fixture) serve(t *testing.T) string {
	t.Helper()
	url, _ := f.serveKillable(t)
	return url
}

// serveKillable is serve that also returns kill, which ends the process
// with SIGKILL (a replica lost mid-work) and waits for it; after a kill
// the test's end expects no clean exit.
func (f *fixture) serveKillable(t *testing.T) (url string, kill func()) {
	t.Helper()
	cmd := exec.Command(f.bin, "serve", "--addr", "127.0.0.1:0")
	cmd.Env = f.env()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	urlc := make(chan string, 1)
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			t.Log("serve:", line)
			if _, rest, ok := strings.Cut(line, "listening on "); ok {
				select {
				case urlc <- strings.Fields(rest)[0]:
				default:
				}
			}
		}
	}()
	done := make(chan error, 1)
	killed := false
	kill = func() {
		killed = true
		_ = cmd.Process.Kill()
		<-logDone
		done <- cmd.Wait()
	}
	t.Cleanup(func() {
		if killed {
			return
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		go func() { <-logDone; done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve did not exit cleanly on SIGTERM: %v", err)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Error("serve did not exit within 30s of SIGTERM")
		}
	})
	select {
	case u := <-urlc:
		return u, kill
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not report its address within 60s")
		return "", nil
	}
}

// inspector runs the MCP Inspector CLI against target (a URL, or the
// clawconnect mcp command) and decodes its JSON output.
func (f *fixture) inspector(t *testing.T, target []string, args ...string) map[string]any {
	t.Helper()
	c := f.in.MustCommand(t, peers.MCPInspector)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	full := append([]string{"--cli"}, target...)
	if !strings.HasPrefix(target[0], "http") {
		full = append(full, "-e", "CLAWCONNECT_HOME="+f.home, "-e", "CLAWCONNECT_LOG_LEVEL=info")
	}
	cmd := c.Cmd(ctx, append(full, args...)...)
	cmd.Env = append(cmd.Env, "HOME="+t.TempDir()) // the inspector writes ~/.mcp-inspector
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("inspector %v: %v\nstdout: %s\nstderr: %s", args, err, out, stderr.String())
	}
	var doc map[string]any
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("inspector %v: output is not JSON: %v\n%s", args, err, out)
	}
	return doc
}

// toolResult extracts structuredContent of an inspector tools/call result.
func toolResult(t *testing.T, doc map[string]any) map[string]any {
	t.Helper()
	sc, ok := doc["structuredContent"].(map[string]any)
	if !ok {
		t.Fatalf("no structuredContent in %v", doc)
	}
	return sc
}

func toolNames(t *testing.T, doc map[string]any) []string {
	t.Helper()
	list, _ := doc["tools"].([]any)
	var names []string
	for _, x := range list {
		names = append(names, x.(map[string]any)["name"].(string))
	}
	slices.Sort(names)
	return names
}

// inspectorScenario lists tools, runs a task to completion (each call a new
// connection; over stdio a new process, so the task also survives its
// submitter's exit) and cancels a hanging one.
func inspectorScenario(t *testing.T, f *fixture, target []string) {
	if got := toolNames(t, f.inspector(t, target, "--method", "tools/list")); !slices.Equal(got, allTools) {
		t.Fatalf("tools = %v, want %v", got, allTools)
	}
	run := toolResult(t, f.inspector(t, target, "--method", "tools/call", "--tool-name", "run_task", "--tool-arg", "task=ECHO=inspector-ok now"))
	jobID, _ := run["jobId"].(string)
	if jobID == "" || run["status"] != "running" {
		t.Fatalf("run_task = %v", run)
	}
	var snap map[string]any
	for i := 0; i < 10; i++ {
		// Over stdio every call is a new process: the task outlives its
		// submitter and the next process resumes it. waitMs stays under the
		// inspector's 60 s request timeout.
		snap = toolResult(t, f.inspector(t, target, "--method", "tools/call", "--tool-name", "check_task", "--tool-arg", "jobId="+jobID, "waitMs=45000"))
		if snap["isTerminal"] == true {
			break
		}
	}
	if snap["status"] != "completed" || snap["summary"] != "inspector-ok" {
		t.Fatalf("check_task = status %v summary %q", snap["status"], snap["summary"])
	}
	hang := toolResult(t, f.inspector(t, target, "--method", "tools/call", "--tool-name", "run_task", "--tool-arg", "task=HANG until cancelled"))
	hangID := hang["jobId"].(string)
	for i := 0; i < 20; i++ {
		s := toolResult(t, f.inspector(t, target, "--method", "tools/call", "--tool-name", "check_task", "--tool-arg", "jobId="+hangID, "mode=poll", "waitMs=3000"))
		if s["parentRunId"] != nil || s["isTerminal"] == true {
			break
		}
	}
	c := toolResult(t, f.inspector(t, target, "--method", "tools/call", "--tool-name", "cancel_task", "--tool-arg", "taskId="+hangID))
	if c["found"] != true {
		t.Fatalf("cancel_task = %v", c)
	}
	for i := 0; i < 10; i++ {
		snap = toolResult(t, f.inspector(t, target, "--method", "tools/call", "--tool-name", "check_task", "--tool-arg", "jobId="+hangID, "waitMs=45000"))
		if snap["isTerminal"] == true {
			break
		}
	}
	if snap["status"] != "cancelled" {
		t.Fatalf("after cancel_task: status %v (%v)", snap["status"], snap["terminalReason"])
	}
}

func TestInspectorStdio(t *testing.T) {
	t.Parallel() // own home and processes; the shared gateway is never restarted
	f := setup(t)
	inspectorScenario(t, f, []string{f.bin, "mcp"})
}

func TestInspectorHTTP(t *testing.T) {
	t.Parallel() // own home and processes; the shared gateway is never restarted
	f := setup(t)
	inspectorScenario(t, f, []string{f.serve(t)})
}

// stageScript copies testdata/<name> into a fresh directory beside the
// node_modules of the library peer id, and returns the copy's path.
func stageScript(t *testing.T, in *peers.Installer, id peers.ID, name string) string {
	t.Helper()
	dir := t.TempDir()
	script, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), script, 0o600); err != nil {
		t.Fatal(err)
	}
	// ESM resolves packages from node_modules beside the script.
	if err := os.Symlink(in.NodeModules(id), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, name)
}

// tsClient runs testdata/client.mjs with the TypeScript SDK.
func (f *fixture) tsClient(t *testing.T, target ...string) map[string]any {
	t.Helper()
	script := stageScript(t, f.in, peers.MCPSDK, "client.mjs")
	c := f.in.MustCommand(t, peers.MCPSDK)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	cmd := c.Cmd(ctx, append([]string{script}, target...)...)
	cmd.Env = append(f.env(), c.Env...)
	var stderr strings.Builder
	cmd.Stderr = io.MultiWriter(&stderr)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ts client: %v\nstdout: %s\nstderr: %s", err, out, stderr.String())
	}
	var doc map[string]any
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("ts client output is not JSON: %v\n%s\nstderr: %s", err, out, stderr.String())
	}
	return doc
}

func checkTSResult(t *testing.T, doc map[string]any) {
	t.Helper()
	var tools []string
	for _, x := range doc["tools"].([]any) {
		tools = append(tools, x.(string))
	}
	if !slices.Equal(tools, allTools) {
		t.Errorf("tools = %v", tools)
	}
	run := doc["run"].(map[string]any)
	if run["status"] != "completed" || run["summary"] != "e2e-bridge-ok" || run["text"] != "e2e-bridge-ok" {
		t.Errorf("run = %v", run)
	}
	if c := doc["cancel"].(map[string]any); c["isError"] != false {
		t.Errorf("cancel = %v", c)
	}
	if c := doc["cancelled"].(map[string]any); c["status"] != "cancelled" {
		t.Errorf("cancelled task = %v", c)
	}
	if v, _ := doc["toolsetVersion"].(string); len(v) != 12 {
		t.Errorf("toolsetVersion = %q", v)
	}
	t.Logf("ts client: progress notifications during the run: %v", run["progress"])
}

func TestTSClientStdio(t *testing.T) {
	t.Parallel() // own home and processes; the shared gateway is never restarted
	f := setup(t)
	checkTSResult(t, f.tsClient(t, f.bin, "mcp"))
}

func TestTSClientHTTP(t *testing.T) {
	t.Parallel() // own home and processes; the shared gateway is never restarted
	f := setup(t)
	checkTSResult(t, f.tsClient(t, f.serve(t)))
}
