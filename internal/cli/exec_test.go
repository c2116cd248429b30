package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/executor"
	"github.com/clawconnect/clawconnect/internal/testbed/fakegateway"
)

// fakeCLI writes an executable shell script standing in for a runtime CLI.
func fakeCLI(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fake-cli")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

const (
	ccInit    = `{"type":"system","subtype":"init","session_id":"sess-1","model":"fake-model"}`
	ccText    = `{"type":"assistant","message":{"content":[{"type":"text","text":"FAKE-REPLY: hi"}]},"session_id":"sess-1"}`
	ccSuccess = `{"type":"result","subtype":"success","is_error":false,"result":"FAKE-REPLY: hi","session_id":"sess-1","total_cost_usd":0.001,"usage":{"input_tokens":3,"output_tokens":4}}`
)

func lines(ls ...string) string {
	var b strings.Builder
	for _, l := range ls {
		b.WriteString("printf '%s\\n' '" + l + "'\n")
	}
	return b.String()
}

func getenvMap(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func runExecCmd(ctx context.Context, t *testing.T, envm map[string]string, stdout io.Writer, args ...string) (string, error) {
	t.Helper()
	var stderr bytes.Buffer
	if stdout == nil {
		stdout = io.Discard
	}
	err := Run(ctx, Env{Args: append([]string{"exec"}, args...), Stdin: strings.NewReader(""), Stdout: stdout, Stderr: &stderr, Getenv: getenvMap(envm)})
	return stderr.String(), err
}

func baseEnv(bin string) map[string]string {
	return map[string]string{"PATH": "/usr/bin:/bin", "CLAWCONNECT_CLAUDE_BIN": bin, "CLAWCONNECT_CODEX_BIN": bin}
}

func TestExecJSONLines(t *testing.T) {
	bin := fakeCLI(t, "cat >/dev/null\n"+lines(ccInit, ccText, ccSuccess))
	var out bytes.Buffer
	stderr, err := runExecCmd(t.Context(), t, baseEnv(bin), &out, "--runtime", "claude-code", "--json", "say", "hi")
	if err != nil {
		t.Fatalf("exec: %v (stderr %s)", err, stderr)
	}
	var kinds []executor.Kind
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var raw map[string]any
		if err := json.Unmarshal(sc.Bytes(), &raw); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		for _, f := range []string{"kind", "runId", "sessionId", "ts", "seq"} {
			if _, ok := raw[f]; !ok {
				t.Errorf("line %s lacks %q", sc.Text(), f)
			}
		}
		var ev executor.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, ev.Kind())
		if ev.Kind() == executor.KindTextDelta && raw["text"] != "FAKE-REPLY: hi" {
			t.Errorf("text-delta line %s", sc.Text())
		}
		if ev.RunID != "sess-1" {
			t.Errorf("runId = %q, want the claude session id", ev.RunID)
		}
	}
	want := []executor.Kind{executor.KindStatus, executor.KindTextDelta, executor.KindCost, executor.KindDone}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("kinds (-want +got):\n%s", diff)
	}
}

