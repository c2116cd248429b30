// Package taskapi is the public vocabulary between ClawConnect's MCP server
// and the task service behind it: the JSON shapes of the task tools'
// results, the not-found sentinel and messages, the agent directory with
// its connection scopes, and the identity a caller authenticated as. It
// depends on the standard library only, so a host that embeds the server
// with its own task service links neither ClawConnect's store nor its
// gateway client. The internal task manager uses these same types (by
// alias), so what a host returns is exactly what the bundled bridge returns.
package taskapi
