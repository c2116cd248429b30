package executor

import (
	"context"
	"errors"
	"time"
)

// RuntimeID names a runtime. The set is open: the constants are the runtimes
// this module ships adapters for, and any other non-empty string is a valid
// id for a third-party adapter.
type RuntimeID string

// Runtime ids of the adapters shipped with this module (and Hermes, which is
// reserved for a future adapter).
const (
	RuntimeOpenClaw   RuntimeID = "openclaw"
	RuntimeClaudeCode RuntimeID = "claude-code"
	RuntimeCodex      RuntimeID = "codex"
	RuntimeHermes     RuntimeID = "hermes"
)

// ParticipantKind says whether an adapter drives an automated agent or a
// person. Every shipped adapter is ParticipantAgent; ParticipantHuman is a
// reserved seam that nothing branches on yet.
type ParticipantKind string

// Participant kinds.
const (
	ParticipantAgent ParticipantKind = "agent"
	ParticipantHuman ParticipantKind = "human"
)

// Valid reports whether k is one of the defined participant kinds.
func (k ParticipantKind) Valid() bool { return k == ParticipantAgent || k == ParticipantHuman }

// RuntimeClass is how a runtime composes with the host.
type RuntimeClass string

// Runtime classes. The zero value means ClassWrappedOneshot, the
// conservative spawn-per-run path.
const (
	ClassWrappedOneshot     RuntimeClass = "wrapped-oneshot"
	ClassConnectedSubstrate RuntimeClass = "connected-substrate"
	ClassNative             RuntimeClass = "native"
)

// HomeScope is the scope of a runtime's native home directory claim.
type HomeScope string

// Home scopes.
const (
	HomePerIdentity HomeScope = "per-identity"
	HomePerRun      HomeScope = "per-run"
)

// NativeHomeClaim is an adapter's claim about the home directory its runtime
// accrues state in. The adapter never computes a path; the host materializes
// the directory from the claim.
type NativeHomeClaim struct {
	Scope   HomeScope `json:"scope"`
	Persist bool      `json:"persist"`
}

// Preservation says whether a runtime's on-disk skills or memory survive
// across runs. The zero value means the claim is absent, which is treated as
// PreserveNone.
type Preservation string

// Preservation claims.
const (
	Preserve     Preservation = "preserve"
	PreserveNone Preservation = "none"
)

// ChannelOwner says whether a runtime owns its own delivery channels. The
// zero value means the claim is absent, which is treated as ChannelsNone.
type ChannelOwner string

// Channel ownership claims.
const (
	ChannelsGateway ChannelOwner = "gateway"
	ChannelsNone    ChannelOwner = "none"
)

// Capabilities is the declarative profile of a runtime: the base flags plus
// the optional native-preservation claims. Every optional field's zero value
// is the conservative default, so an adapter that leaves them unset resolves
// to the plain one-shot integration.
type Capabilities struct {
	Streaming    bool `json:"streaming"`    // emits incremental text deltas
	MCP          bool `json:"mcp"`          // can discover and call MCP tool servers
	Worktrees    bool `json:"worktrees"`    // runs work in isolated git worktrees
	Resume       bool `json:"resume"`       // can resume a prior session from a serialized handle
	ToolApproval bool `json:"toolApproval"` // the runtime can surface tool-approval gates
	// Steerable reports that WriteContext reaches the model mid-run.
	Steerable bool `json:"steerable,omitempty"`
	// Models lists model ids the runtime can use; empty when unknown.
	Models []string `json:"models"`
	// ContextWindowTokens is the context window when known; 0 leaves the
	// rotation watermark inert.
	ContextWindowTokens int64 `json:"contextWindowTokens,omitempty"`

	// RuntimeClass is how the runtime composes with the host; empty means
	// ClassWrappedOneshot (see Class).
	RuntimeClass    RuntimeClass     `json:"runtimeClass,omitempty"`
	NativeHome      *NativeHomeClaim `json:"nativeHome,omitempty"`
	NativeSkills    Preservation     `json:"nativeSkills,omitempty"`
	NativeMemory    Preservation     `json:"nativeMemory,omitempty"`
	NativeChannels  ChannelOwner     `json:"nativeChannels,omitempty"`
	NativeScheduler bool             `json:"nativeScheduler,omitempty"` // informational only
}

// Class returns the runtime class with the default applied.
func (c Capabilities) Class() RuntimeClass {
	if c.RuntimeClass == "" {
		return ClassWrappedOneshot
	}
	return c.RuntimeClass
}

// Health is the verdict of a health check. Message says what is wrong (or
// what was found) in words an operator can act on.
type Health struct {
	OK      bool   `json:"ok"`
	Message string `json:"message,omitempty"`
}