func TestExecHumanOutputAndExitCodes(t *testing.T) {
	tests := []struct {
		name     string
		script   string
		runtime  string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{"success", lines(ccInit, ccText, ccSuccess), "claude-code", ExitOK, "FAKE-REPLY: hi\n", "done: success"},
		{"reasoning deltas shown as one line", lines(ccInit,
			`{"type":"stream_event","event":{"type":"content_block_delta","delta":{"type":"thinking_delta","thinking":"let me "}}}`,
			`{"type":"stream_event","event":{"type":"content_block_delta","delta":{"type":"thinking_delta","thinking":"think"}}}`,
			`{"type":"stream_event","event":{"type":"content_block_delta","delta":{"type":"text_delta","text":"answer"}}}`,
			ccSuccess), "claude-code", ExitOK, "answer\n", "· thinking: let me think\n· cost"},
		{"max turns", lines(ccInit, `{"type":"result","subtype":"error_max_turns","is_error":true}`), "claude-code", ExitMaxTurns, "", "done: max_turns"},
		{"error result", lines(ccInit, `{"type":"result","subtype":"error_during_execution","is_error":true,"errors":["model overloaded"]}`) + "exit 1\n", "claude-code", ExitFailure, "", "error: model overloaded"},
		{"crash", "echo 'no provider configured' >&2\nexit 2\n", "codex", ExitFailure, "", "error: no provider configured"},
		{"codex tool call", lines(`{"type":"thread.started","thread_id":"th-1"}`,
			`{"type":"item.completed","item":{"id":"i1","type":"command_execution","command":"ls","aggregated_output":"a.txt","exit_code":0,"status":"completed"}}`,
			`{"type":"item.completed","item":{"id":"i2","type":"agent_message","text":"listed"}}`,
			`{"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":2}}`), "codex", ExitOK, "listed\n", "tool command_execution ok: a.txt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin := fakeCLI(t, "cat >/dev/null\n"+tt.script)
			var out bytes.Buffer
			stderr, err := runExecCmd(t.Context(), t, baseEnv(bin), &out, "--runtime", tt.runtime, "hello")
			if got := ExitCode(err); got != tt.wantCode {
				t.Fatalf("exit code %d (%v), want %d; stderr:\n%s", got, err, tt.wantCode, stderr)
			}
			if out.String() != tt.wantOut {
				t.Errorf("stdout = %q, want %q", out.String(), tt.wantOut)
			}
			if !strings.Contains(stderr, tt.wantErr) {
				t.Errorf("stderr lacks %q:\n%s", tt.wantErr, stderr)
			}
		})
	}
}

// execReadyWriter closes ready on the first write.
type execReadyWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	once  sync.Once
	ready chan struct{}
}

func (w *execReadyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.once.Do(func() { close(w.ready) })
	return w.buf.Write(p)
}

