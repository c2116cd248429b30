package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clawconnect/clawconnect/agentsession"
	"github.com/clawconnect/clawconnect/agentsession/module"
	"github.com/clawconnect/clawconnect/internal/cli"
	"github.com/clawconnect/clawconnect/internal/testbed/fakegateway"
)

// This file proves issue 6's "Must show" through the real binary: the
// clawconnect mcp process, driven by an MCP client over stdio, with the
// example module examples/local-tmux-runtime named in
// CLAWCONNECT_AGENT_SESSION_RUNTIME_MODULES. The parent OpenClaw turn must
// end with no text, which a real gateway never does (it re-prompts the
// model), so the gateway is the in-process fake. Needs Go and tmux only.

// built holds the binaries the end-to-end tests run, built once per test
// binary (a build costs seconds, and -count=3 would repeat it); TestMain
// removes them.
var built struct {
	sync.Once
	dir string
	out []byte
	err error
}

// e2eBinaries builds clawconnect and the example module (once per test
// binary) and returns their paths.
func e2eBinaries(t *testing.T) (clawconnect, runtimeModule string) {
	t.Helper()
	built.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "clawconnect-cli-e2e-"); built.err != nil {
			return
		}
		dir := built.dir
		cli.AfterTests = append(cli.AfterTests, func() { _ = os.RemoveAll(dir) })
		for _, b := range []struct{ out, pkg string }{
			{"clawconnect", "../../cmd/clawconnect"},
			{"local-tmux-runtime", "../../examples/local-tmux-runtime"},
		} {
			if built.out, built.err = exec.Command("go", "build", "-o", filepath.Join(dir, b.out), b.pkg).CombinedOutput(); built.err != nil {
				built.err = fmt.Errorf("go build %s: %w", b.pkg, built.err)
				return
			}
		}
	})
	if built.err != nil {
		t.Fatalf("%v\n%s", built.err, built.out)
	}
	return filepath.Join(built.dir, "clawconnect"), filepath.Join(built.dir, "local-tmux-runtime")
}

var tmuxSeq atomic.Int64

// fleet is a private tmux server holding one agent session (a pane named by
// its handle) plus a keeper session, and a fleet home with the handle's
// meta.json.
type fleet struct {
	t      *testing.T
	socket string
	home   string
	handle string
}

