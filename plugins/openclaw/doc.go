// Package openclaw holds ClawConnect's OpenClaw plugin, plain ESM JavaScript
// without dependencies, and the Go tests that run its node tests and load
// it into a real gateway. The plugin is the plugin/ folder (index.mjs, lib/,
// openclaw.plugin.json, package.json): what `openclaw plugins install` or
// plugins.load.paths takes; the tests beside it are never installed.
package openclaw

import (
	"path/filepath"
	"runtime"
)

// Dir returns the plugin's directory in the source tree: the folder an
// OpenClaw installs, holding only what runs.
func Dir() string { return filepath.Join(srcDir(), "plugin") }

// srcDir is this package's directory (the plugin folder and its tests).
func srcDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}
