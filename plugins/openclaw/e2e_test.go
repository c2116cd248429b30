package openclaw

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/gateway"
	"github.com/clawconnect/clawconnect/internal/terminal"
	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/realcli"
	"github.com/clawconnect/clawconnect/internal/testbed/realgateway"
	"github.com/clawconnect/clawconnect/internal/testbed/realtui"
)

// TestE2EToolSendCallbackIntoSession is the whole loop with real everything
// but the model: the real gateway 2026.9.6 with this plugin loaded (its
// service runs `clawconnect terminal daemon`), a real Codex TUI in a private
// tmux server, one fake model serving both. The model of session S calls
// clawconnect_terminal_send by name (tools.toolSearch:false); Codex answers;
// the daemon's outbox calls clawconnect.callback and chat.send, and S gets
// exactly one new run whose user message carries the callback and Codex's
// reply (chat.history), and no other session receives anything.
func TestE2EToolSendCallbackIntoSession(t *testing.T) {
	if os.Getenv("CLAWCONNECT_E2E") != "1" {
		t.Skip("set CLAWCONNECT_E2E=1 to run against the real gateway and Codex")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "clawconnect")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/clawconnect")
	build.Dir = filepath.Join(Dir(), "..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build clawconnect: %v\n%s", err, out)
	}
	model := fakemodel.New(t, fakemodel.Options{})
	tui := realtui.Require(t, realcli.Codex, model, realtui.Options{Width: 200, Height: 50})
	home := t.TempDir()
	tmuxEnv := []string{"CLAWCONNECT_TMUX_SOCKETS=" + tui.Socket, "CLAWCONNECT_TMUX_DEFAULT_SERVER=off"}
	g, err := realgateway.Start(ctx, realgateway.Options{ModelServer: model, ToolSearchOff: true, ExtraEnv: tmuxEnv,
		Plugins: []realgateway.Plugin{{ID: "clawconnect", Dir: Dir(), Config: map[string]any{"binary": bin, "home": home}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if !strings.Contains(string(g.Hello()), `"clawconnect.callback"`) {
		t.Fatal("hello-ok does not list clawconnect.callback: the plugin did not load")
	}
	cli := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(os.Environ(), append(tmuxEnv, "CLAWCONNECT_HOME="+home, "OPENCLAW_URL="+g.URL(), "OPENCLAW_GATEWAY_TOKEN="+g.Token())...)
		out, err := cmd.Output()
		return string(out), err
	}
	// The plugin's service started the daemon; wait for its socket and a
	// sendable Codex pane (the same process in two listings in a row).
	var terminalID string
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, serr := os.Stat(filepath.Join(home, terminal.SocketName))
		out, err := cli("terminal", "list", "--json")
		var res terminal.ListResult
		if serr == nil && err == nil && json.Unmarshal([]byte(out), &res) == nil && len(res.Terminals) == 1 && len(res.Terminals[0].AvailableActions) > 0 {
			if res.Terminals[0].ID == terminalID {
				break
			}
			terminalID = res.Terminals[0].ID
		}
		if time.Now().After(deadline) {
			t.Fatalf("no daemon socket (%v) or sendable Codex pane: %v\n%s", serr, err, out)
		}
		time.Sleep(300 * time.Millisecond)
	}
	gc, err := gateway.Dial(ctx, gateway.Options{URL: g.URL(), Token: g.Token()})
	if err != nil {
		t.Fatal(err)
	}
	defer gc.Close()
	const S = "agent:main:cc-plugin-s"
	args, _ := json.Marshal(map[string]string{"terminal_id": terminalID, "request": "ECHO=cc-plugin-e2e-ok"})
	ack, err := gc.Call(ctx, "chat.send", map[string]any{"sessionKey": S, "message": "hand this to codex TOOLUSE: clawconnect_terminal_send " + string(args),
		"idempotencyKey": "cc-plugin-e2e-send", "deliver": false})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("chat.send: %s", ack)
	callbacks := func(key string) (n, users int, text string) {
		h, err := gc.History(ctx, gateway.HistoryRequest{SessionKey: key, Limit: 200})
		if err != nil {
			return 0, 0, ""
		}
		for _, m := range h.Messages {
			if m.Role != "user" {
				continue
			}
			users++
			if strings.Contains(m.Text, "[ClawConnect callback]") {
				n++
				text = m.Text
			}
		}
		return n, users, text
	}
	deadline = time.Now().Add(3 * time.Minute)
	var n, users int
	var text string
	for {
		if n, users, text = callbacks(S); n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if n != 1 || !strings.Contains(text, "cc-plugin-e2e-ok") || !strings.Contains(text, "Message type: done") {
		h, _ := gc.History(ctx, gateway.HistoryRequest{SessionKey: S, Limit: 50})
		var rows []string
		if h != nil {
			for _, m := range h.Messages {
				rows = append(rows, m.Role+": "+m.Text)
			}
		}
		t.Fatalf("S got %d callback messages (last %q); history:\n%s\ngateway log %s", n, text, strings.Join(rows, "\n---\n"), g.LogPath())
	}
	t.Logf("S received (excerpt):\n%.700s", text)
	turnID := regexp.MustCompile(`Turn: (turn-[A-Za-z0-9-]+)`).FindStringSubmatch(text)
	if turnID == nil {
		t.Fatal("the callback names no Turn")
	}
	out, err := cli("terminal", "status", "--json", turnID[1])
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	var v terminal.TurnView
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.OriginSession != S || v.Result == nil || v.Result.Text != "cc-plugin-e2e-ok" ||
		v.CallbackDelivery == nil || v.CallbackDelivery.Status != "delivered" {
		t.Fatalf("status = %s", out)
	}
	// Exactly one run more: the original user message and the callback's.
	if users != 2 {
		t.Fatalf("S has %d user messages, want the request and one callback", users)
	}
	if n, _, _ := callbacks("agent:main:main"); n != 0 {
		t.Fatal("the main session received a callback")
	}
}
