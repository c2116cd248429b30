package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/gateway"
	"github.com/clawconnect/clawconnect/internal/testbed/fakegateway"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// dial connects a client to gw and closes it at test end.
func dial(t *testing.T, gw *fakegateway.Server, mod ...func(*gateway.Options)) *gateway.Client {
	t.Helper()
	o := gateway.Options{URL: gw.URL(), Token: fakegateway.Token, MinReconnectDelay: time.Millisecond, MaxReconnectDelay: 20 * time.Millisecond}
	for _, m := range mod {
		m(&o)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, err := gateway.Dial(ctx, o)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func newGW(t *testing.T, script func(fakegateway.Submit) fakegateway.Turn) *fakegateway.Server {
	return fakegateway.New(t, fakegateway.Options{Token: fakegateway.Token, Script: script})
}

func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var ignoreVolatile = cmpopts.IgnoreFields(gateway.Outcome{}, "StopReason")

func TestRunOutcomes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		turn fakegateway.Turn
		mode gateway.Mode
		want gateway.Outcome
		// alt are other acceptable Sources when fallbacks race.
		alt []gateway.Source
	}{
		{"echo", fakegateway.Turn{Reply: "hello back"}, gateway.ModeAgent,
			gateway.Outcome{Status: gateway.StatusOK, Text: "hello back", Source: gateway.SourceChatFinal}, nil},
		{"chunks", fakegateway.Turn{Reply: "one two three four", Chunks: 4}, gateway.ModeAgent,
			gateway.Outcome{Status: gateway.StatusOK, Text: "one two three four", Source: gateway.SourceChatFinal}, nil},
		{"message tool wins", fakegateway.Turn{Reply: "plain", MessageTool: "  via tool  "}, gateway.ModeAgent,
			gateway.Outcome{Status: gateway.StatusOK, Text: "via tool", Source: gateway.SourceMessageTool}, nil},
		{"empty final uses stream text", fakegateway.Turn{Reply: "streamed", EmptyFinal: true}, gateway.ModeAgent,
			gateway.Outcome{Status: gateway.StatusOK, Text: "streamed", Source: gateway.SourceStream}, nil},
		{"dropped final", fakegateway.Turn{Reply: "late", DropFinal: true}, gateway.ModeChatSend,
			gateway.Outcome{Status: gateway.StatusOK, Text: "late", Source: gateway.SourceAgentWait}, nil},
		{"dropped final agent", fakegateway.Turn{Reply: "late", DropFinal: true}, gateway.ModeAgent,
			gateway.Outcome{Status: gateway.StatusOK, Text: "late", Source: gateway.SourceAgentResult}, []gateway.Source{gateway.SourceAgentWait}},
		{"error", fakegateway.Turn{Error: "LLM request failed"}, gateway.ModeAgent,
			gateway.Outcome{Status: gateway.StatusError, Error: "LLM request failed", Source: gateway.SourceNone}, nil},
		{"duplicates", fakegateway.Turn{Reply: "dup", Chunks: 3, Duplicate: true}, gateway.ModeAgent,
			gateway.Outcome{Status: gateway.StatusOK, Text: "dup", Source: gateway.SourceChatFinal}, nil},
		{"malformed frames", fakegateway.Turn{Reply: "survived", Malformed: true}, gateway.ModeAgent,
			gateway.Outcome{Status: gateway.StatusOK, Text: "survived", Source: gateway.SourceChatFinal}, nil},
		{"chat.send", fakegateway.Turn{Reply: "via chat"}, gateway.ModeChatSend,
			gateway.Outcome{Status: gateway.StatusOK, Text: "via chat", Source: gateway.SourceChatFinal}, nil},
		{"disconnect mid-run", fakegateway.Turn{Reply: "after reconnect", Chunks: 2, DisconnectMidRun: true}, gateway.ModeChatSend,
			// Which of agent.wait and the chat final comes first depends on
			// whether the client reconnected before the fake sent the final.
			gateway.Outcome{Status: gateway.StatusOK, Text: "after reconnect", Source: gateway.SourceAgentWait},
			[]gateway.Source{gateway.SourceHistory, gateway.SourceChatFinal}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gw := newGW(t, func(fakegateway.Submit) fakegateway.Turn { return tt.turn })
			c := dial(t, gw)
			ctx := waitCtx(t)
			run, err := c.StartRun(ctx, gateway.RunRequest{SessionKey: "s1", Message: "hi", IdempotencyKey: "k-" + tt.name, Mode: tt.mode})
			if err != nil {
				t.Fatalf("StartRun: %v", err)
			}
			defer run.Close()
			got, err := run.Wait(ctx)
			if err != nil {
				t.Fatalf("Wait: %v", err)
			}
			tt.want.RunID = "k-" + tt.name
			tt.want.SessionKey = "agent:main:s1"
			if slices.Contains(tt.alt, got.Source) {
				tt.want.Source = got.Source
			}
			if diff := cmp.Diff(tt.want, got, ignoreVolatile); diff != "" {
				t.Errorf("outcome (-want +got):\n%s", diff)
			}
			if tt.turn.Malformed && c.Stats().BadFrames == 0 {
				t.Errorf("malformed frames were not counted")
			}
		})
	}
}