// HealthTimeout bounds a health check: the contract requires an answer
// within it, and CheckHealth enforces it.
const HealthTimeout = 2 * time.Second

// CheckHealth runs a.Health under HealthTimeout and reports a timeout as an
// unhealthy verdict. It blocks at most HealthTimeout (or until ctx ends); a
// Health call that ignores its context keeps running in the background
// until it returns.
func CheckHealth(ctx context.Context, a Identity) Health {
	ctx, cancel := context.WithTimeout(ctx, HealthTimeout)
	defer cancel()
	ch := make(chan Health, 1)
	go func() { ch <- a.Health(ctx) }()
	select {
	case h := <-ch:
		if ctx.Err() == nil {
			return h
		}
	case <-ctx.Done():
	}
	// An answer that only came once the bound expired counts as a timeout.
	return Health{OK: false, Message: "health check timed out"}
}

// Task carries optional references to the board task a run belongs to, so
// an adapter can run board-backed or ad hoc.
type Task struct {
	TaskID string
	TeamID string
}

// StartOptions describe one run. Zero values are documented defaults.
type StartOptions struct {
	// AgentID is the runtime-side actor (for OpenClaw, the agent id).
	AgentID string
	// SessionKey is the session the run belongs to. Required.
	SessionKey string
	// Message is the run's opening message. Required.
	Message string
	// Model selects a model; empty leaves the runtime's default.
	Model string
	// Context is delivered ahead of Message (joined with a blank line).
	Context string
	// ChildToolBlocklist names tools the run must not use. It is advisory
	// for runtimes that cannot restrict tools per run; the host enforces the
	// real guarantee out of band.
	ChildToolBlocklist []string
	// Resume names a native session to continue; empty starts fresh.
	// Honoured by runtimes whose capabilities report Resume.
	Resume string
	// Cwd is the working directory of subprocess runtimes; empty means the
	// adapter's configured default.
	Cwd string
}

// Prompt returns the text a runtime receives: Context, a blank line, then
// Message; just Message when Context is empty.
func (o StartOptions) Prompt() string {
	if o.Context == "" {
		return o.Message
	}
	return o.Context + "\n\n" + o.Message
}

// ErrNoSession is returned when an operation names a run whose session the
// adapter does not know (never started, or already forgotten).
var ErrNoSession = errors.New("executor: no such session")

// Identity is the part of a runtime adapter that describes it.
type Identity interface {
	// ID names the runtime; non-empty.
	ID() RuntimeID
	// ParticipantKind is ParticipantAgent for every shipped adapter.
	ParticipantKind() ParticipantKind
	// Capabilities returns the runtime's declarative profile.
	Capabilities() Capabilities
	// Health checks whether the runtime can run now (binary present,
	// gateway reachable). It must answer within HealthTimeout.
	Health(ctx context.Context) Health
}

// Runner starts runs and observes their normalized events.
type Runner interface {
	// Start delivers the run's opening message and returns a handle whose
	// run id is not yet bound; it binds late, from the first native frame.
	Start(ctx context.Context, task Task, opts StartOptions) (*RunHandle, error)
	// Events subscribes to the normalized stream of run's session before
	// returning, so nothing emitted after Events returns is lost, and events
	// the runtime produced before the first subscription are replayed to it.
	// The stream is a continuous observer: done and error events do not
	// necessarily end it. The consumer stops it with Stream.Close, which
	// releases the subscription. For a one-shot runtime the stream also ends
	// (io.EOF after draining) when the process has exited.
	Events(ctx context.Context, run *RunHandle) (*Stream, error)
	// Abort cancels the live run. The stream reports it as done: aborted.
	Abort(ctx context.Context, run *RunHandle) error
}

// Controller holds the side-effecting controls a host applies to a run.
type Controller interface {
	// SetModel switches the model of run's session (for runtimes that fix
	// the model at start, it applies to the next run of the session).
	SetModel(ctx context.Context, run *RunHandle, model string) error
	// WriteContext writes the context entry key (a file name such as
	// AGENTS.md) with value for run's session.
	WriteContext(ctx context.Context, run *RunHandle, key, value string) error
}

// RuntimeAdapter is the interface every runtime implements and every
// consumer codes against. Optional members are separate interfaces a host
// discovers by type assertion: SessionCodec and Disposer.
type RuntimeAdapter interface {
	Identity
	Runner
	Controller
}

// SessionCodec is implemented by adapters that can serialize a run's
// session to a blob and restore a handle from it (the resume primitive).
type SessionCodec interface {
	SerializeSession(ctx context.Context, run *RunHandle) (string, error)
	RestoreSession(ctx context.Context, blob string) (*RunHandle, error)
}

// Disposer is implemented by adapters holding adapter-level resources.
// Dispose releases them; it is idempotent.
type Disposer interface {
	Dispose(ctx context.Context) error
}
