package config

import "github.com/clawconnect/clawconnect/taskapi"

// DefaultServerName is the MCP server name when no single labelled group
// names the connection.
const DefaultServerName = taskapi.DefaultServerName

// Scope is the set of agents one connection may use (taskapi.Scope).
type Scope = taskapi.Scope
