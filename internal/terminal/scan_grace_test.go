package terminal

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/clawconnect/clawconnect/internal/store/sqlstore"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	"github.com/clawconnect/clawconnect/internal/terminal/agents/codex"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/internal/terminal/native"
	"github.com/clawconnect/clawconnect/termapi"
)

// fileCompletion is the fake reader whose completion scan is the real
// Codex reader's over a real rollout: what is written to that file
// decides when the Turn ends.
type fileCompletion struct {
	fakeReader
	anchor json.RawMessage
}

func (r fileCompletion) Completion(ctx context.Context, p agents.Pane, _ json.RawMessage, acc agents.Acceptance) (*agents.Completion, json.RawMessage, error) {
	return codex.Agent{}.Completion(ctx, p, r.anchor, agents.Acceptance{NativeTurnID: acc.NativeTurnID, Resume: acc.Resume})
}

func completeRecord(turn, text string) string {
	return `{"timestamp":"2026-01-01T00:00:05.000Z","type":"event_msg","payload":{"type":"task_complete","turn_id":"` + turn + `","last_agent_message":"` + text + `"}}` + "\n"
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// TestScanErrorStallsAfterGrace sends a Turn whose completion is read from
// a real rollout, then damages the rollout in each way a user reported: a
// complete line that is not JSON before a valid completion, a truncation,
// a symbolic link and a FIFO swapped in at its path. The file keeps
// "changing" (a file event every second), which used to push the
// inactivity timeout back for good: now the Turn stays waiting through
// the grace and stalls right after it, with the scan's code as the stall's
// reason and in its callback. A record still being written (a torn last
// line) is no error: the Turn waits past the grace and completes once the
// line is whole.
func TestScanErrorStallsAfterGrace(t *testing.T) {
	const grace = 20 * time.Second
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path string)
		code   native.Code // "" = no stall: the Turn completes
		finish func(t *testing.T, path string)
	}{
		{name: "malformed line", code: native.CodeInvalidJSONL, damage: func(t *testing.T, path string) {
			appendFile(t, path, "this is not json\n"+completeRecord("native-0", "done"))
		}},
		{name: "truncated", code: native.CodeTruncated, damage: func(t *testing.T, path string) {
			if err := os.Truncate(path, 3); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "symlink swap", code: native.CodeUnreadable, damage: func(t *testing.T, path string) {
			// The completion is only ever behind the link: a scan that ran
			// between appending it and swapping the link in would read it.
			body, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path+".real", append(body, completeRecord("native-0", "done")...), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(path+".real", path+".link"); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(path+".link", path); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "fifo swap", code: native.CodeUnreadable, damage: func(t *testing.T, path string) {
			if err := os.Rename(path, path+".old"); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Mkfifo(path, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "torn last line", damage: func(t *testing.T, path string) {
			appendFile(t, path, completeRecord("native-0", "done")[:40])
		}, finish: func(t *testing.T, path string) {
			appendFile(t, path, completeRecord("native-0", "done")[40:])
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The store is opened outside the bubble: its change listener
			// waits on inotify, which fake time cannot wait out.
			st := newRig(t).st
			synctest.Test(t, func(t *testing.T) {
				a := newFakeAgent(termapi.AgentCodex, 240)
				r := &rig{t: t, st: outsideBubble{st.(*sqlstore.DB)}, ft: &fakeTerminals{agents: []*fakeAgent{a}}}
				path := filepath.Join(t.TempDir(), "rollout-2026-01-01T00-00-00-"+a.thread+".jsonl")
				head := `{"timestamp":"2026-01-01T00:00:00.000Z","type":"session_meta","payload":{"id":"` + a.thread + `"}}` + "\n" +
					strings.Repeat(`{"timestamp":"2026-01-01T00:00:00.000Z","type":"event_msg","payload":{"type":"token_count"}}`+"\n", 20)
				if err := os.WriteFile(path, []byte(head), 0o600); err != nil {
					t.Fatal(err)
				}
				var st syscall.Stat_t
				if err := syscall.Stat(path, &st); err != nil {
					t.Fatal(err)
				}
				anchor, _ := json.Marshal(codex.Anchor{Mode: codex.Existing, ThreadID: a.thread, Path: path, Dev: uint64(st.Dev), Ino: st.Ino,
					Offset: st.Size, FileExisted: true, CapturedAt: time.Now().UTC()})
				r.svc = NewService(Options{Store: r.st, Terminals: r.ft, DraftTimeout: time.Second, ScanGrace: grace,
					Agents: map[string]agents.Agent{termapi.AgentCodex: fileCompletion{fakeReader: fakeReader{r.ft}, anchor: anchor}}})
				r.start(r.svc, hostpkg.Options{})
				ctx := t.Context()
				res, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "do it", OriginSession: "agent:main:s1"})
				if err != nil {
					t.Fatal(err)
				}
				r.waitStatus(res.TurnID, termapi.TurnWaitingForAgent)

				tc.damage(t, path)
				// The file keeps changing: a file event every second.
				for range grace/time.Second - 2 {
					a.poke()
					time.Sleep(time.Second)
				}
				synctest.Wait()
				if v, _ := r.svc.Status(ctx, res.TurnID); v.Status != termapi.TurnWaitingForAgent || (v.DetectorDiagnostic == "") != (tc.code == "") {
					t.Fatalf("within the grace: turn = %s (diagnostic %q), want waiting_for_agent with a diagnostic for a damaged file only", v.Status, v.DetectorDiagnostic)
				}
				for range 4 {
					a.poke()
					time.Sleep(time.Second)
				}
				synctest.Wait()
				if tc.code == "" {
					if v, _ := r.svc.Status(ctx, res.TurnID); v.Status != termapi.TurnWaitingForAgent {
						t.Fatalf("a record being written: turn = %s (%q), want waiting_for_agent", v.Status, v.StalledReason)
					}
					tc.finish(t, path)
					a.poke()
					if v := r.waitStatus(res.TurnID, termapi.TurnIdle); v.Result == nil || v.Result.Text != "done" {
						t.Fatalf("turn = %+v", v)
					}
					return
				}
				v, _ := r.svc.Status(ctx, res.TurnID)
				if v.Status != termapi.TurnStalled || !strings.Contains(v.StalledReason, string(tc.code)) {
					t.Fatalf("after the grace: turn = %s (%q), want stalled naming %s", v.Status, v.StalledReason, tc.code)
				}
				evs, err := r.st.TurnEvents(ctx, res.TurnID, 0, 100)
				if err != nil {
					t.Fatal(err)
				}
				var stalled struct{ Code string }
				for _, e := range evs {
					if e.Type == "conversation_stalled" {
						_ = json.Unmarshal(e.Data, &stalled)
					}
				}
				if stalled.Code != string(tc.code) {
					t.Fatalf("stall event code %q, want %s", stalled.Code, tc.code)
				}
				cbs, err := r.st.TurnCallbacks(ctx, res.TurnID, 10)
				if err != nil || len(cbs) != 1 || cbs[0].Kind != KindStall || !strings.Contains(string(cbs[0].Message), `"reason":"`+string(tc.code)+`"`) {
					t.Fatalf("callbacks = %v, %v; want one stall callback naming %s", cbs, err, tc.code)
				}
			})
		})
	}
}

// outsideBubble is a store opened outside a synctest bubble, its
// terminal-work feed off for the host inside the bubble: the store's
// listener, outside it, must not send on a channel made inside it.
type outsideBubble struct{ *sqlstore.DB }

func (outsideBubble) WatchTerminalWork() (<-chan struct{}, func()) { return nil, func() {} }
