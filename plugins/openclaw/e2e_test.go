package openclaw

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/realcli"
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
	r := startRig(t, rigOptions{})
	S := r.key("agent:main:cc-plugin-s")
	r.ask(S, r.sendTool("ECHO=cc-plugin-e2e-ok"), r.key("cc-plugin-e2e-send"))
	rows := r.waitCallbacks(S, 1, 3*time.Minute)
	text := rows[0].Text
	if len(rows) != 1 || !strings.Contains(text, "cc-plugin-e2e-ok") || rows[0].Type != "done" {
		t.Fatalf("S got %d callback rows (first %q); history:\n%s", len(rows), text, r.transcript(S))
	}
	t.Logf("S received (excerpt):\n%.700s", text)
	r.logLatency(rows[0], "cc-plugin-e2e-ok")
	v := r.status(rows[0].TurnID)
	if v.OriginSession != S || v.Result == nil || v.Result.Text != "cc-plugin-e2e-ok" ||
		v.CallbackDelivery == nil || v.CallbackDelivery.Status != "delivered" {
		t.Fatalf("status = %+v", v)
	}
	// Exactly one run more: the original user message and the callback's.
	if _, users := r.callbacks(S); users != 2 {
		t.Fatalf("S has %d user messages, want the request and one callback", users)
	}
	if rows, _ := r.callbacks("agent:main:main"); len(rows) != 0 {
		t.Fatal("the main session received a callback")
	}
	// Another conversation can neither read nor stop S's Turn: the plugin
	// scopes every call that names a Turn to the calling session.
	other := r.key("agent:main:cc-plugin-other")
	args, _ := json.Marshal(map[string]string{"turn_id": rows[0].TurnID})
	r.ask(other, "TOOLUSE: clawconnect_terminal_cancel "+string(args), r.key("cc-plugin-other-cancel"))
	r.waitTranscript(other, "not started from this OpenClaw session", 2*time.Minute)
	if v := r.status(rows[0].TurnID); v.Status != "idle" {
		t.Fatalf("after another session's cancel: %+v", v)
	}
}

// approveLine is the approval instruction of a question callback.
var approveLine = regexp.MustCompile(`clawconnect_terminal_approve (\{"turn_id":"turn-[A-Za-z0-9-]+"\})`)

// approveOnCallback scripts S's model: a callback that asks for approval
// makes it call clawconnect_terminal_approve with the Turn it names.
func approveOnCallback(prompt string) string {
	if !strings.Contains(prompt, "[ClawConnect approval]") {
		return prompt
	}
	m := approveLine.FindStringSubmatch(prompt)
	if m == nil {
		return prompt
	}
	return "TOOLUSE: clawconnect_terminal_approve " + m[1]
}

// TestE2EApprovalCallbackThenDone: the coding agent stops at an approval
// prompt → a question callback reaches S → S's model calls
// clawconnect_terminal_approve → the Turn completes → a done callback
// reaches S. Two callback runs in S, one per message, each under its own
// idempotency key; nothing else. Codex (an escalated command under its
// on-request policy) and Claude Code (a Bash command in the default
// permission mode) the same way.
func TestE2EApprovalCallbackThenDone(t *testing.T) {
	for _, tc := range []struct {
		kind    realcli.Kind
		args    []string
		request string
	}{
		{realcli.Codex, nil, "TOOLCALL: ESCALATE touch approved.txt"},
		{realcli.ClaudeCode, []string{"--permission-mode", "default"}, "TOOLCALL: touch claude-approved.txt"},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			r := startRig(t, rigOptions{Kind: tc.kind, TUIArgs: tc.args})
			// The shared gateway holds every test's sessions: S is this
			// subtest's own.
			S := r.key("agent:main:cc-approve-s-" + string(tc.kind))
			r.ask(S, r.sendTool(tc.request), r.key("cc-approve-send-"+string(tc.kind)))
			rows := r.waitCallbacks(S, 2, 3*time.Minute)
			if len(rows) != 2 || rows[0].Type != "question" || rows[1].Type != "done" || rows[0].TurnID == "" || rows[1].TurnID != rows[0].TurnID {
				t.Fatalf("S's callback rows = %+v; history:\n%s", rows, r.transcript(S))
			}
			if rows[0].IdempotencyKey == rows[1].IdempotencyKey || !strings.HasPrefix(rows[0].IdempotencyKey, "clawconnect-callback:") ||
				!strings.HasPrefix(rows[1].IdempotencyKey, "clawconnect-callback:") {
				t.Fatalf("callback runs' idempotency keys = %q, %q", rows[0].IdempotencyKey, rows[1].IdempotencyKey)
			}
			if !strings.Contains(rows[1].Text, strings.TrimSpace(fakemodel.ToolResultPrefix)) {
				t.Fatalf("the done callback does not carry the agent's reply:\n%s", rows[1].Text)
			}
			t.Logf("question callback (excerpt):\n%.600s\ndone callback (excerpt):\n%.600s", rows[0].Text, rows[1].Text)
			v := r.status(rows[0].TurnID)
			if v.OriginSession != S || v.Result == nil || v.CallbackDelivery == nil || v.CallbackDelivery.Status != "delivered" || v.CallbackDelivery.Type != "done" {
				t.Fatalf("status = %+v", v)
			}
			// The request and the two callbacks, nothing else.
			if _, users := r.callbacks(S); users != 3 {
				t.Fatalf("S has %d user messages, want 3; history:\n%s", users, r.transcript(S))
			}
		})
	}
}
