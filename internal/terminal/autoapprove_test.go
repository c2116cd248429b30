package terminal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/internal/testbed/poll"
	"github.com/clawconnect/clawconnect/termapi"
)

func TestParseAutoApprove(t *testing.T) {
	t.Parallel()
	good := `{"rules": [
  {"name": "tests", "agent": "codex", "workspace": "/w", "argv": ["make", "test"]},
  {"agent": "claude", "workspace": "/w", "argv": ["go", "vet", "./..."]}
]}`
	rules, err := ParseAutoApprove([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	want := []AutoApproveRule{{Name: "tests", Agent: termapi.AgentCodex, Workspace: "/w", Argv: []string{"make", "test"}},
		{Agent: termapi.AgentClaude, Workspace: "/w", Argv: []string{"go", "vet", "./..."}}}
	if diff := cmp.Diff(want, rules); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	if rules, err := ParseAutoApprove([]byte(`{"rules": []}`)); err != nil || len(rules) != 0 {
		t.Errorf("no rules: %v %v", rules, err)
	}
	for _, tt := range []struct{ name, doc, want string }{
		{"not json", `rules: []`, "line 1: invalid character"},
		{"not an object", `[]`, "line 1: the document is not a JSON object"},
		{"ends early", "{\"rules\": [\n{\"agent\": \"codex\",", "line 2: the document ends early"},
		{"syntax error on line 3", "{\"rules\": [\n {\"agent\": \"codex\", \"workspace\": \"/w\", \"argv\": [\"ls\"]},\n {\"agent\" \"codex\"}\n]}", "line 3: invalid character"},
		{"unknown top field", "{\n\"rules\": [],\n\"rule\": []}", `line 3: unknown field "rule"`},
		{"rules twice", "{\"rules\": [],\n \"rules\": []}", `line 2: "rules" is given twice`},
		{"rules not a list", `{"rules": {}}`, `"rules" is not a list`},
		{"rule not an object", "{\"rules\": [\n\"ls\"]}", "line 2: rule 1: a rule is an object"},
		{"unknown field", "{\"rules\": [\n\n  {\"agent\": \"codex\", \"workspace\": \"/w\", \"argv\": [\"ls\"], \"args\": [\"-l\"]}]}", `line 3: rule 1: unknown field "args"`},
		{"field in another case", `{"rules": [{"Agent": "codex", "workspace": "/w", "argv": ["ls"]}]}`, `unknown field "Agent"`},
		{"field twice", `{"rules": [{"agent": "codex", "workspace": "/w", "argv": ["ls"], "argv": ["rm", "x"]}]}`, `field "argv" is given twice`},
		{"wrong type", `{"rules": [{"agent": "codex", "workspace": "/w", "argv": "make test"}]}`, "argv a list of strings"},
		{"two values", "{\"rules\": []}\n{}", "line 2: more than one JSON value"},
		{"unknown agent", `{"rules": [{"agent": "gemini", "workspace": "/w", "argv": ["ls"]}]}`, `agent "gemini" is unknown; use "codex" or "claude"`},
		{"no agent", `{"rules": [{"workspace": "/w", "argv": ["ls"]}]}`, `agent "" is unknown`},
		{"relative workspace", `{"rules": [{"agent": "claude", "workspace": "w", "argv": ["ls"]}]}`, `workspace "w" must be an absolute, clean path`},
		{"unclean workspace", `{"rules": [{"agent": "codex", "workspace": "/w/../x", "argv": ["ls"]}]}`, "absolute, clean"},
		{"no argv", `{"rules": [{"agent": "codex", "workspace": "/w"}]}`, "argv is empty"},
		{"empty word", `{"rules": [{"agent": "codex", "workspace": "/w", "argv": ["ls", ""]}]}`, `argv word ""`},
		{"spaced word", `{"rules": [{"agent": "claude", "workspace": "/w", "argv": ["make test"]}]}`, `argv word "make test"`},
		{"metacharacter", `{"rules": [{"agent": "codex", "workspace": "/w", "argv": ["rm", "*"]}]}`, `argv word "*"`},
		{"second rule named", "{\"rules\": [{\"agent\": \"codex\", \"workspace\": \"/w\", \"argv\": [\"ls\"]},\n\n\n {\"agent\": \"codex\", \"workspace\": \"/w\", \"argv\": [\"a;b\"]}]}", "line 4: rule 2:"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseAutoApprove([]byte(tt.doc))
			if !errors.Is(err, termapi.ErrBadInput) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ParseAutoApprove = %v, want a bad-input error containing %q", err, tt.want)
			}
		})
	}
	if _, err := LoadAutoApprove(filepath.Join(t.TempDir(), "missing.json")); err == nil || !strings.Contains(err.Error(), "auto-approve rules") {
		t.Fatalf("missing file: %v", err)
	}
	path := filepath.Join(t.TempDir(), "rules.json")
	if err := os.WriteFile(path, []byte(`{"rules": [{"agent": "codex"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadAutoApprove(path); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "workspace") {
		t.Fatalf("bad file: %v", err)
	}
	if rules, err := LoadAutoApprove(""); err != nil || rules != nil {
		t.Fatalf("no file: %v %v", rules, err)
	}
}

// FuzzParseAutoApprove: a document is accepted only as rules that can
// match exactly, and a refusal is a bad-input error naming a line of the
// document.
func FuzzParseAutoApprove(f *testing.F) {
	f.Add(`{"rules": [{"agent": "codex", "workspace": "/w", "argv": ["make", "test"]}]}`)
	f.Add("{\"rules\": [\n{\"agent\": \"claude\", \"workspace\": \"/w\", \"argv\": [\"ls\"], \"argv\": [\"ls\"]}]}")
	f.Add(`{"rules": [{"Agent": "claude", "workspace": "/w", "argv": ["ls"]}]} {}`)
	f.Fuzz(func(t *testing.T, doc string) {
		rules, err := ParseAutoApprove([]byte(doc))
		if err != nil {
			if !errors.Is(err, termapi.ErrBadInput) || !strings.Contains(err.Error(), "auto-approve rules, line ") {
				t.Fatalf("refusal %v is not a bad-input error with a line", err)
			}
			return
		}
		for _, r := range rules {
			argv, ok := commandArgv(strings.Join(r.Argv, " "))
			if (r.Agent != termapi.AgentCodex && r.Agent != termapi.AgentClaude) || !filepath.IsAbs(r.Workspace) || !ok || !cmp.Equal(argv, r.Argv) {
				t.Fatalf("accepted a rule that cannot match exactly: %+v", r)
			}
		}
	})
}

// FuzzAutoApproveMatch: a rule matches a command only when the command is
// exactly its words joined by single spaces.
func FuzzAutoApproveMatch(f *testing.F) {
	f.Add("make test", "make", "test")
	f.Add("make  test", "make", "test")
	f.Add("make test;rm", "make", "test;rm")
	f.Add("make\ttest", "make", "test")
	s := &Service{}
	turn := &store.Turn{Agent: termapi.AgentClaude, Workspace: "/w"}
	f.Fuzz(func(t *testing.T, cmd, w1, w2 string) {
		rule := AutoApproveRule{Agent: termapi.AgentClaude, Workspace: "/w", Argv: []string{w1, w2}}
		doc, _ := json.Marshal(map[string]any{"rules": []AutoApproveRule{rule}})
		rules, err := ParseAutoApprove(doc)
		if err != nil {
			return
		}
		s.o.AutoApprove = rules
		argv, ok := commandArgv(cmd)
		matched := false
		if ok {
			_, r := s.autoApproveRule(turn, argv)
			matched = r != nil
		}
		if matched != (cmd == w1+" "+w2) {
			t.Fatalf("command %q, rule %q: matched %v", cmd, rule.Argv, matched)
		}
	})
}

// fakeCommandReader is a fakeReader whose session files hold the exact
// command of a pending approval, as Claude Code's transcript does.
type fakeCommandReader struct{ fakeReader }

func (r fakeCommandReader) PendingCommand(_ context.Context, p agents.Pane, _ json.RawMessage, acc agents.Acceptance, _ string) (agents.PendingCommand, error) {
	a := r.agentOf(p)
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case acc.NativeTurnID == "":
		return agents.PendingCommand{}, errors.New("asked without the accepted turn")
	case a.pendingErr != nil:
		return agents.PendingCommand{}, a.pendingErr
	case a.pending == nil:
		return agents.PendingCommand{}, errors.New("no pending call")
	}
	return *a.pending, nil
}

// autoRig is a rig whose Service has rules; its Claude Code reader reads
// commands from the session file.
func autoRig(t *testing.T, a *fakeAgent, rules []AutoApproveRule) *rig {
	t.Helper()
	r := newRig(t, a)
	r.svc = NewService(Options{Store: r.st, Terminals: r.ft, AutoApprove: rules, DraftTimeout: time.Second,
		Agents: map[string]agents.Agent{termapi.AgentCodex: fakeReader{r.ft}, termapi.AgentClaude: fakeCommandReader{fakeReader{r.ft}}}})
	r.start(r.svc, hostpkg.Options{})
	return r
}

// TestAutoApproveOnlyAnExactMatch: a rule answers a prompt whose agent,
// workspace and command words are exactly its own — for Codex the words
// its prompt shows, for Claude Code those of the call its session file
// holds — with no approval callback; the use is in the event log, status
// and the done callback. Any other prompt (an extra or different word,
// shell syntax, another workspace or agent, a prompt not approvable, a
// session file that cannot tell the command, a call made in another
// directory) is reported as before, saying why a rule of its workspace did
// not answer it, and nothing is pressed.
func TestAutoApproveOnlyAnExactMatch(t *testing.T) {
	t.Parallel()
	rule := AutoApproveRule{Name: "tests", Agent: termapi.AgentCodex, Workspace: "/w", Argv: []string{"make", "test"}}
	claudeRule := AutoApproveRule{Name: "tests", Agent: termapi.AgentClaude, Workspace: "/w", Argv: []string{"make", "test"}}
	call := func(cmd, cwd string) *agents.PendingCommand {
		return &agents.PendingCommand{Tool: "Bash", Command: cmd, Cwd: cwd, RequestID: "toolu_1", CommandSHA256: "c0ffee", Evidence: "e1"}
	}
	for i, tt := range []struct {
		name       string
		agent      string
		cmd        string // what the prompt shows
		pending    *agents.PendingCommand
		pendingErr error
		approvable bool
		rule       AutoApproveRule
		auto       bool
		declined   string
	}{
		{"exact", termapi.AgentCodex, "make test", nil, nil, true, rule, true, ""},
		{"extra word", termapi.AgentCodex, "make test -j8", nil, nil, true, rule, false, declinedNoRule},
		{"other word", termapi.AgentCodex, "make install", nil, nil, true, rule, false, declinedNoRule},
		{"shell syntax", termapi.AgentCodex, "make test; rm -rf x", nil, nil, true, rule, false, declinedNotPlain},
		{"two spaces", termapi.AgentCodex, "make  test", nil, nil, true, rule, false, declinedNotPlain},
		{"other workspace", termapi.AgentCodex, "make test", nil, nil, true, AutoApproveRule{Agent: termapi.AgentCodex, Workspace: "/other", Argv: rule.Argv}, false, ""},
		{"other agent", termapi.AgentClaude, "", call("make test", "/w"), nil, true, rule, false, ""},
		{"not approvable", termapi.AgentCodex, "make test", nil, nil, false, rule, false, ""},
		{"claude exact", termapi.AgentClaude, "", call("make test", "/w"), nil, true, claudeRule, true, ""},
		{"claude screen text ignored", termapi.AgentClaude, "make test", call("make install", "/w"), nil, true, claudeRule, false, declinedNoRule},
		{"claude shell syntax", termapi.AgentClaude, "", call("make test && rm -rf x", "/w"), nil, true, claudeRule, false, declinedNotPlain},
		{"claude several lines", termapi.AgentClaude, "", call("make\ntest", "/w"), nil, true, claudeRule, false, declinedNotPlain},
		{"claude other directory", termapi.AgentClaude, "", call("make test", "/w/sub"), nil, true, claudeRule, false, declinedCwd},
		{"claude unreadable", termapi.AgentClaude, "", nil, errors.New("the dialog on the screen does not show the transcript's command exactly"), true, claudeRule, false,
			"the dialog on the screen does not show the transcript's command exactly"},
		{"claude not approvable", termapi.AgentClaude, "", call("make test", "/w"), nil, false, claudeRule, false, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := newFakeAgent(tt.agent, 780+i)
			r := autoRig(t, a, []AutoApproveRule{tt.rule})
			id := sendFrom(t, r, a, termapi.SendRequest{})
			a.set(func(f *fakeAgent) {
				f.pending, f.pendingErr = tt.pending, tt.pendingErr
				f.approval = &agents.ScreenApproval{Fingerprint: "fp-auto", Kind: "run_command", Command: tt.cmd, Approvable: tt.approvable}
			})
			if !tt.auto {
				v := r.waitStatus(id, termapi.TurnWaitingForOpenClaw)
				if len(v.AutoApprovals) != 0 || len(eventsNamed(t, r, id, "terminal_bridge_auto_approved")) != 0 {
					t.Fatalf("auto-approved: %+v", v)
				}
				cbs := callbacksOf(t, r, id)
				if len(cbs) != 1 || cbs[0].Metadata["kind"] != KindApproval {
					t.Fatalf("callbacks = %+v", cbs)
				}
				if got, _ := cbs[0].Metadata["auto_approve_declined"].(string); got != tt.declined {
					t.Fatalf("auto_approve_declined = %q, want %q", got, tt.declined)
				}
				if keys := a.sentKeys(); len(keys) != 1 || keys[0] != "Enter" {
					t.Fatalf("keys = %v, want only the send's Enter", keys)
				}
				return
			}
			poll.Until(t, 10*time.Second, "the auto-approval", func() bool { return len(eventsNamed(t, r, id, "terminal_bridge_auto_approved")) == 1 })
			a.finish("done", false)
			v := r.waitStatus(id, termapi.TurnIdle)
			want := []termapi.AutoApproval{{Rule: "1 (tests)", Argv: []string{"make", "test"}, Fingerprint: "fp-auto"}}
			ignoreAt := cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".At" }, cmp.Ignore())
			if diff := cmp.Diff(want, v.AutoApprovals, ignoreAt); diff != "" {
				t.Fatalf("status auto_approvals (-want +got):\n%s", diff)
			}
			if keys := a.sentKeys(); !cmp.Equal(keys, []string{"Enter", "y"}) {
				t.Fatalf("keys = %v", keys)
			}
			ev := eventsNamed(t, r, id, "terminal_bridge_auto_approved")[0]
			if ev["agent"] != tt.agent || ev["rule"] != "1 (tests)" {
				t.Fatalf("event = %v", ev)
			}
			if tt.pending != nil && (ev["tool"] != "Bash" || ev["request_id"] != "toolu_1" || ev["command_sha256"] != "c0ffee" || ev["evidence_fingerprint"] != "e1") {
				t.Fatalf("event = %v, want the session file's evidence", ev)
			}
			cbs := callbacksOf(t, r, id)
			if len(cbs) != 1 || cbs[0].Type != MsgDone {
				t.Fatalf("callbacks = %+v, want only done", cbs)
			}
			var got []termapi.AutoApproval
			raw, _ := json.Marshal(cbs[0].Metadata["auto_approvals"])
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got, ignoreAt); diff != "" {
				t.Fatalf("done callback auto_approvals (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAutoApproveWaitsForTheSessionFile: a Claude Code dialog drawn before
// its transcript records the call is not reported to a person at once;
// when the call is written, the rule answers it and no approval callback
// is ever sent.
func TestAutoApproveWaitsForTheSessionFile(t *testing.T) {
	t.Parallel()
	a := newFakeAgent(termapi.AgentClaude, 799)
	r := autoRig(t, a, []AutoApproveRule{{Agent: termapi.AgentClaude, Workspace: "/w", Argv: []string{"make", "test"}}})
	id := sendFrom(t, r, a, termapi.SendRequest{})
	a.set(func(f *fakeAgent) {
		f.pendingErr = fmt.Errorf("%w: not written", agents.ErrEvidenceNotYet)
		f.approval = &agents.ScreenApproval{Fingerprint: "fp-late", Kind: "run_command", Approvable: true}
	})
	// Two looks at the dialog without its call: still held back.
	seen := a.captureCount()
	poll.Until(t, 10*time.Second, "two looks at the dialog", func() bool { a.poke(); return a.captureCount() >= seen+2 })
	if v, _ := r.svc.Status(t.Context(), id); v.Status == termapi.TurnWaitingForOpenClaw || len(callbacksOf(t, r, id)) != 0 {
		t.Fatalf("reported before the session file was read: %+v", v)
	}
	a.set(func(f *fakeAgent) {
		f.pendingErr, f.pending = nil, &agents.PendingCommand{Tool: "Bash", Command: "make test", Cwd: "/w", RequestID: "toolu_2"}
	})
	poll.Until(t, 10*time.Second, "the auto-approval", func() bool { return len(eventsNamed(t, r, id, "terminal_bridge_auto_approved")) == 1 })
	a.finish("done", false)
	r.waitStatus(id, termapi.TurnIdle)
	if cbs := callbacksOf(t, r, id); len(cbs) != 1 || cbs[0].Type != MsgDone {
		t.Fatalf("callbacks = %+v, want only done", cbs)
	}
	if n := len(eventsNamed(t, r, id, "terminal_bridge_approval_detected")); n != 0 {
		t.Fatalf("%d approvals reported to a person", n)
	}
}

// captureCount is how many times the pane's screen was read.
func (f *fakeAgent) captureCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.captures
}
