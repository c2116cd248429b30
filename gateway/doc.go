// Package gateway is a client for the OpenClaw Gateway WebSocket protocol
// (protocol version 4): it dials and authenticates, makes RPC calls, receives
// events, keeps the connection alive and reconnects, and follows agent runs
// from submission to a final outcome.
//
// # Connecting
//
// [Dial] opens a connection, waits for the gateway's connect.challenge,
// sends connect (protocol 4, client id "gateway-client", mode "backend",
// role "operator", read/write/admin scopes, token or password, optionally a
// signed Ed25519 [Device]) and returns a [*Client] once hello-ok arrives.
// While the gateway is starting it answers UNAVAILABLE; Dial retries after
// the advertised retryAfterMs until its context ends. A refusal it cannot fix
// by waiting comes back as a [*ConnectError] that says what to fix; test it
// with errors.Is against [ErrUnauthorized], [ErrNotPaired],
// [ErrProtocolMismatch].
//
// After Dial the Client owns one background supervisor goroutine. When the
// socket drops (or stays silent for two tick intervals) every pending call
// fails at once with an error matching [ErrDisconnected], and the supervisor
// reconnects with backoff min(1s·2^(n-1), 30s), each delay jittered over
// its upper half. Event subscriptions made with
// [Client.Subscribe] and session subscriptions made with
// [Client.SubscribeSession] carry over to the new connection. [Client.Close]
// stops everything and waits for every goroutine the Client started.
//
// # Session-scoped events
//
// By default the Client declares the [CapSessionScopedEvents] cap: the
// gateway then sends a session's chat and agent events only to connections
// subscribed to that session, instead of every run's events to every
// connection. Each Run subscribes to its session (sessions.messages.subscribe)
// before it submits and releases it when it ends; [Client.WatchSession] does
// the same for other callers. A released subscription is kept for
// [Options.SessionLinger] (2 s), so the next run in the same session (a
// client continuing its thread) submits without a subscribe round trip. A gateway that does not offer that method
// broadcasts as before, and the Client then makes no subscription calls
// ([Client.SessionScoped] says which case holds).
//
// # Calls
//
// [Client.Call] sends any method (including plugin methods) and returns the
// raw JSON payload. [Client.CallWith] adds a per-call timeout and support for
// methods that answer twice (agent: "accepted", then the final result). Calls
// made while the Client is reconnecting wait for the new connection, bounded
// by their context and timeout.
//
// # Runs
//
// [Client.StartRun] submits a message to a session with a stable idempotency
// key (the gateway uses it as the run id, and a resubmit with the same key
// never starts a second run). The Run listens before it submits, so no event
// is lost; frames that arrive before the run id is confirmed are buffered
// (at most [MaxPreRunFrames]) and replayed. The Run normalizes the gateway's
// chat and agent events into [RunEvent] values (cumulative assistant text,
// tool start/result, lifecycle, status) and ends with an [Outcome]: final
// text, error, aborted, or steered. A reply sent through the agent's
// "message" tool counts as the answer. If the stream breaks without a
// terminal event the Run falls back to agent.wait and chat.history. If the
// gateway process restarted (its boot id changed), the Run watches the whole
// session: OpenClaw re-runs an interrupted turn under a new run id, and the
// Run takes the answer that follows its own user message in the transcript.
// Only if the session stays idle without an answer for
// [Options.RestartGrace] does it resubmit its idempotency key. A run that
// ends with no text at all reports [NoResponseText].
//
// # Busy sessions
//
// The gateway treats a message sent to a session that is already running a
// turn differently by method (see [ModeAgent] and [ModeChatSend]). With the
// default [ModeAgent] the message is queued and answered by its own run. With
// [ModeChatSend] the gateway folds the message into the active run and ends
// the new run id at once with an empty final; the Run reports that as
// [StatusSteered] rather than as an empty answer.
//
// # Event decoding
//
// Agent and chat event frames, the bulk of the traffic, are decoded by a
// small hand-written scanner that reads only the fields a Run uses and
// shares one copy of the frame for its strings. It yields exactly what
// encoding/json would; any frame it does not handle that way (escaped or
// case-folded keys, duplicate keys, type mismatches, deep nesting) is
// decoded by encoding/json instead, and a fuzz target checks that the two
// agree. A deliberate [Client.Close] is not logged as a lost connection.
//
// # Concurrency
//
// A Client and a Run are safe for concurrent use by multiple goroutines.
package gateway
