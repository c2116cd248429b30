package openclaw

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/poll"
	"github.com/clawconnect/clawconnect/internal/testbed/realcli"
	"github.com/clawconnect/clawconnect/internal/testbed/realtui"
	"github.com/clawconnect/clawconnect/termapi"
)

// TestE2ESlashCommandDelegatesAndCallsBack: a person types
// `/clawconnect <task>` into session S (a chat.send, no model and no tool
// call): the plugin's command hands it to the one idle Codex pane and
// answers at once; Codex's exact reply comes back into S as exactly one
// done callback.
func TestE2ESlashCommandDelegatesAndCallsBack(t *testing.T) {
	r := startRig(t, rigOptions{})
	S := r.key("agent:main:cc-slash-s")
	r.ask(S, "/clawconnect ECHO=cc-slash-ok", r.key("cc-slash-send"))
	r.waitTranscript(S, "Sent to codex in ", 2*time.Minute)
	rows := r.waitCallbacks(S, 1, 3*time.Minute)
	if len(rows) != 1 || rows[0].Type != "done" || !strings.Contains(rows[0].Text, "cc-slash-ok") {
		t.Fatalf("S's callback rows = %+v; history:\n%s", rows, r.transcript(S))
	}
	v := r.status(rows[0].TurnID)
	if v.OriginSession != S || v.Result == nil || v.Result.Text != "cc-slash-ok" || v.TerminalID != r.terminalID {
		t.Fatalf("status = %+v", v)
	}
	// The command ran without the model: no model request carried it.
	// (Other tests' callbacks on the shared rig name /clawconnect commands
	// a person may type, so the check is for this command's own text.)
	for _, q := range r.model.Requests() {
		if strings.Contains(q.Prompt, "/clawconnect ECHO=cc-slash-ok") {
			t.Fatalf("the model was asked about the command: %q", q.Prompt)
		}
	}
	// Nothing more arrives: the command's message and one callback.
	if _, users := r.callbacks(S); users != 2 {
		t.Fatalf("S has %d user messages, want the command and one callback; history:\n%s", users, r.transcript(S))
	}
	t.Logf("S's history (excerpt):\n%.2500s", r.transcript(S))
}

// TestE2ESlashCommandCancel: `/clawconnect cancel` in the chat that
// started a Turn interrupts Codex, and exactly one cancelled callback
// reaches that chat.
func TestE2ESlashCommandCancel(t *testing.T) {
	r := startRig(t, rigOptions{})
	S := r.key("agent:main:cc-slash-cancel")
	r.ask(S, "/clawconnect HANG cc-slash-cancel", r.key("cc-slash-cancel-send"))
	r.waitTranscript(S, "Sent to codex in ", 2*time.Minute)
	if _, err := r.model.WaitRequest(r.ctx, func(q fakemodel.Request) bool { return strings.Contains(q.Prompt, "cc-slash-cancel") }); err != nil {
		t.Fatal(err)
	}
	r.ask(S, "/clawconnect cancel", r.key("cc-slash-cancel-cancel"))
	rows := r.waitCallbacks(S, 1, 3*time.Minute)
	if len(rows) != 1 || rows[0].Type != "cancelled" {
		t.Fatalf("S's callback rows = %+v; history:\n%s", rows, r.transcript(S))
	}
	if v := r.status(rows[0].TurnID); v.Status != "cancelled" || v.OriginSession != S {
		t.Fatalf("status = %+v", v)
	}
	r.waitTranscript(S, rows[0].TurnID+": cancel", time.Minute)
	if _, users := r.callbacks(S); users != 3 {
		t.Fatalf("S has %d user messages, want the two commands and one callback; history:\n%s", users, r.transcript(S))
	}
	t.Logf("S's history (excerpt):\n%.2500s", r.transcript(S))
}

// TestE2ESlashCommandRefusesTwoCodexPanes: with two idle Codex panes,
// `/clawconnect codex: …` sends nothing and its reply lists both.
func TestE2ESlashCommandRefusesTwoCodexPanes(t *testing.T) {
	r := startRig(t, rigOptions{})
	_, _, _, socket, _ := sharedRig(t)
	realtui.Require(t, realcli.Codex, r.model, realtui.Options{Width: 200, Height: 50, Socket: socket})
	var ids []string
	out := ""
	if !poll.WithinEvery(2*time.Minute, 300*time.Millisecond, func() bool {
		ids = ids[:0]
		var err error
		out, err = r.cli("terminal", "list", "--json")
		var res termapi.ListResult
		if err == nil && json.Unmarshal([]byte(out), &res) == nil {
			for _, row := range res.Terminals {
				if row.Agent == "codex" && len(row.AvailableActions) > 0 {
					ids = append(ids, row.ID)
				}
			}
		}
		return len(ids) == 2
	}) {
		t.Fatalf("no two sendable Codex panes: %s", out)
	}
	S := r.key("agent:main:cc-slash-two")
	r.ask(S, "/clawconnect codex: ECHO=cc-slash-two", r.key("cc-slash-two-send"))
	r.waitTranscript(S, "Not sent: 2 idle codex panes", 2*time.Minute)
	tr := r.transcript(S)
	for _, id := range ids {
		if !strings.Contains(tr, id) {
			t.Fatalf("the refusal does not list %s:\n%s", id, tr)
		}
	}
	for _, q := range r.model.Requests() {
		if strings.Contains(q.Prompt, "cc-slash-two") {
			t.Fatalf("a Codex pane got the message: %q", q.Prompt)
		}
	}
	t.Logf("S's history (excerpt):\n%.1500s", tr)
}

