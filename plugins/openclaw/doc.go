// Package openclaw holds ClawConnect's OpenClaw plugin, plain ESM JavaScript
// without dependencies (index.mjs, lib/, openclaw.plugin.json), and the Go
// tests that run its node tests and load it into a real gateway. The
// directory is what `openclaw plugins install` or plugins.load.paths takes.
package openclaw

import (
	"path/filepath"
	"runtime"
)

// Dir returns the plugin's directory in the source tree.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}
