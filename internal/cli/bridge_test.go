package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/testbed/fakegateway"
)

// bridgeEnv is a CLAWCONNECT_HOME with an agents.json pointing at a fake
// gateway.
type bridgeEnv struct {
	home string
	fg   *fakegateway.Server
	vars map[string]string
}

func newBridgeEnv(t *testing.T, script func(fakegateway.Submit) fakegateway.Turn) *bridgeEnv {
	t.Helper()
	fg := fakegateway.New(t, fakegateway.Options{Password: "pw", Script: script})
	home := t.TempDir()
	agents := `{"default":"alpha","agents":[
	  {"id":"alpha","url":"` + fg.URL() + `","password":"pw","emoji":"🦀","role":"generalist"},
	  {"id":"beta","url":"` + fg.URL() + `","password":"pw"}]}`
	if err := os.WriteFile(filepath.Join(home, "agents.json"), []byte(agents), 0o600); err != nil {
		t.Fatal(err)
	}
	return &bridgeEnv{home: home, fg: fg, vars: map[string]string{"CLAWCONNECT_HOME": home}}
}

func (e *bridgeEnv) run(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = Run(t.Context(), Env{Args: args, Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return e.vars[k] }})
	return out.String(), errOut.String(), err
}

func TestRunWaitPrintsResult(t *testing.T) {
	e := newBridgeEnv(t, nil)
	out, errOut, err := e.run(t, "", "run", "say", "hello", "--wait")
	if err != nil {
		t.Fatalf("run --wait: %v\nstderr: %s", err, errOut)
	}
	if !strings.Contains(out, "FAKE-REPLY: ") || !strings.Contains(out, "say hello") {
		t.Errorf("stdout = %q, want the agent's reply", out)
	}
	if !strings.Contains(errOut, "submitted ") {
		t.Errorf("stderr = %q, want progress lines", errOut)
	}
}

func TestRunStdinContextAndJSON(t *testing.T) {
	var got []string
	var mu sync.Mutex
	e := newBridgeEnv(t, func(s fakegateway.Submit) fakegateway.Turn {
		mu.Lock()
		got = append(got, s.Message)
		mu.Unlock()
		return fakegateway.Echo(s)
	})
	out, errOut, err := e.run(t, "the diff body", "run", "review", "--stdin", "--wait", "--json", "--agent", "beta")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errOut)
	}
	var snap struct {
		Status string `json:"status"`
		Agent  string `json:"agent"`
	}
	if err := json.Unmarshal([]byte(out), &snap); err != nil || snap.Status != "completed" || snap.Agent != "beta" {
		t.Fatalf("stdout = %q (%v)", out, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || !strings.Contains(got[0], "the diff body") || !strings.Contains(got[0], "review") {
		t.Errorf("gateway got %q, want the task and the stdin context", got)
	}
}

func TestRunExitCodes(t *testing.T) {
	tests := []struct {
		name   string
		script func(fakegateway.Submit) fakegateway.Turn
		args   []string
		want   int
	}{
		{"no task", nil, []string{"run"}, ExitUsage},
		{"context and stdin", nil, []string{"run", "x", "--context", "c", "--stdin"}, ExitUsage},
		{"unknown agent", nil, []string{"run", "x", "--agent", "zeta"}, ExitUsage},
		{"task fails", func(fakegateway.Submit) fakegateway.Turn { return fakegateway.Turn{Error: "model exploded"} }, []string{"run", "x", "--wait"}, ExitFailure},
		{"timeout while running", func(fakegateway.Submit) fakegateway.Turn { return fakegateway.Turn{Reply: "later", Hold: true} }, []string{"run", "x", "--wait", "--timeout", "1500ms"}, ExitPending},
		{"submitted", nil, []string{"run", "x"}, ExitOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newBridgeEnv(t, tt.script)
			_, errOut, err := e.run(t, "", tt.args...)
			if got := ExitCode(err); got != tt.want {
				t.Errorf("exit code = %d, want %d (err %v)\nstderr: %s", got, tt.want, err, errOut)
			}
		})
	}
}

func TestNoConfigExit3(t *testing.T) {
	for _, cmd := range [][]string{{"agents"}, {"run", "x"}, {"status", "j"}, {"sessions"}} {
		t.Run(cmd[0], func(t *testing.T) {
			e := &bridgeEnv{vars: map[string]string{"CLAWCONNECT_HOME": t.TempDir()}}
			_, _, err := e.run(t, "", cmd...)
			if ExitCode(err) != ExitConfig || !strings.Contains(err.Error(), "OPENCLAW_URL + OPENCLAW_PASSWORD") {
				t.Errorf("%v: exit %d err %v", cmd, ExitCode(err), err)
			}
		})
	}
}

