package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/peers"
	"github.com/clawconnect/clawconnect/internal/testbed/realcli"
	"github.com/clawconnect/clawconnect/internal/testbed/realtui"
)

// codexFixture is a fixture whose clawconnect processes see one real Codex
// TUI (in a private tmux server, on the fake model) and no other tmux
// server, with the client peer lib installed.
func codexFixture(t *testing.T, lib peers.ID) (*fixture, *realtui.TUI) {
	t.Helper()
	peers.RequireE2E(t)
	in := peers.Require(t, peers.Node, lib)
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	model := fakemodel.New(t, fakemodel.Options{})
	tui := realtui.Require(t, realcli.Codex, model, realtui.Options{Width: 200, Height: 50})
	home := t.TempDir()
	// The task bridge needs an agent to start; no gateway listens there
	// and none is used.
	if err := os.WriteFile(filepath.Join(home, "agents.json"), []byte(`{"agents":[{"id":"main","url":"ws://127.0.0.1:9","password":"p"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return &fixture{bin: bin, home: home, in: in,
		extraEnv: []string{"CLAWCONNECT_TMUX_SOCKETS=" + tui.Socket, "CLAWCONNECT_TMUX_DEFAULT_SERVER=off"}}, tui
}

// TestTSClientTerminalTools drives a real Codex TUI in a private tmux
// server with the TypeScript SDK, through `clawconnect mcp --terminal-tools`
// (stdio), then through `clawconnect serve` with
// CLAWCONNECT_TERMINAL_TOOLS=1 (streamable HTTP): terminal_list finds the
// pane, terminal_send types the request, and a waiting terminal_status
// returns the fake model's exact reply. Over HTTP the caller uses a
// personal token: the Turn records it, and a second token's
// terminal_status and terminal_cancel of it answer as for a Turn that does
// not exist, while its terminal_list never shows the turn id.
func TestTSClientTerminalTools(t *testing.T) {
	t.Parallel() // own home and processes; the shared gateway is never restarted
	f, tui := codexFixture(t, peers.MCPSDK)
	in, bin := f.in, f.bin

	dir := t.TempDir()
	script, err := os.ReadFile("testdata/terminal.mjs")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "terminal.mjs"), script, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(in.NodeModules(peers.MCPSDK), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	client := func(reply, intruder string, target ...string) map[string]any {
		t.Helper()
		c := in.MustCommand(t, peers.MCPSDK)
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		defer cancel()
		cmd := c.Cmd(ctx, append([]string{filepath.Join(dir, "terminal.mjs")}, target...)...)
		cmd.Env = append(f.env(), c.Env...)
		cmd.Env = append(cmd.Env, "TERMINAL_REQUEST=ECHO="+reply, "INTRUDER_URL="+intruder)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			screen, _ := tui.Capture(context.Background())
			t.Fatalf("ts client: %v\nstdout: %s\nstderr: %s\nscreen:\n%s", err, out, stderr.String(), screen)
		}
		return decode(t, out, stderr.String())
	}
	check(t, client("mcp-terminal-ok", "", bin, "mcp", "--terminal-tools"), "mcp-terminal-ok")
	const alice, bob = "e2e-alice-token-0123456789", "e2e-bob-token-0123456789"
	f.extraEnv = append(f.extraEnv, "CLAWCONNECT_TERMINAL_TOOLS=1", "MCP_USER_TOKENS=alice:"+alice+",bob:"+bob)
	url := f.serve(t)
	doc := client("http-terminal-ok", url+"?pass="+bob, url+"?pass="+alice)
	check(t, doc, "http-terminal-ok")
	checkIntruder(t, doc)
}

// checkIntruder asserts that the second credential could neither read nor
// cancel the first one's Turn, nor learn its id.
func checkIntruder(t *testing.T, doc map[string]any) {
	t.Helper()
	if p := doc["status"].(map[string]any)["turn"].(map[string]any)["principal"]; p != "user:alice" {
		t.Errorf("the Turn's principal = %v, want user:alice", p)
	}
	in, _ := doc["intruder"].(map[string]any)
	if in == nil {
		t.Fatalf("no intruder probe in %v", doc)
	}
	turn := in["turn"].(string)
	answer := func(k string) (bool, string) {
		a := in[k].(map[string]any)
		return a["isError"].(bool), a["text"].(string)
	}
	ghostErr, ghost := answer("ghost")
	for _, k := range []string{"status", "cancel"} {
		isErr, text := answer(k)
		if !isErr || !ghostErr || strings.ReplaceAll(text, turn, "turn-20260101T000000-00000000") != ghost {
			t.Errorf("intruder %s = %v %q, want the unknown-turn answer %q", k, isErr, text, ghost)
		}
	}
	if _, list := answer("list"); strings.Contains(list, turn) {
		t.Errorf("intruder terminal_list shows the turn id: %s", list)
	}
}

// check asserts on the output of terminal.mjs.
func check(t *testing.T, doc map[string]any, reply string) {
	t.Helper()
	var tools []string
	for _, x := range doc["tools"].([]any) {
		tools = append(tools, x.(string))
	}
	want := append(slices.Clone(allTools), "terminal_approve", "terminal_cancel", "terminal_list", "terminal_respond", "terminal_send", "terminal_status")
	slices.Sort(want)
	if !slices.Equal(tools, want) {
		t.Errorf("tools = %v, want %v", tools, want)
	}
	if row := doc["row"].(map[string]any); row["agent"] != "codex" {
		t.Errorf("row = %v", row)
	}
	if s := doc["send"].(map[string]any); s["submission_outcome"] != "agent_accepted" {
		t.Errorf("send = %v", s)
	}
	st := doc["status"].(map[string]any)
	turn := st["turn"].(map[string]any)
	res, _ := turn["result"].(map[string]any)
	if turn["status"] != "idle" || res == nil || res["text"] != reply || st["running"] != false {
		t.Errorf("status = %v", st)
	}
	if text, _ := doc["text"].(string); !strings.Contains(text, reply) {
		t.Errorf("status text = %q", text)
	}
	t.Logf("progress notifications while the Turn ran: %v", doc["progress"])
}

func decode(t *testing.T, out []byte, stderr string) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("client output is not JSON: %v\n%s\nstderr: %s", err, out, stderr)
	}
	return doc
}
