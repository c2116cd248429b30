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
// The package is pure: it starts no processes and opens no connections, and
// importing it does not pull in the testing package. The conformance suite
// every adapter passes lives in the executor/contract subpackage.
package executor