func TestStatusLogsSessions(t *testing.T) {
	e := newBridgeEnv(t, func(s fakegateway.Submit) fakegateway.Turn {
		return fakegateway.Turn{Reply: "all done", Chunks: 2}
	})
	out, errOut, err := e.run(t, "", "run", "do", "it", "--wait", "--json")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errOut)
	}
	var snap struct {
		JobID      string `json:"jobId"`
		SessionKey string `json:"sessionKey"`
	}
	if err := json.Unmarshal([]byte(out), &snap); err != nil || snap.JobID == "" {
		t.Fatalf("run --json = %q", out)
	}
	out, _, err = e.run(t, "", "status", snap.JobID)
	if err != nil || !strings.Contains(out, "completed") || !strings.Contains(out, "all done") || !strings.Contains(out, snap.SessionKey) {
		t.Errorf("status = %q, %v", out, err)
	}
	if !strings.Contains(out, "\nended ") {
		t.Errorf("status of a finished task shows no ended time: %q", out)
	}
	out, _, err = e.run(t, "", "status", snap.JobID, "--json")
	if err != nil || !json.Valid([]byte(out)) {
		t.Errorf("status --json = %q, %v", out, err)
	}
	out, _, err = e.run(t, "", "logs", snap.JobID)
	if err != nil || strings.Count(out, "\n") < 1 {
		t.Errorf("logs = %q, %v", out, err)
	}
	out, _, err = e.run(t, "", "sessions")
	if err != nil || !strings.Contains(out, snap.SessionKey) || !strings.Contains(out, "SESSION") {
		t.Errorf("sessions = %q, %v", out, err)
	}
	_, _, err = e.run(t, "", "status", "no-such-job")
	if ExitCode(err) != ExitNotFound {
		t.Errorf("status unknown: exit %d (%v)", ExitCode(err), err)
	}
	_, _, err = e.run(t, "", "logs", "no-such-job")
	if ExitCode(err) != ExitNotFound {
		t.Errorf("logs unknown: exit %d (%v)", ExitCode(err), err)
	}
	_, _, err = e.run(t, "", "status")
	if ExitCode(err) != ExitUsage {
		t.Errorf("status without job: exit %d", ExitCode(err))
	}
}