func TestRunAbort(t *testing.T) {
	t.Parallel()
	for _, chatAbort := range []bool{false, true} {
		t.Run(map[bool]string{false: "sessions.abort", true: "chat.abort"}[chatAbort], func(t *testing.T) {
			gw := newGW(t, func(fakegateway.Submit) fakegateway.Turn { return fakegateway.Turn{Reply: "partial", Hold: true} })
			c := dial(t, gw)
			ctx := waitCtx(t)
			run, err := c.StartRun(ctx, gateway.RunRequest{SessionKey: "abort", Message: "slow", IdempotencyKey: "abort-1"})
			if err != nil {
				t.Fatal(err)
			}
			defer run.Close()
			if err := gw.AwaitRun(ctx, "abort-1"); err != nil {
				t.Fatal(err)
			}
			res, err := c.Abort(ctx, gateway.AbortRequest{SessionKey: "abort", RunID: run.ID(), UseChatAbort: chatAbort})
			if err != nil {
				t.Fatalf("Abort: %v", err)
			}
			if diff := cmp.Diff(gateway.AbortResult{Aborted: true, RunIDs: []string{"abort-1"}}, res,
				cmpopts.IgnoreFields(gateway.AbortResult{}, "Raw")); diff != "" {
				t.Errorf("abort result (-want +got):\n%s", diff)
			}
			got, err := run.Wait(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != gateway.StatusAborted || got.Text != "partial" {
				t.Errorf("outcome = %+v, want aborted with partial text", got)
			}
		})
	}
}

func TestRunEventsNormalized(t *testing.T) {
	t.Parallel()
	gw := newGW(t, func(fakegateway.Submit) fakegateway.Turn {
		return fakegateway.Turn{Reply: "abcd", Chunks: 2, MessageTool: "sent", Duplicate: true}
	})
	c := dial(t, gw)
	ctx := waitCtx(t)
	var evs []gateway.RunEvent
	run, err := c.StartRun(ctx, gateway.RunRequest{SessionKey: "ev", Message: "m", IdempotencyKey: "ev-1",
		OnEvent: func(e gateway.RunEvent) { evs = append(evs, e) }})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	if _, err := run.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	type ev struct {
		Kind        gateway.EventKind
		Phase, Text string
		Tool        string
	}
	var got []ev
	for _, e := range evs {
		got = append(got, ev{e.Kind, e.Phase, e.Text, e.Tool})
	}
	want := []ev{
		{gateway.EventStatus, "preparing_context", "status: preparing_context", ""},
		{gateway.EventLifecycle, "start", "Agent lifecycle: start", ""},
		{gateway.EventAssistant, "", "ab", ""},
		{gateway.EventAssistant, "", "abcd", ""},
		{gateway.EventToolStart, "start", "message: ", "message"},
		{gateway.EventToolResult, "result", "message done", "message"},
		{gateway.EventLifecycle, "end", "Agent lifecycle: end", ""},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestIdempotentResubmitYieldsOneRun(t *testing.T) {
	t.Parallel()
	gw := newGW(t, func(s fakegateway.Submit) fakegateway.Turn { return fakegateway.Turn{Reply: "once", Hold: true} })
	c := dial(t, gw)
	ctx := waitCtx(t)
	req := gateway.RunRequest{SessionKey: "idem", Message: "m", IdempotencyKey: "idem-1"}
	r1, err := c.StartRun(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	defer r1.Close()
	r2, err := c.StartRun(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if err := gw.AwaitRun(ctx, "idem-1"); err != nil {
		t.Fatal(err)
	}
	gw.Release("idem-1")
	for _, r := range []*gateway.Run{r1, r2} {
		got, err := r.Wait(ctx)
		if err != nil || got.Text != "once" {
			t.Errorf("Wait = %+v, %v; want text once", got, err)
		}
	}
	// After the end, a third submit with the same key gets the stored result.
	r3, err := c.StartRun(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	defer r3.Close()
	if got, err := r3.Wait(ctx); err != nil || got.Text != "once" {
		t.Errorf("resubmit after end = %+v, %v", got, err)
	}
	if n := gw.RunCount(); n != 1 {
		t.Errorf("gateway started %d runs, want 1", n)
	}
}

func TestBusySession(t *testing.T) {
	t.Parallel()
	gw := newGW(t, func(s fakegateway.Submit) fakegateway.Turn {
		if s.Message == "first" {
			return fakegateway.Turn{Reply: "A", Hold: true}
		}
		return fakegateway.Turn{Reply: "B"}
	})
	c := dial(t, gw)
	ctx := waitCtx(t)
	a, err := c.StartRun(ctx, gateway.RunRequest{SessionKey: "busy", Message: "first", IdempotencyKey: "a"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := gw.AwaitRun(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	t.Run("chat.send is steered", func(t *testing.T) {
		b, err := c.StartRun(ctx, gateway.RunRequest{SessionKey: "busy", Message: "second", IdempotencyKey: "b", Mode: gateway.ModeChatSend})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		got, err := b.Wait(ctx)
		if err != nil || got.Status != gateway.StatusSteered {
			t.Errorf("Wait = %+v, %v; want steered", got, err)
		}
	})
	t.Run("agent is queued with its own answer", func(t *testing.T) {
		q, err := c.StartRun(ctx, gateway.RunRequest{SessionKey: "busy", Message: "third", IdempotencyKey: "q"})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		select {
		case <-q.Done():
			t.Fatal("queued run ended before the active run")
		default:
		}
		gw.Release("a")
		got, err := q.Wait(ctx)
		if err != nil || got.Status != gateway.StatusOK || got.Text != "B" {
			t.Errorf("Wait = %+v, %v; want B", got, err)
		}
		if got, _ := a.Wait(ctx); got.Text != "A" {
			t.Errorf("first run = %+v", got)
		}
	})
}

func TestRestartMidRun(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		restart func(*fakegateway.Server)
		want    gateway.Outcome
	}{
		// The restarted gateway re-runs the turn under a new run id; the
		// answer is found after the run's user row in the transcript.
		{"recovered by the gateway", (*fakegateway.Server).Restart,
			gateway.Outcome{Status: gateway.StatusOK, Text: "survived restart", Source: gateway.SourceHistory}},
		// The restarted gateway lost the run: after the grace period the
		// client resubmits the same idempotency key.
		{"lost by the gateway", (*fakegateway.Server).RestartLosingRuns,
			gateway.Outcome{Status: gateway.StatusOK, Text: "survived restart", Source: gateway.SourceChatFinal, Resubmitted: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gw := newGW(t, nil)
			var hold atomic.Bool
			hold.Store(true)
			gw.SetScript(func(s fakegateway.Submit) fakegateway.Turn {
				return fakegateway.Turn{Reply: "survived restart", Hold: hold.Load()}
			})
			c := dial(t, gw, func(o *gateway.Options) { o.RestartGrace = 20 * time.Millisecond })
			ctx := waitCtx(t)
			var phases []string
			run, err := c.StartRun(ctx, gateway.RunRequest{SessionKey: "rs", Message: "m", IdempotencyKey: "rs-1",
				OnEvent: func(e gateway.RunEvent) {
					if e.Kind == gateway.EventRecovering {
						phases = append(phases, e.Phase)
					}
				}})
			if err != nil {
				t.Fatal(err)
			}
			defer run.Close()
			if err := gw.AwaitRun(ctx, "rs-1"); err != nil {
				t.Fatal(err)
			}
			hold.Store(false) // runs started after the restart answer at once
			tt.restart(gw)
			got, err := run.Wait(ctx)
			if err != nil {
				t.Fatal(err)
			}
			tt.want.RunID, tt.want.SessionKey = "rs-1", "agent:main:rs"
			if diff := cmp.Diff(tt.want, got, ignoreVolatile); diff != "" {
				t.Errorf("outcome (-want +got):\n%s (recovery phases %v)", diff, phases)
			}
			if len(phases) == 0 || phases[0] != "disconnected" {
				t.Errorf("recovery phases = %v", phases)
			}
		})
	}
}

func TestClientCloseEndsRuns(t *testing.T) {
	t.Parallel()
	gw := newGW(t, func(fakegateway.Submit) fakegateway.Turn { return fakegateway.Turn{Hold: true, Reply: "x"} })
	c := dial(t, gw)
	ctx := waitCtx(t)
	run, err := c.StartRun(ctx, gateway.RunRequest{SessionKey: "c", Message: "m", IdempotencyKey: "c-1"})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := run.Wait(ctx); !errors.Is(err, gateway.ErrClosed) {
		t.Errorf("Wait after Close = %v, want ErrClosed", err)
	}
	if _, err := c.StartRun(ctx, gateway.RunRequest{SessionKey: "c", Message: "m", IdempotencyKey: "c-2"}); !errors.Is(err, gateway.ErrClosed) {
		t.Errorf("StartRun after Close = %v, want ErrClosed", err)
	}
}

// TestFramesBeforeRunIDAreReplayed: the gateway streams the whole run,
// under a run id of its own choosing, before it acknowledges the submit.
func TestFramesBeforeRunIDAreReplayed(t *testing.T) {
	t.Parallel()
	gw := newGW(t, nil)
	gw.Handle("agent", func(_ context.Context, _ json.RawMessage) (any, error) {
		gw.Broadcast([]byte(`{"type":"event","event":"chat","payload":{"runId":"other","sessionKey":"agent:main:pre","seq":1,"state":"final","message":{"content":[{"type":"text","text":"not mine"}]}}}`))
		gw.Broadcast([]byte(`{"type":"event","event":"chat","payload":{"runId":"srv-1","sessionKey":"agent:main:pre","seq":1,"state":"delta","message":{"content":[{"type":"text","text":"ea"}]}}}`))
		gw.Broadcast([]byte(`{"type":"event","event":"chat","payload":{"runId":"srv-1","sessionKey":"agent:main:pre","seq":2,"state":"final","message":{"content":[{"type":"text","text":"early"}]}}}`))
		return map[string]any{"runId": "srv-1", "status": "accepted"}, nil
	})
	c := dial(t, gw)
	got, _ := runToEnd(waitCtx(t), t, c, gateway.RunRequest{SessionKey: "pre", Message: "m", IdempotencyKey: "idem-pre"})
	want := gateway.Outcome{RunID: "srv-1", SessionKey: "agent:main:pre", Status: gateway.StatusOK, Text: "early", Source: gateway.SourceChatFinal}
	if diff := cmp.Diff(want, got, ignoreVolatile); diff != "" {
		t.Errorf("outcome (-want +got):\n%s", diff)
	}
}

func TestEmptyFinalFallsBackToHistoryThenSentinel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		turn fakegateway.Turn
		want gateway.Outcome
	}{
		// The final and the stream carry no text; only the transcript has it.
		{"history", fakegateway.Turn{Reply: "only in transcript", EmptyFinal: true, NoStream: true},
			gateway.Outcome{Status: gateway.StatusOK, Text: "only in transcript", Source: gateway.SourceHistory}},
		{"sentinel", fakegateway.Turn{Reply: "", EmptyFinal: true},
			gateway.Outcome{Status: gateway.StatusOK, Text: gateway.NoResponseText, Source: gateway.SourceNone}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gw := newGW(t, func(fakegateway.Submit) fakegateway.Turn { return tt.turn })
			c := dial(t, gw)
			got, _ := runToEnd(waitCtx(t), t, c, gateway.RunRequest{SessionKey: "e", Message: "m", IdempotencyKey: "e-" + tt.name})
			tt.want.RunID, tt.want.SessionKey = "e-"+tt.name, "agent:main:e"
			if diff := cmp.Diff(tt.want, got, ignoreVolatile); diff != "" {
				t.Errorf("outcome (-want +got):\n%s", diff)
			}
		})
	}
}