func (w *execReadyWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func TestExecCtrlCAborts(t *testing.T) {
	bin := fakeCLI(t, "cat >/dev/null\n"+lines(ccInit)+"sleep 60\n")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out := &execReadyWriter{ready: make(chan struct{})}
	go func() {
		select {
		case <-out.ready: // the run is live: its first event was printed
		case <-time.After(30 * time.Second):
		}
		cancel() // what Ctrl-C does through main's signal context
	}()
	stderr, err := runExecCmd(ctx, t, baseEnv(bin), out, "--runtime", "claude-code", "--json", "wait")
	if got := ExitCode(err); got != ExitAborted {
		t.Fatalf("exit code %d (%v), want %d; stderr:\n%s", got, err, ExitAborted, stderr)
	}
	last := strings.TrimSpace(out.String())
	last = last[strings.LastIndexByte(last, '\n')+1:]
	var ev executor.Event
	if err := json.Unmarshal([]byte(last), &ev); err != nil {
		t.Fatal(err)
	}
	if d, ok := ev.Payload.(executor.Done); !ok || d.Reason != executor.DoneAborted {
		t.Errorf("last event %s, want done: aborted", last)
	}
}

// runExecEnviron is runExecCmd with the whole environment given as
// Env.Environ, as main does.
func runExecEnviron(ctx context.Context, t *testing.T, environ []string, stdout io.Writer, args ...string) (string, error) {
	t.Helper()
	var stderr bytes.Buffer
	if stdout == nil {
		stdout = io.Discard
	}
	vars := map[string]string{}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	err := Run(ctx, Env{Args: append([]string{"exec"}, args...), Stdin: strings.NewReader(""), Stdout: stdout, Stderr: &stderr,
		Getenv: getenvMap(vars), Environ: func() []string { return environ }})
	return stderr.String(), err
}

// TestExecEnvironmentIsScrubbed: a CLI runtime gets the user's environment
// minus ClawConnect's own secrets (the executor's rule); an embedder that
// gives only Getenv gets the known names plus CLAWCONNECT_EXEC_PASSENV.
func TestExecEnvironmentIsScrubbed(t *testing.T) {
	tests := []struct {
		name        string
		environ     bool
		gone, kept  []string
		extraPassed string
	}{
		{"whole environment", true,
			[]string{"secret-pw", "secret-tok", "secret-mcp", "secret-cc"},
			[]string{"ANTHROPIC_API_KEY=dummy", "MY_PROVIDER_KEY=granted", "UNLISTED=x", "PATH=/usr/bin:/bin"}, ""},
		{"getenv only", false,
			[]string{"secret-pw", "secret-tok", "secret-mcp", "secret-cc", "UNLISTED="},
			[]string{"ANTHROPIC_API_KEY=dummy", "MY_PROVIDER_KEY=granted", "PATH=/usr/bin:/bin"}, "MY_PROVIDER_KEY, OPENCLAW_PASSWORD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dump := filepath.Join(t.TempDir(), "env")
			bin := fakeCLI(t, "cat >/dev/null\nenv > "+dump+"\n"+lines(ccInit, ccSuccess))
			envm := baseEnv(bin)
			envm["OPENCLAW_PASSWORD"] = "secret-pw"
			envm["OPENCLAW_GATEWAY_TOKEN"] = "secret-tok"
			envm["MCP_USER_TOKENS"] = "ana:secret-mcp"
			envm["CLAWCONNECT_GATEWAY_HEADERS"] = `{"X-Auth":"secret-cc"}`
			envm["ANTHROPIC_API_KEY"] = "dummy"
			envm["MY_PROVIDER_KEY"] = "granted"
			envm["UNLISTED"] = "x"
			var err error
			var stderr string
			if tt.environ {
				var environ []string
				for k, v := range envm {
					environ = append(environ, k+"="+v)
				}
				stderr, err = runExecEnviron(t.Context(), t, environ, nil, "--runtime", "claude-code", "hi")
			} else {
				envm["CLAWCONNECT_EXEC_PASSENV"] = tt.extraPassed
				stderr, err = runExecCmd(t.Context(), t, envm, nil, "--runtime", "claude-code", "hi")
			}
			if err != nil {
				t.Fatalf("exec: %v\n%s", err, stderr)
			}
			b, err := os.ReadFile(dump)
			if err != nil {
				t.Fatal(err)
			}
			got := string(b)
			for _, gone := range tt.gone {
				if strings.Contains(got, gone) {
					t.Errorf("child environment has %s", gone)
				}
			}
			for _, kept := range tt.kept {
				if !strings.Contains(got, kept) {
					t.Errorf("child environment lacks %s", kept)
				}
			}
		})
	}
}

// TestExecCodexCustomProviderKey: a Codex provider that reads its key from
// a variable of the user's choosing (env_key = "MY_KEY") gets it, without
// CLAWCONNECT_EXEC_PASSENV. The fake codex fails as the real one does when
// the variable is missing.
func TestExecCodexCustomProviderKey(t *testing.T) {
	bin := fakeCLI(t, `cat >/dev/null
if [ -z "$MY_KEY" ]; then echo 'Missing environment variable: MY_KEY' >&2; exit 1; fi
`+lines(`{"type":"thread.started","thread_id":"th-1"}`,
		`{"type":"item.completed","item":{"id":"i1","type":"agent_message","text":"key seen"}}`,
		`{"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":2}}`))
	environ := []string{"PATH=/usr/bin:/bin", "CLAWCONNECT_CODEX_BIN=" + bin, "MY_KEY=sk-custom"}
	var out bytes.Buffer
	stderr, err := runExecEnviron(t.Context(), t, environ, &out, "--runtime", "codex", "hi")
	if err != nil {
		t.Fatalf("exec: %v\nstderr:\n%s", err, stderr)
	}
	if out.String() != "key seen\n" {
		t.Errorf("stdout = %q", out.String())
	}
}

