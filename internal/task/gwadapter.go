package task

import (
	"context"

	"github.com/clawconnect/clawconnect/gateway"
)

// GatewayClient adapts a *gateway.Client to Gateway. Runs are submitted with
// the agent method (a busy session queues rather than steers), and the task
// id is the idempotency key.
func GatewayClient(c *gateway.Client) Gateway { return gwAdapter{c} }

type gwAdapter struct{ c *gateway.Client }

func (g gwAdapter) StartRun(ctx context.Context, req RunRequest) (Run, error) {
	var on func(gateway.RunEvent)
	if req.OnEvent != nil {
		on = func(e gateway.RunEvent) {
			var k EventKind
			switch e.Kind {
			case gateway.EventLifecycle:
				k = EventLifecycle
			case gateway.EventAssistant:
				k = EventAssistant
			case gateway.EventToolStart:
				k = EventToolStart
			case gateway.EventToolResult:
				k = EventToolResult
			case gateway.EventRecovering:
				k = EventRecovering
			default:
				return
			}
			req.OnEvent(Event{Kind: k, Seq: e.Seq, Phase: e.Phase, Text: e.Text, Tool: e.Tool, Args: e.Args, IsError: e.IsError})
		}
	}
	r, err := g.c.StartRun(ctx, gateway.RunRequest{
		SessionKey: req.SessionKey, Message: req.Message, IdempotencyKey: req.IdempotencyKey, OnEvent: on,
	})
	if err != nil {
		return nil, err
	}
	return gwRun{r}, nil
}

// Connected reports whether the client's connection is up.
func (g gwAdapter) Connected() bool { return g.c.Connected() }

// PrepareSession implements sessionPreparer.
func (g gwAdapter) PrepareSession(sessionKey string) func() { return g.c.PrepareSession(sessionKey) }

func (g gwAdapter) History(ctx context.Context, sessionKey string) (*History, error) {
	h, err := g.c.History(ctx, gateway.HistoryRequest{SessionKey: sessionKey, Limit: 20})
	if err != nil {
		return nil, err
	}
	out := &History{HasActiveRun: h.Session.HasActiveRun, ActiveRunIDs: h.Session.ActiveRunIDs}
	for _, m := range h.Messages {
		out.Messages = append(out.Messages, HistoryMessage{Role: m.Role, Text: m.Text, RunID: m.RunID})
	}
	return out, nil
}

func (g gwAdapter) Abort(ctx context.Context, sessionKey, runID string) (bool, error) {
	res, err := g.c.Abort(ctx, gateway.AbortRequest{SessionKey: sessionKey, RunID: runID, UseChatAbort: true})
	if err != nil {
		return false, err
	}
	return res.Aborted, nil
}

type gwRun struct{ r *gateway.Run }

func (r gwRun) ID() string { return r.r.ID() }
func (r gwRun) Close()     { r.r.Close() }

func (r gwRun) Wait(ctx context.Context) (Outcome, error) {
	o, err := r.r.Wait(ctx)
	if err != nil {
		return Outcome{}, err
	}
	out := Outcome{RunID: o.RunID, Text: o.Text, Error: o.Error}
	switch o.Status {
	case gateway.StatusOK:
		out.Status = OutcomeOK
		if o.Source == gateway.SourceNone || o.Text == gateway.NoResponseText {
			out.Status, out.Text = OutcomeNoText, ""
		}
	case gateway.StatusAborted:
		out.Status = OutcomeAborted
	case gateway.StatusError:
		out.Status = OutcomeError
	default:
		out.Status = OutcomeNoText
	}
	return out, nil
}
