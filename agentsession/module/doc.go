// Package module is the runtime-module protocol (version 1): how an operator
// registers agent-session runtimes in a ClawConnect binary without
// recompiling it.
//
// A runtime module is an executable that speaks JSON-RPC 2.0 over its stdin
// and stdout, one JSON object per line; its stderr is free-form log text.
// The operator names modules in CLAWCONNECT_AGENT_SESSION_RUNTIME_MODULES
// (same trust level as agents.json; never influenced by a caller or an
// agent). The protocol is specified in docs/runtime-modules.md.
//
// The package has two sides:
//
//   - [Load], for the host: parse the variable's value, spawn each module,
//     ask it to describe its runtimes, and register a proxy for each into a
//     given [agentsession.Registry]. It never fails startup: a module that
//     cannot be started, answers badly or crashes is logged and skipped. A
//     module that exits later is restarted on the next call, with backoff.
//   - [Serve], for module authors: serve an [agentsession.Registry] over
//     the protocol, so a Go module is a main that registers its runtime and
//     calls Serve on os.Stdin and os.Stdout.
package module
