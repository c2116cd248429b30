// Command clawconnect connects AI clients to agent runtimes: an MCP server
// in front of OpenClaw Gateway agents, an executor over OpenClaw, Claude Code
// and Codex, and the agent-session seam. See the README for the quick start.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	_ "github.com/clawconnect/clawconnect/cmd/clawconnect/internal/oneproc" // mcp on one P from the first inits on
	"github.com/clawconnect/clawconnect/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := cli.Run(ctx, cli.Env{
		Args:    os.Args[1:],
		Stdin:   os.Stdin,
		Stdout:  os.Stdout,
		Stderr:  os.Stderr,
		Getenv:  os.Getenv,
		Environ: os.Environ,
		// The command owns this process: mcp tunes the runtime for it.
		OwnProcess: true,
	})
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "clawconnect:", err)
		os.Exit(cli.ExitCode(err))
	}
}