// TestExecStatusDoesNotSplitAReply: on a terminal showing both streams, a
// status line that arrives mid-reply waits for the reply's line to end.
func TestExecStatusDoesNotSplitAReply(t *testing.T) {
	t.Parallel()
	var both bytes.Buffer // a terminal: stdout and stderr interleaved
	p := newExecPrinter(Env{Stdout: &both, Stderr: &both}, false)
	for _, pl := range []executor.Payload{
		executor.TextDelta{Text: "e"},
		executor.Status{Phase: executor.PhaseTurnComplete},
		executor.TextDelta{Text: "xec-ok"},
		executor.Done{Reason: executor.DoneSuccess},
	} {
		if err := p.event(executor.Event{RunID: "r1", Payload: pl}); err != nil {
			t.Fatal(err)
		}
	}
	p.flush()
	want := "exec-ok\n· status turn-complete\n· done: success (run r1)\n"
	if diff := cmp.Diff(want, both.String()); diff != "" {
		t.Errorf("terminal output (-want +got):\n%s", diff)
	}
}

func TestExecUsageAndHealth(t *testing.T) {
	tests := []struct {
		name     string
		envm     map[string]string
		args     []string
		wantCode int
		wantMsg  string
	}{
		{"no runtime", nil, []string{"hi"}, ExitUsage, "--runtime is required"},
		{"unknown runtime", nil, []string{"--runtime", "hermes", "hi"}, ExitUsage, `unknown runtime "hermes"`},
		{"no prompt", nil, []string{"--runtime", "codex"}, ExitUsage, "exec needs a PROMPT"},
		{"missing binary", map[string]string{"PATH": t.TempDir()}, []string{"--runtime", "claude-code", "hi"}, ExitFailure, "claude-code is not available: claude not found on PATH"},
		{"missing binary names its variable", map[string]string{"PATH": t.TempDir()}, []string{"--runtime", "claude-code", "hi"}, ExitFailure, "CLAWCONNECT_CLAUDE_BIN"},
		{"missing codex names its variable", map[string]string{"PATH": t.TempDir()}, []string{"--runtime", "codex", "hi"}, ExitFailure, "CLAWCONNECT_CODEX_BIN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := runExecCmd(t.Context(), t, tt.envm, nil, tt.args...)
			if got := ExitCode(err); got != tt.wantCode || err == nil || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("exec = %v (code %d), want code %d with %q", err, got, tt.wantCode, tt.wantMsg)
			}
		})
	}
}

func TestExecOpenClawFakeGateway(t *testing.T) {
	gw := fakegateway.New(t, fakegateway.Options{Token: fakegateway.Token})
	var out bytes.Buffer
	stderr, err := runExecCmd(t.Context(), t, map[string]string{"OPENCLAW_URL": gw.URL(), "OPENCLAW_GATEWAY_TOKEN": fakegateway.Token},
		&out, "--runtime", "openclaw", "--session", "agent:main:exec-test", "hello", "gateway")
	if err != nil {
		t.Fatalf("exec: %v\n%s", err, stderr)
	}
	if out.String() != "FAKE-REPLY: hello gateway\n" {
		t.Errorf("stdout = %q", out.String())
	}
	if !strings.Contains(stderr, "done: success") {
		t.Errorf("stderr lacks the done line:\n%s", stderr)
	}
	if n := gw.CountRequests("chat.send"); n != 1 {
		t.Errorf("chat.send sent %d times", n)
	}
	_, err = runExecCmd(t.Context(), t, map[string]string{"OPENCLAW_URL": gw.URL(), "OPENCLAW_GATEWAY_TOKEN": "wrong"}, nil, "--runtime", "openclaw", "hi")
	if ExitCode(err) != ExitFailure || !strings.Contains(err.Error(), "connect to the gateway") {
		t.Errorf("wrong token: %v", err)
	}
}
