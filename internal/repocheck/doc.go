// Package repocheck holds repository-wide tests that keep the project's
// habits true: every package documented, and the agent-session boundary
// free of runtime-specific code. It has no code of its own.
package repocheck