func newFleet(t *testing.T) *fleet {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux not installed")
	}
	f := &fleet{t: t, socket: fmt.Sprintf("cc-mcp-e2e-%d-%d", os.Getpid(), tmuxSeq.Add(1)), home: t.TempDir(), handle: "worker-1"}
	t.Cleanup(func() { _ = exec.Command("tmux", "-L", f.socket, "kill-server").Run() })
	// The keeper keeps the server up once the worker's pane has ended, so
	// the module's liveness check meets a running server that lacks the
	// session, as in a real fleet.
	f.tmux("new-session", "-d", "-s", "keeper", "tail -f /dev/null")
	f.tmux("new-session", "-d", "-s", f.handle, "tail -f /dev/null")
	dir := filepath.Join(f.home, f.handle)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	meta := fmt.Sprintf(`{"transcriptPath":%q}`, f.handle+"/transcript.jsonl")
	if err := os.WriteFile(filepath.Join(dir, "meta.json"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fleet) tmux(args ...string) {
	f.t.Helper()
	if out, err := exec.Command("tmux", append([]string{"-L", f.socket, "-f", "/dev/null"}, args...)...).CombinedOutput(); err != nil {
		f.t.Fatalf("tmux %v: %v: %s", args, err, out)
	}
}

// finish plays the agent session answering and ending: it writes the
// transcript with a dated assistant answer (dated now, so after the task
// started) and ends the pane. Safe to call from any goroutine.
func (f *fleet) finish(answer string) error {
	line, err := json.Marshal(map[string]any{
		"type": "assistant", "timestamp": time.Now().UTC().Format(time.RFC3339Nano),
		"message": map[string]any{"content": []map[string]string{{"type": "text", "text": answer}}},
	})
	if err != nil {
		return err
	}
	user := `{"type":"user","timestamp":"2026-01-01T00:00:00Z","message":{"content":"go"}}`
	if err := os.WriteFile(filepath.Join(f.home, f.handle, "transcript.jsonl"), []byte(user+"\n"+string(line)+"\n"), 0o644); err != nil {
		return err
	}
	if out, err := exec.Command("tmux", "-L", f.socket, "kill-session", "-t", "="+f.handle).CombinedOutput(); err != nil {
		return fmt.Errorf("tmux kill-session: %w: %s", err, out)
	}
	return nil
}

// exampleRuntimeID asks the example module which runtime it registers (its
// id is not written here: runtime names stay in examples/), and checks that
// the module sees the fleet's pane alive before the turn, so the answer the
// task gets later can only come from the ended pane.
func exampleRuntimeID(t *testing.T, spec, handle string) string {
	t.Helper()
	reg := agentsession.NewRegistry()
	l := module.Load(t.Context(), spec, reg, module.LoadOptions{})
	defer l.Close()
	ids := l.Runtimes()
	if len(ids) != 1 {
		t.Fatalf("example module registered %v, want one runtime", ids)
	}
	rt, _ := reg.Get(ids[0])
	obs, err := rt.Inspect(t.Context(), agentsession.Ref{Runtime: ids[0], SessionID: handle})
	if err != nil || obs == nil || obs.Alive == nil || !*obs.Alive || obs.FinalResponse != "" {
		t.Fatalf("inspect of the live pane = %+v, %v; want alive and no answer", obs, err)
	}
	return ids[0]
}

// lockedBuffer collects the child's stderr.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestMCPRecoversFromRuntimeModule is issue 6's "Must show": a task whose
// context carries a marker for the example runtime's session, and whose
// parent turn ends with no text, is answered from the ended pane's
// transcript with resultSource "agent-session"; with the variable unset the
// snapshot's agentSession reads unknown_runtime and the task still
// completes.
func TestMCPRecoversFromRuntimeModule(t *testing.T) {
	clawconnect, runtimeModule := e2eBinaries(t)
	const answer = "the worker's final answer"
	for _, tc := range []struct {
		name       string
		configured bool
	}{
		{"module configured", true},
		{"variable unset", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFleet(t)
			spec := fmt.Sprintf("%s -fleet-home %s -tmux-socket %s", runtimeModule, f.home, f.socket)
			runtimeID := exampleRuntimeID(t, spec, f.handle)

			// The parent turn: the agent delegated to the session, which
			// answers and ends while the turn closes with no text anywhere.
			var once sync.Once
			fg := fakegateway.New(t, fakegateway.Options{Password: "pw", Script: func(fakegateway.Submit) fakegateway.Turn {
				once.Do(func() {
					if err := f.finish(answer); err != nil {
						t.Errorf("agent session: %v", err)
					}
				})
				return fakegateway.Turn{EmptyFinal: true, NoTranscript: true}
			}})

			env := []string{
				"PATH=" + os.Getenv("PATH"),
				"HOME=" + t.TempDir(),
				"CLAWCONNECT_HOME=" + t.TempDir(),
				"CLAWCONNECT_LOG_LEVEL=debug",
				"OPENCLAW_URL=" + fg.URL(),
				"OPENCLAW_PASSWORD=pw",
				// Late recovery gives up on the silent transcript after
				// 300 ms of no change, read every 50 ms; tier 3 then asks
				// the attached session.
				"CLAWCONNECT_RECOVERY_IDLE_MS=300",
				"CLAWCONNECT_RECOVERY_INTERVAL_MS=50",
				"CLAWCONNECT_LAZY_RECHECK_SPACING_MS=100",
				"CLAWCONNECT_LAZY_RECHECK_INTERVAL_MS=20",
				"AGENT_SESSION_CALL_TIMEOUT_MS=10000",
			}
			if v, ok := os.LookupEnv("TMUX_TMPDIR"); ok {
				// The module must reach the same tmux server as this test.
				env = append(env, "TMUX_TMPDIR="+v)
			}
			if tc.configured {
				env = append(env, "CLAWCONNECT_AGENT_SESSION_RUNTIME_MODULES="+spec)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
			defer cancel()
			cmd := exec.Command(clawconnect, "mcp")
			cmd.Env = env
			stderr := &lockedBuffer{}
			cmd.Stderr = stderr
			client := mcp.NewClient(&mcp.Implementation{Name: "modules-e2e", Version: "1"}, nil)
			cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
			if err != nil {
				t.Fatalf("connect: %v\nstderr:\n%s", err, stderr)
			}
			defer func() {
				if err := cs.Close(); err != nil {
					t.Logf("close: %v", err)
				}
				if t.Failed() {
					t.Logf("clawconnect mcp stderr:\n%s", stderr)
				}
			}()

			marker := fmt.Sprintf(`<agent-session>{"runtime":%q,"sessionId":%q,"state":"running"}</agent-session>`, runtimeID, f.handle)
			run := callTool(ctx, t, cs, "run_task", map[string]any{"task": "Summarize the worker's run.", "context": "Delegated to a worker.\n" + marker})
			if run.IsError {
				t.Fatalf("run_task: %s", toolText(run))
			}
			jobID, _ := structuredOf(t, run)["jobId"].(string)
			if jobID == "" {
				t.Fatalf("run_task gave no jobId: %s", toolText(run))
			}

			var snap map[string]any
			for {
				res := callTool(ctx, t, cs, "check_task", map[string]any{"jobId": jobID, "mode": "wait", "waitMs": 20000})
				snap = structuredOf(t, res)
				if snap["isTerminal"] == true {
					break
				}
				if ctx.Err() != nil {
					t.Fatalf("task %s not terminal in time: %v", jobID, snap)
				}
			}
			t.Logf("terminal: status %v resultSource %v terminalReason %v summary %q agentSession %v",
				snap["status"], snap["resultSource"], snap["terminalReason"], snap["summary"], snap["agentSession"])
			as, _ := snap["agentSession"].(map[string]any)
			if as == nil {
				t.Fatalf("snapshot has no agentSession: %v", snap)
			}
			asErr, _ := as["error"].(map[string]any)
			if tc.configured {
				if snap["status"] != "completed" || snap["resultSource"] != agentsession.ResultSourceAgentSession ||
					snap["terminalReason"] != agentsession.TerminalReasonRecovery || snap["summary"] != answer {
					t.Errorf("status %v resultSource %v summary %q, want completed from the agent session with %q",
						snap["status"], snap["resultSource"], snap["summary"], answer)
				}
				if as["status"] != "completed" || asErr != nil {
					t.Errorf("agentSession = %v, want completed without error", as)
				}
				if !strings.Contains(stderr.String(), "agent-session runtimes: "+runtimeID) {
					t.Errorf("stderr does not name the registered runtime")
				}
				return
			}
			// The failed read records its code and keeps the last stated status.
			if asErr == nil || asErr["code"] != string(agentsession.CodeUnknownRuntime) || as["status"] != "running" {
				t.Errorf("agentSession = %v, want error code %s and status running", as, agentsession.CodeUnknownRuntime)
			}
			if snap["status"] != "completed_no_summary" || snap["resultSource"] == "agent-session" || snap["isError"] == true {
				t.Errorf("status %v resultSource %v isError %v, want the task completed on the parent's terms",
					snap["status"], snap["resultSource"], snap["isError"])
			}
			if strings.Contains(stderr.String(), "agent-session runtimes:") {
				t.Errorf("a runtime was registered with the variable unset")
			}
		})
	}
}

func callTool(ctx context.Context, t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func toolText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func structuredOf(t *testing.T, r *mcp.CallToolResult) map[string]any {
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
