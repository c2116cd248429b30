// Package fakegateway is an in-process fake OpenClaw Gateway for fast tests:
// an httptest server speaking the real protocol-4 wire format over
// WebSocket (coder/websocket), with runs, transcripts, idempotency, aborts,
// busy-session lanes and agent.wait, scriptable per test.
//
// # Quick start
//
//	gw := fakegateway.New(t, fakegateway.Options{Token: "tok"})
//	c, err := gateway.Dial(ctx, gateway.Options{URL: gw.URL(), Token: "tok"})
//	run, err := c.StartRun(ctx, gateway.RunRequest{SessionKey: "s", Message: "hi", IdempotencyKey: "k1"})
//	out, err := run.Wait(ctx) // out.Text == "FAKE-REPLY: hi"
//
// Everything is instant by default: a submitted run streams its events and
// finishes at once. Nothing sleeps unless a [Turn] asks for a Delay.
//
// # Scripting runs
//
// [Options.Script] (or [Server.SetScript]) decides how each submitted message
// is answered; it returns a [Turn]. Turn fields cover the cases a client must
// survive: Delay and Hold (a run that only ends on [Server.Release] or an
// abort), EmptyFinal (final with no message, text only in the transcript),
// DropFinal (no terminal events; agent.wait, the agent method's final answer
// and the transcript still tell the result), Error, MessageTool (the reply
// sent through the message tool), Duplicate (every frame sent twice),
// Malformed (garbage frames interleaved), DisconnectMidRun (all sockets
// closed after the first delta while the run goes on). The default script,
// [Echo], answers "FAKE-REPLY: <message>".
//
// # Whole-gateway behaviour
//
// [Server.DisconnectAll] closes every socket (1012, like a restart) while
// keeping state; [Server.Restart] also forgets runs and idempotency keys
// and changes the boot id, as a real gateway restart does (transcripts
// survive); until the restart has registered the runs it re-runs, connects
// are answered UNAVAILABLE, like the real gateway's startup window.
// A connection is registered before its hello-ok is sent, so once a client
// holds hello-ok, broadcasts and DisconnectAll reach it.
// Run events go to every connection, except that a connection that
// declared the session-scoped-events cap gets them only for the sessions it
// subscribed to with sessions.messages.subscribe, as on the real gateway;
// subscribers also get a session.message event per transcript row.
// [Server.Subscribed] counts a session's subscribers.
// [Server.Broadcast] injects raw frames. [Options.Unavailable]
// answers the first N connects with UNAVAILABLE/startup-sidecars.
// [Server.Handle] adds or overrides methods (plugin methods); a handler
// returning [ErrNoReply] never answers. [Server.Requests] logs every request
// for assertions, and [Server.AwaitRun] blocks until a run has started.
//
// A Server is safe for concurrent use; Close stops all its goroutines.
package fakegateway