// TestE2EPluginShipsSkillAndAlias: the gateway loads the plugin's skill
// (skills.status lists it) and /cc answers as /clawconnect does.
func TestE2EPluginShipsSkillAndAlias(t *testing.T) {
	r := startRig(t, rigOptions{})
	res, err := r.gc.Call(r.ctx, "skills.status", map[string]any{})
	if err != nil || !strings.Contains(string(res), `"clawconnect-terminal"`) {
		t.Fatalf("skills.status does not list the plugin's skill: %v\n%.3000s", err, res)
	}
	S := r.key("agent:main:cc-slash-alias")
	r.ask(S, "/cc list", r.key("cc-slash-alias-list"))
	r.waitTranscript(S, r.terminalID, 2*time.Minute)
	t.Logf("S's history (excerpt):\n%.800s", r.transcript(S))
}

// TestE2EToolSendWithoutTargetDelegates: S's model calls
// clawconnect_terminal_send with only a request (and its own timeouts);
// the one idle Codex pane gets it and exactly one done callback with
// Codex's exact reply reaches S.
func TestE2EToolSendWithoutTargetDelegates(t *testing.T) {
	r := startRig(t, rigOptions{})
	S := r.key("agent:main:cc-tool-delegate")
	args, _ := json.Marshal(map[string]any{"request": "ECHO=cc-tool-delegate-ok", "inactivity_timeout_minutes": 30, "hard_timeout_minutes": 90})
	r.ask(S, "hand this over TOOLUSE: clawconnect_terminal_send "+string(args), r.key("cc-tool-delegate-send"))
	rows := r.waitCallbacks(S, 1, 3*time.Minute)
	if len(rows) != 1 || rows[0].Type != "done" || !strings.Contains(rows[0].Text, "cc-tool-delegate-ok") {
		t.Fatalf("S's callback rows = %+v; history:\n%s", rows, r.transcript(S))
	}
	v := r.status(rows[0].TurnID)
	if v.TerminalID != r.terminalID || v.Result == nil || v.Result.Text != "cc-tool-delegate-ok" || v.HardDeadline == "" {
		t.Fatalf("status = %+v", v)
	}
	created, _ := time.Parse(time.RFC3339Nano, v.CreatedAt)
	hard, _ := time.Parse(time.RFC3339Nano, v.HardDeadline)
	if d := hard.Sub(created); d < 89*time.Minute || d > 91*time.Minute {
		t.Fatalf("hard deadline %s after creation, want 90m (status %+v)", d, v)
	}
}

// TestE2ESlashCommandAnswersAQuestion: a person hands a task to the real
// Claude Code TUI with /clawconnect; Claude Code asks a question in its
// own dialog; S gets one question callback that names the command to
// answer it; `/clawconnect respond latest: Blue` answers it in the pane,
// and the same Turn's done callback, whose reply shows the choice, reaches
// S.
func TestE2ESlashCommandAnswersAQuestion(t *testing.T) {
	r := startRig(t, rigOptions{Kind: realcli.ClaudeCode, TUIArgs: []string{"--permission-mode", "default"}})
	S := r.key("agent:main:cc-slash-question")
	r.ask(S, "/clawconnect claude: QUESTION: Which color should the widget be? | Red | Blue", r.key("cc-slash-question-send"))
	r.waitTranscript(S, "Sent to claude in ", 2*time.Minute)
	rows := r.waitCallbacks(S, 1, 3*time.Minute)
	if len(rows) != 1 || rows[0].Type != "question" || !strings.Contains(rows[0].Text, "2. Blue") ||
		!strings.Contains(rows[0].Text, "/clawconnect respond "+rows[0].TurnID+": <answer>") {
		t.Fatalf("S's callback rows = %+v; history:\n%s", rows, r.transcript(S))
	}
	// The person answers after S's assistant told them of the question
	// (a message typed while that run is still going interrupts it).
	r.waitTranscript(S, fakemodel.DefaultPrefix+"A ClawConnect terminal Turn you started reports back", 2*time.Minute)
	r.ask(S, "/clawconnect respond latest: Blue", r.key("cc-slash-question-respond"))
	r.waitTranscript(S, "Answered "+rows[0].TurnID+"; the reply comes back here.", time.Minute)
	rows = r.waitCallbacks(S, 2, 3*time.Minute)
	if len(rows) != 2 || rows[1].Type != "done" || rows[1].TurnID != rows[0].TurnID || !strings.Contains(rows[1].Text, `"Blue"`) {
		t.Fatalf("S's callback rows = %+v; history:\n%s", rows, r.transcript(S))
	}
	if v := r.status(rows[0].TurnID); v.Status != "idle" || v.OriginSession != S || v.Result == nil || !strings.Contains(v.Result.Text, `"Blue"`) {
		t.Fatalf("status = %+v", v)
	}
	tr := r.transcript(S)
	if strings.Contains(tr, "failed before producing a reply") {
		t.Fatalf("a run in S failed:\n%s", tr)
	}
	t.Logf("S's history (excerpt):\n%.4000s", tr)
}
