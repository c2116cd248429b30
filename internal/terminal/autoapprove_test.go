package terminal

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/testbed/poll"
)

func TestParseAutoApprove(t *testing.T) {
	t.Parallel()
	good := `{"rules": [{"name": "tests", "agent": "codex", "workspace": "/w", "argv": ["make", "test"]}]}`
	rules, err := ParseAutoApprove([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]AutoApproveRule{{Name: "tests", Agent: AgentCodex, Workspace: "/w", Argv: []string{"make", "test"}}}, rules); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	for _, tt := range []struct{ name, doc, want string }{
		{"not json", `rules: []`, "auto-approve rules: invalid character"},
		{"unknown field", `{"rules": [{"agent": "codex", "workspace": "/w", "argv": ["ls"], "args": ["-l"]}]}`, `unknown field "args"`},
		{"two values", `{"rules": []} {}`, "more than one JSON value"},
		{"claude", `{"rules": [{"agent": "claude", "workspace": "/w", "argv": ["ls"]}]}`, `rule 1: agent "claude": Claude Code's permission dialog`},
		{"unknown agent", `{"rules": [{"agent": "gemini", "workspace": "/w", "argv": ["ls"]}]}`, `agent "gemini" is unknown`},
		{"relative workspace", `{"rules": [{"agent": "codex", "workspace": "w", "argv": ["ls"]}]}`, `workspace "w" must be an absolute, clean path`},
		{"unclean workspace", `{"rules": [{"agent": "codex", "workspace": "/w/../x", "argv": ["ls"]}]}`, "absolute, clean"},
		{"no argv", `{"rules": [{"agent": "codex", "workspace": "/w"}]}`, "argv is empty"},
		{"empty word", `{"rules": [{"agent": "codex", "workspace": "/w", "argv": ["ls", ""]}]}`, `argv word ""`},
		{"spaced word", `{"rules": [{"agent": "codex", "workspace": "/w", "argv": ["make test"]}]}`, `argv word "make test"`},
		{"metacharacter", `{"rules": [{"agent": "codex", "workspace": "/w", "argv": ["rm", "*"]}]}`, `argv word "*"`},
		{"second rule named", `{"rules": [{"agent": "codex", "workspace": "/w", "argv": ["ls"]}, {"agent": "codex", "workspace": "/w", "argv": ["a;b"]}]}`, "rule 2:"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseAutoApprove([]byte(tt.doc))
			if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), tt.want) {
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

func FuzzParseAutoApprove(f *testing.F) {
	f.Add(`{"rules": [{"agent": "codex", "workspace": "/w", "argv": ["make", "test"]}]}`)
	f.Add(`{"rules": [{"agent": "claude", "workspace": "/w", "argv": ["ls"]}]}`)
	f.Fuzz(func(t *testing.T, doc string) {
		rules, err := ParseAutoApprove([]byte(doc))
		if err != nil {
			return
		}
		for _, r := range rules {
			argv, ok := commandArgv(strings.Join(r.Argv, " "))
			if r.Agent != AgentCodex || !filepath.IsAbs(r.Workspace) || !ok || !cmp.Equal(argv, r.Argv) {
				t.Fatalf("accepted a rule that cannot match exactly: %+v", r)
			}
		}
	})
}

// autoRig is a rig whose Service has rules.
func autoRig(t *testing.T, a *fakeAgent, rules []AutoApproveRule) *rig {
	t.Helper()
	r := newRig(t, a)
	r.svc = NewService(Options{Store: r.st, Terminals: r.ft, AutoApprove: rules, DraftTimeout: time.Second,
		Agents: map[string]Agent{AgentCodex: fakeReader{r.ft}, AgentClaude: fakeReader{r.ft}}})
	r.start(r.svc, HostOptions{})
	return r
}

// TestAutoApproveOnlyAnExactMatch: a rule answers a prompt whose agent,
// workspace and command words are exactly its own, with no callback, and
// the use is in the event log and status; any other prompt (an extra or
// different word, shell syntax, another workspace or agent, a prompt not
// approvable) is reported as before and nothing is pressed.
func TestAutoApproveOnlyAnExactMatch(t *testing.T) {
	rule := AutoApproveRule{Name: "tests", Agent: AgentCodex, Workspace: "/w", Argv: []string{"make", "test"}}
	for i, tt := range []struct {
		name       string
		agent      string
		cmd        string
		approvable bool
		rule       AutoApproveRule
		auto       bool
	}{
		{"exact", AgentCodex, "make test", true, rule, true},
		{"extra word", AgentCodex, "make test -j8", true, rule, false},
		{"other word", AgentCodex, "make install", true, rule, false},
		{"shell syntax", AgentCodex, "make test; rm -rf x", true, rule, false},
		{"two spaces", AgentCodex, "make  test", true, rule, false},
		{"other workspace", AgentCodex, "make test", true, AutoApproveRule{Agent: AgentCodex, Workspace: "/other", Argv: rule.Argv}, false},
		{"other agent", AgentClaude, "make test", true, rule, false},
		{"not approvable", AgentCodex, "make test", false, rule, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := newFakeAgent(tt.agent, 780+i)
			r := autoRig(t, a, []AutoApproveRule{tt.rule})
			id := sendFrom(t, r, a, SendRequest{})
			a.set(func(f *fakeAgent) {
				f.approval = &ScreenApproval{Fingerprint: "fp-auto", Kind: "run_command", Command: tt.cmd, Approvable: tt.approvable}
			})
			if !tt.auto {
				v := r.waitStatus(id, store.TurnWaitingForOpenClaw)
				if len(v.AutoApprovals) != 0 || len(eventsNamed(t, r, id, "terminal_bridge_auto_approved")) != 0 {
					t.Fatalf("auto-approved: %+v", v)
				}
				if cbs := callbacksOf(t, r, id); len(cbs) != 1 || cbs[0].Metadata["kind"] != KindApproval {
					t.Fatalf("callbacks = %+v", cbs)
				}
				if keys := a.sentKeys(); len(keys) != 1 || keys[0] != "Enter" {
					t.Fatalf("keys = %v, want only the send's Enter", keys)
				}
				return
			}
			poll.Until(t, 10*time.Second, "the auto-approval", func() bool { return len(eventsNamed(t, r, id, "terminal_bridge_auto_approved")) == 1 })
			a.finish("done", false)
			v := r.waitStatus(id, store.TurnIdle)
			want := []store.AutoApproval{{Rule: "1 (tests)", Argv: []string{"make", "test"}, Fingerprint: "fp-auto"}}
			if diff := cmp.Diff(want, v.AutoApprovals, cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".At" }, cmp.Ignore())); diff != "" {
				t.Fatalf("status auto_approvals (-want +got):\n%s", diff)
			}
			if keys := a.sentKeys(); !cmp.Equal(keys, []string{"Enter", "y"}) {
				t.Fatalf("keys = %v", keys)
			}
			cbs := callbacksOf(t, r, id)
			if len(cbs) != 1 || cbs[0].Type != MsgDone {
				t.Fatalf("callbacks = %+v, want only done", cbs)
			}
		})
	}
}
