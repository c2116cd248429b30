// Package e2e drives the clawconnect binary with real MCP clients — the MCP
// Inspector CLI and the TypeScript SDK, installed from npm by the testbed —
// over stdio (clawconnect mcp) and streamable HTTP (clawconnect serve),
// against a real OpenClaw gateway. Its tests run only with
// CLAWCONNECT_E2E=1; the package has no code of its own.
package e2e
