// Package oneproc puts a `clawconnect mcp` process on one P (GOMAXPROCS 1)
// while the program's packages are still initializing, unless GOMAXPROCS
// is set. The mcp command itself asks for one P too (internal/cli, where
// the reason is); this package only makes that happen earlier, which is
// its one job, and main imports it for that alone.
//
// Earlier is cheaper. Go initializes packages in import-path order as soon
// as their imports are ready, so this package, which imports only the
// standard library's os and runtime, runs right after os, before the
// module's dependencies (Prometheus, go-sdk, pgx, SQLite). Changing
// GOMAXPROCS stops the world and frees the second P's allocation cache:
// in the mcp command, after every package's init had allocated through it,
// that took a median of ~0.4 ms of a start; here it finds the cache nearly
// empty (~0.2 ms), and the rest of the start runs on one P without waking
// a second thread for each new goroutine. TestInitializesBeforeDependencies
// keeps the import path where it has to be.
package oneproc

import (
	"os"
	"runtime"
)

func init() {
	if applies(os.Args[1:], os.Getenv) {
		runtime.GOMAXPROCS(1)
	}
}

// applies reports whether the command line args (after the program name)
// runs mcp in a process whose GOMAXPROCS the user did not choose. The
// root command has no flags of its own, so mcp runs only as the first
// argument.
func applies(args []string, getenv func(string) string) bool {
	return len(args) > 0 && args[0] == "mcp" && getenv("GOMAXPROCS") == ""
}
