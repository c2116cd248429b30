package terminal

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/gateway"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/internal/terminal/outbox"
	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/poll"
	"github.com/clawconnect/clawconnect/internal/testbed/realgateway"
	"github.com/clawconnect/clawconnect/plugins/openclaw"
	"github.com/clawconnect/clawconnect/termapi"
)

// TestCallbackIntoBusySession: the callback arrives while S runs a slow
// reply. It must start its own run in S after that one, with its own user
// row, rather than being folded into the running reply.
func TestCallbackIntoBusySession(t *testing.T) {
	if os.Getenv("CLAWCONNECT_E2E") != "1" {
		t.Skip("set CLAWCONNECT_E2E=1 to run against the real OpenClaw gateway")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	model := fakemodel.New(t, fakemodel.Options{})
	g, err := realgateway.Start(ctx, realgateway.Options{ModelServer: model,
		Plugins: []realgateway.Plugin{{ID: "clawconnect", Dir: openclaw.Dir(), Config: map[string]any{"daemon": false}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	gc, err := gateway.Dial(ctx, gateway.Options{URL: g.URL(), Token: g.Token()})
	if err != nil {
		t.Fatal(err)
	}
	defer gc.Close()
	const S = "agent:main:cc-busy-s"
	if _, err := gc.Call(ctx, "chat.send", map[string]any{"sessionKey": S, "message": "tell a long story SLOW", "idempotencyKey": "cc-busy-a"}); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 2*time.Minute)
	if _, err := model.WaitRequest(wctx, func(r fakemodel.Request) bool { return strings.Contains(r.Prompt, "tell a long story SLOW") }); err != nil {
		t.Fatal(err)
	}
	wcancel()
	a := newFakeAgent(termapi.AgentCodex, 411)
	r := newRig(t, a)
	r.start(r.svc, hostpkg.Options{})
	turnID, cb := completedTurn(t, r, a, S, "FAKE-REPLY: busy 5d2c")
	x := outbox.New(outbox.Options{Store: r.st, Owner: "busy", WaitTimeout: 60 * time.Second,
		Dial: func(context.Context, string) (outbox.Caller, error) { return gc, nil }})
	if n, err := x.DeliverDue(ctx); err != nil || n != 1 {
		t.Fatalf("deliver: %d, %v", n, err)
	}
	got, _ := r.st.GetCallback(ctx, cb.MessageID)
	t.Logf("callback %s: %s wake %s observation %s", turnID, got.Status, got.Wake, got.RunObservation)
	if _, err := gc.Call(ctx, "agent.wait", map[string]any{"runId": "cc-busy-a", "timeoutMs": 60000}); err != nil {
		t.Fatal(err)
	}
	var rows []string
	after, replyRun := false, ""
	poll.WithinEvery(90*time.Second, 500*time.Millisecond, func() bool {
		h, err := gc.History(ctx, gateway.HistoryRequest{SessionKey: S, Limit: 50})
		if err != nil {
			t.Fatal(err)
		}
		rows, after, replyRun = nil, false, ""
		cbRow := -1
		for i, m := range h.Messages {
			rows = append(rows, m.Role+" ["+m.IdempotencyKey+"|"+m.RunID+"]: "+strings.ReplaceAll(m.Text[:min(len(m.Text), 120)], "\n", " "))
			if m.Role == "user" && strings.Contains(m.Text, "busy 5d2c") {
				cbRow = i
			}
			if cbRow >= 0 && i > cbRow && m.Role == "assistant" && m.Text != "" {
				after = true
				replyRun = m.RunID
			}
		}
		return after
	})
	t.Logf("history of S:\n%s", strings.Join(rows, "\n"))
	if !after {
		t.Fatal("no reply to the callback in S")
	}
	if replyRun == "cc-busy-a" {
		t.Fatal("the callback was folded into the running reply instead of starting its own run")
	}
}