func TestLogsFollow(t *testing.T) {
	e := newBridgeEnv(t, func(s fakegateway.Submit) fakegateway.Turn {
		return fakegateway.Turn{Reply: "followed to the end", Hold: true}
	})
	out, _, err := e.run(t, "", "run", "long", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		JobID string `json:"jobId"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	// run returns only once the gateway acknowledged the run.
	if err := e.fg.AwaitRun(ctx, res.JobID); err != nil {
		t.Fatal(err)
	}
	// run released the task when it exited; a serve process follows it on
	// and writes its end to the store, which wakes the follower. (Without
	// one, logs --follow would wait until its context ended.)
	env := Env{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(k string) string { return e.vars[k] }}
	owner, err := openServerBridge(ctx, env, newLogger(env))
	if err != nil {
		t.Fatal(err)
	}
	defer owner.close()
	done := make(chan error, 1)
	var logOut bytes.Buffer
	go func() {
		done <- Run(ctx, Env{Args: []string{"logs", res.JobID, "--follow"}, Stdout: &logOut, Stderr: io.Discard, Getenv: env.Getenv})
	}()
	e.fg.Release(res.JobID)
	if err := <-done; err != nil {
		t.Fatalf("logs --follow: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatal("logs --follow returned only when its context ended, not when the task did")
	}
	if !strings.Contains(logOut.String(), "Agent lifecycle: start") {
		t.Errorf("logs --follow did not print the task's log:\n%s", logOut.String())
	}
	if out, _, err := e.run(t, "", "status", res.JobID); err != nil || !strings.Contains(out, "completed") || !strings.Contains(out, "followed to the end") {
		t.Errorf("status after logs --follow returned = %q, %v", out, err)
	}
}

// TestCommandsShareTheStore: while another process (here a serve bridge)
// has the SQLite store open and follows a task, status, logs --follow and
// sessions read the same store and see what it writes, and run submits
// beside it.
func TestCommandsShareTheStore(t *testing.T) {
	e := newBridgeEnv(t, func(s fakegateway.Submit) fakegateway.Turn {
		return fakegateway.Turn{Reply: "finished by the owner", Hold: true}
	})
	out, _, err := e.run(t, "", "run", "long", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		JobID      string `json:"jobId"`
		SessionKey string `json:"sessionKey"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	env := Env{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(k string) string { return e.vars[k] }}
	owner, err := openServerBridge(ctx, env, newLogger(env))
	if err != nil {
		t.Fatal(err)
	}
	defer owner.close()

	out, errOut, err := e.run(t, "", "status", res.JobID)
	if err != nil || !strings.Contains(out, "running") {
		t.Fatalf("status beside the owner = %q, %v\n%s", out, err, errOut)
	}
	out, _, err = e.run(t, "", "sessions")
	if err != nil || !strings.Contains(out, res.SessionKey) {
		t.Fatalf("sessions beside the owner = %q, %v", out, err)
	}
	// doctor lists the serve process and the task it follows (the run
	// command released it on exit; serve took it over at its start).
	out, _, _ = e.run(t, "", "doctor", "--timeout", "5s")
	if want := fmt.Sprintf("serve pid %d", os.Getpid()); !strings.Contains(out, want) || !strings.Contains(out, "follows 1 running task(s): "+res.JobID) {
		t.Fatalf("doctor does not list serve (%q) following %s:\n%s", want, res.JobID, out)
	}
	if out, errOut, err := e.run(t, "", "run", "another", "--json"); err != nil || !strings.Contains(out, `"jobId"`) {
		t.Fatalf("run beside serve = %q, %v (%s)", out, err, errOut)
	}

	done := make(chan error, 1)
	var logOut bytes.Buffer
	go func() {
		done <- Run(ctx, Env{Args: []string{"logs", res.JobID, "--follow"}, Stdout: &logOut, Stderr: io.Discard, Getenv: env.Getenv})
	}()
	e.fg.Release(res.JobID)
	if err := <-done; err != nil {
		t.Fatalf("logs --follow beside the owner: %v", err)
	}
	out, _, err = e.run(t, "", "status", res.JobID)
	if err != nil || !strings.Contains(out, "completed") || !strings.Contains(out, "finished by the owner") {
		t.Fatalf("status after the owner finished = %q, %v", out, err)
	}
}

func TestAgentsCommand(t *testing.T) {
	e := newBridgeEnv(t, nil)
	out, _, err := e.run(t, "", "agents")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "*") || !strings.Contains(out, "🦀 alpha") || !strings.Contains(out, "beta") || strings.Contains(out, "pw") {
		t.Errorf("agents = %q", out)
	}
	out, _, err = e.run(t, "", "agents", "--json")
	var doc struct {
		Default string `json:"default"`
		Agents  []struct {
			ID string `json:"id"`
		} `json:"agents"`
	}
	if err != nil || json.Unmarshal([]byte(out), &doc) != nil || doc.Default != "alpha" || len(doc.Agents) != 2 {
		t.Errorf("agents --json = %q, %v", out, err)
	}
}

