// Package executor is the seam through which a host drives heterogeneous
// agent runtimes (OpenClaw, Claude Code, Codex, ...) and receives one
// normalized event stream.
//
// It defines the [RuntimeAdapter] interface every runtime implements, the
// seven-kind [Event] union with its common envelope, the [Registry] of
// available adapters, the drop-oldest [Queue] and the [Stream] adapters emit
// into, the prompt tiers that keep a provider's prefix cache warm
// ([AssembleTiers], [SortToolDefs], [DateStamp]), session rotation
// ([ShouldRotate], [RotateSession]) and the capability-driven integration
// plan ([ResolveIntegration]).
//
// Who calls what: the bundled command `clawconnect exec` drives one run of
// one adapter per invocation (Registry, Start, the Event stream), and the
// bundled adapters call none of the helpers above. The prompt tiers, the
// rotation helpers ([RotationFor], [RotateSession]) and
// [ResolveIntegration] are for a host that embeds this package and keeps
// long-lived sessions of its own (an orchestrator that assembles system
// prompts, rotates a session when its context fills, and chooses how to
// integrate a runtime from its Capabilities); this package's tests pin
// them.
//
// The package is pure: it starts no processes and opens no connections, and
// importing it does not pull in the testing package. The conformance suite
// every adapter passes lives in the executor/contract subpackage.
package executor