func TestDoctor(t *testing.T) {
	t.Run("healthy", func(t *testing.T) {
		e := newBridgeEnv(t, nil)
		out, _, err := e.run(t, "", "doctor", "--timeout", "10s")
		if err != nil {
			t.Fatalf("doctor: %v\n%s", err, out)
		}
		for _, want := range []string{"[ok]   config", "[ok]   store", "[ok]   gateway alpha", "[ok]   gateway beta", "[ok]   runtimes", "[ok]   http auth"} {
			if !strings.Contains(out, want) {
				t.Errorf("doctor output lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("openclaw plugin", func(t *testing.T) {
		e := newBridgeEnv(t, nil)
		out, _, _ := e.run(t, "", "doctor", "--timeout", "10s")
		if !strings.Contains(out, "the ClawConnect plugin is not loaded (no clawconnect.callback)") {
			t.Errorf("doctor does not say the plugin is missing:\n%s", out)
		}
		e.fg.Handle("clawconnect.callback", func(context.Context, json.RawMessage) (any, error) { return map[string]any{"ok": true}, nil })
		out, _, _ = e.run(t, "", "doctor", "--timeout", "10s")
		if !strings.Contains(out, "the ClawConnect plugin is loaded (clawconnect.callback)") {
			t.Errorf("doctor does not see the loaded plugin:\n%s", out)
		}
	})
	t.Run("runtime module", func(t *testing.T) {
		e := newBridgeEnv(t, nil)
		mod, err := filepath.Abs("testdata/rtmodule.sh")
		if err != nil {
			t.Fatal(err)
		}
		e.vars[runtimeModulesVar] = mod
		out, _, err := e.run(t, "", "doctor", "--timeout", "10s")
		if err != nil || !strings.Contains(out, "registered: cli-rt") {
			t.Errorf("doctor = %v\n%s", err, out)
		}
		e.vars[runtimeModulesVar] = filepath.Join(t.TempDir(), "missing-module")
		out, _, err = e.run(t, "", "doctor", "--timeout", "10s")
		if ExitCode(err) != ExitFailure || !strings.Contains(out, "[FAIL] runtimes") {
			t.Errorf("doctor with a missing module = exit %d\n%s", ExitCode(err), out)
		}
	})
	t.Run("wrong password", func(t *testing.T) {
		e := newBridgeEnv(t, nil)
		agents := `{"agents":[{"id":"alpha","url":"` + e.fg.URL() + `","password":"wrong"}]}`
		if err := os.WriteFile(filepath.Join(e.home, "agents.json"), []byte(agents), 0o600); err != nil {
			t.Fatal(err)
		}
		out, _, err := e.run(t, "", "doctor", "--timeout", "10s")
		if ExitCode(err) != ExitFailure || !strings.Contains(out, "[FAIL] gateway alpha") || !strings.Contains(out, "fix: ") {
			t.Errorf("doctor = exit %d\n%s", ExitCode(err), out)
		}
	})
	t.Run("unreachable gateway", func(t *testing.T) {
		e := &bridgeEnv{vars: map[string]string{"CLAWCONNECT_HOME": t.TempDir(), "OPENCLAW_URL": "ws://127.0.0.1:1", "OPENCLAW_PASSWORD": "x"}}
		out, _, err := e.run(t, "", "doctor", "--timeout", "5s")
		if ExitCode(err) != ExitFailure || !strings.Contains(out, "openclaw gateway run") {
			t.Errorf("doctor = exit %d\n%s", ExitCode(err), out)
		}
	})
	t.Run("no config", func(t *testing.T) {
		e := &bridgeEnv{vars: map[string]string{"CLAWCONNECT_HOME": t.TempDir()}}
		out, _, err := e.run(t, "", "doctor")
		if ExitCode(err) != ExitFailure || !strings.Contains(out, "[FAIL] config") || !strings.Contains(out, configHint) {
			t.Errorf("doctor = exit %d\n%s", ExitCode(err), out)
		}
	})
}

func TestMCPStdio(t *testing.T) {
	e := newBridgeEnv(t, nil)
	mod, err := filepath.Abs("testdata/rtmodule.sh")
	if err != nil {
		t.Fatal(err)
	}
	e.vars[runtimeModulesVar] = mod
	in := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}
{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}
`
	// A pipe keeps stdin open until the answers are read, then closes it.
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	var errOut bytes.Buffer
	go func() {
		done <- Run(t.Context(), Env{Args: []string{"mcp"}, Stdin: inR, Stdout: outW, Stderr: &errOut, Getenv: func(k string) string { return e.vars[k] }})
		_ = outW.Close()
	}()
	go func() { _, _ = io.WriteString(inW, in) }()
	sc := bufio.NewScanner(outR)
	sc.Buffer(nil, 1<<24)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if strings.Contains(sc.Text(), `"id":2`) {
			break
		}
	}
	_ = inW.Close()
	go func() { _, _ = io.Copy(io.Discard, outR) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("mcp: %v\nstderr: %s", err, errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("mcp did not exit within 30s of stdin closing")
	}
	if len(lines) != 2 {
		t.Fatalf("stdout lines = %d, want 2: %q", len(lines), lines)
	}
	for _, l := range lines {
		if !json.Valid([]byte(l)) {
			t.Errorf("stdout carries a non-JSON line: %q", l)
		}
	}
	if !strings.Contains(lines[1], `"run_task"`) {
		t.Errorf("tools/list = %.200s", lines[1])
	}
	if !strings.Contains(errOut.String(), "loaded 2 agent(s)") || !strings.Contains(errOut.String(), "agent-session runtimes: cli-rt") {
		t.Errorf("stderr = %q", errOut.String())
	}
}

// signalWriter forwards writes and reports the first one containing want.
type signalWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	want  string
	seen  chan string // buffered, receives once
	fired bool
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.fired && strings.Contains(w.buf.String(), w.want) {
		w.fired = true
		w.seen <- w.buf.String()
	}
	return len(p), nil
}

func TestServeGracefulShutdown(t *testing.T) {
	e := newBridgeEnv(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	w := &signalWriter{want: "listening on http://", seen: make(chan string, 1)}
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Env{Args: []string{"serve", "--addr", "127.0.0.1:0"}, Stdout: io.Discard, Stderr: w, Getenv: func(k string) string { return e.vars[k] }})
	}()
	var line string
	select {
	case line = <-w.seen:
	case err := <-done:
		t.Fatalf("serve exited early: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not start listening within 30s")
	}
	if !strings.HasSuffix(strings.TrimSpace(line), "/mcp (open: no credentials configured)") {
		t.Errorf("listen line = %q", line)
	}
	i := strings.Index(line, "http://")
	addr := strings.Fields(line[i+len("http://"):])[0]
	resp, err := httpGet("http://" + strings.TrimSuffix(addr, "/mcp") + "/health")
	if err != nil || resp != `{"ok":true}` {
		t.Errorf("/health = %q, %v", resp, err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop within 30s")
	}
}

func TestServeRefusesOpenRemote(t *testing.T) {
	e := newBridgeEnv(t, nil)
	_, _, err := e.run(t, "", "serve", "--addr", "0.0.0.0:0")
	if ExitCode(err) != ExitUsage || !strings.Contains(err.Error(), "beyond loopback") || !strings.Contains(err.Error(), "--allow-unauthenticated-remote") {
		t.Errorf("serve 0.0.0.0 = %v (exit %d), want exit %d naming --allow-unauthenticated-remote", err, ExitCode(err), ExitUsage)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	_, _, err = e.run(t, "", "serve", "--addr", busy.Addr().String())
	if err == nil || !strings.Contains(err.Error(), "already in use") || !strings.Contains(err.Error(), "--addr") {
		t.Errorf("serve on a busy port = %v, want 'already in use' and a --addr suggestion", err)
	}
	_, _, err = e.run(t, "", "serve", "--addr", "nonsense")
	if ExitCode(err) != ExitUsage {
		t.Errorf("serve --addr nonsense: exit %d", ExitCode(err))
	}
}

// TestServeRefusesShortToken is issue 24 item 9 at startup: serve does
// not start on a token shorter than the minimum, and says which entry it
// is without printing the token; doctor says the same.
func TestServeRefusesShortToken(t *testing.T) {
	t.Parallel()
	env := map[string]string{"CLAWCONNECT_HOME": t.TempDir(), "MCP_USER_TOKENS": "ok:long-enough-token-0001,ana:shorttok"}
	_, _, err := runCLIEnv(t, env, "serve", "--addr", "127.0.0.1:0")
	if ExitCode(err) != ExitConfig || !strings.Contains(err.Error(), `MCP_USER_TOKENS entry "ana"`) || strings.Contains(err.Error(), "shorttok") {
		t.Errorf("serve with a short token = %v (exit %d), want exit %d naming the entry and not the token", err, ExitCode(err), ExitConfig)
	}
	out, _, _ := runCLIEnv(t, env, "doctor")
	if !strings.Contains(out, `MCP_USER_TOKENS entry "ana"`) || strings.Contains(out, "shorttok") {
		t.Errorf("doctor with a short token:\n%s", out)
	}
}

func httpGet(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// deadGatewayEnv is a CLAWCONNECT_HOME whose only agent points at a port
// nothing listens on.
func deadGatewayEnv(t *testing.T) *bridgeEnv {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	home := t.TempDir()
	agents := `{"agents":[{"id":"alpha","url":"ws://` + addr + `","password":"pw"}]}`
	if err := os.WriteFile(filepath.Join(home, "agents.json"), []byte(agents), 0o600); err != nil {
		t.Fatal(err)
	}
	return &bridgeEnv{home: home, vars: map[string]string{"CLAWCONNECT_HOME": home}}
}

// TestRunRefusedSubmitFailsAndKeepsTheReason: run without --wait against a
// dead gateway exits 1 instead of saying "Submitted", and the reason is
// stored: status, status --json and logs show it later.
func TestRunRefusedSubmitFailsAndKeepsTheReason(t *testing.T) {
	e := deadGatewayEnv(t)
	out, errOut, err := e.run(t, "", "run", "x")
	if got := ExitCode(err); got != ExitFailure || !strings.Contains(err.Error(), "did not accept") {
		t.Fatalf("run: exit %d (%v), want %d and 'did not accept'\nstderr: %s", got, err, ExitFailure, errOut)
	}
	if strings.Contains(errOut, "Submitted") {
		t.Errorf("stderr says Submitted for a refused task:\n%s", errOut)
	}
	job := strings.TrimPrefix(strings.SplitN(out, "\n", 2)[0], "job ")
	if job == "" {
		t.Fatalf("stdout lacks the job id: %q", out)
	}
	reason := err.Error()[strings.Index(err.Error(), ": ")+2:]

	out, _, err = e.run(t, "", "status", job)
	if err != nil || !strings.Contains(out, "error      "+reason) {
		t.Errorf("status = %q (%v), want an error row with %q", out, err, reason)
	}
	out, _, err = e.run(t, "", "status", job, "--json")
	var d struct {
		Status, Error string
	}
	if err != nil || json.Unmarshal([]byte(out), &d) != nil || d.Status != "error" || d.Error != reason {
		t.Errorf("status --json = %q (%v), want status error and error %q", out, err, reason)
	}
	out, _, err = e.run(t, "", "logs", job)
	if err != nil || !strings.Contains(out, "error (error): "+reason) {
		t.Errorf("logs = %q (%v), want the reason as the last entry", out, err)
	}
}

// TestRunWaitPrintsAFailureOnce: the failure goes to stderr (as the
// returned error, printed by main), not to stdout as well.
func TestRunWaitPrintsAFailureOnce(t *testing.T) {
	e := newBridgeEnv(t, func(fakegateway.Submit) fakegateway.Turn { return fakegateway.Turn{Error: "model exploded"} })
	out, errOut, err := e.run(t, "", "run", "x", "--wait")
	if ExitCode(err) != ExitFailure || !strings.Contains(err.Error(), "model exploded") {
		t.Fatalf("run --wait: %v", err)
	}
	if n := strings.Count(out+errOut, "model exploded"); n != 0 {
		t.Errorf("the failure is printed besides the returned error (%d times):\nstdout %q\nstderr %q", n, out, errOut)
	}
}

// TestConfigErrorsSayWhatAndWhere: a broken agents.json names the file,
// line and column, and the field, and does not advise creating the file
// that exists; OPENCLAW_URL without a password names the missing variable.
func TestConfigErrorsSayWhatAndWhere(t *testing.T) {
	home := t.TempDir()
	path := filepath.Join(home, "agents.json")
	if err := os.WriteFile(path, []byte("{\"agents\": [\n  {\"id\": \"a\", \"url\": \"ws://127.0.0.1:1\", \"pasword\": \"p\"}\n]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &bridgeEnv{vars: map[string]string{"CLAWCONNECT_HOME": home}}
	_, _, err := e.run(t, "", "run", "x")
	if ExitCode(err) != ExitConfig {
		t.Fatalf("run with a broken agents.json: exit %d (%v), want %d", ExitCode(err), err, ExitConfig)
	}
	for _, want := range []string{path + ":2:", `missing "password"`, `did you mean "password"?`, "Fix " + path} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "Create ~/.clawconnect/agents.json") {
		t.Errorf("error advises creating the file that exists:\n%v", err)
	}
	out, _, _ := e.run(t, "", "doctor")
	if !strings.Contains(out, path+":2:") || !strings.Contains(out, "fix: Fix "+path) {
		t.Errorf("doctor:\n%s", out)
	}

	e = &bridgeEnv{vars: map[string]string{"CLAWCONNECT_HOME": t.TempDir(), "OPENCLAW_URL": "ws://127.0.0.1:1"}}
	_, _, err = e.run(t, "", "run", "x")
	if ExitCode(err) != ExitConfig || !strings.Contains(err.Error(), "OPENCLAW_URL is set but OPENCLAW_PASSWORD is empty") {
		t.Errorf("OPENCLAW_URL without a password: exit %d, %v", ExitCode(err), err)
	}
	out, _, _ = e.run(t, "", "doctor")
	if strings.Contains(out, "are unset") || !strings.Contains(out, "OPENCLAW_PASSWORD is empty") {
		t.Errorf("doctor with OPENCLAW_URL only:\n%s", out)
	}
}
