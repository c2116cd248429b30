// Command local-tmux-runtime is an example agent-session runtime module: it
// serves runtime "claude-fleet" (provider "anthropic-claude-code") over the
// runtime-module protocol, reporting a session as alive while its tmux
// session exists and, once the pane has ended, reading the session's final
// answer from the transcript its fleet home points to.
//
// An operator wires it into ClawConnect with
//
//	CLAWCONNECT_AGENT_SESSION_RUNTIME_MODULES="/path/to/local-tmux-runtime -fleet-home /path/to/fleet"
//
// See README.md. It is an example of a module as an operator would write
// one: ClawConnect itself knows nothing about it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/clawconnect/clawconnect/agentsession"
	"github.com/clawconnect/clawconnect/agentsession/module"
)

// RuntimeID is the runtime id this module registers.
const RuntimeID = "claude-fleet"

// Provider is the provider of the sessions it serves.
const Provider = "anthropic-claude-code"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "local-tmux-runtime:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("local-tmux-runtime", flag.ContinueOnError)
	home, _ := os.UserHomeDir()
	fleetHome := fs.String("fleet-home", filepath.Join(home, ".claude-fleet"), "directory holding <handle>/meta.json for each session")
	tmuxBin := fs.String("tmux", "tmux", "tmux executable")
	socket := fs.String("tmux-socket", "", "tmux socket name (tmux -L); empty uses the default server")
	if err := fs.Parse(args); err != nil {
		return err
	}
	tmux := []string{*tmuxBin}
	if *socket != "" {
		tmux = append(tmux, "-L", *socket)
	}
	reg := agentsession.NewRegistry()
	if err := Register(reg, Fleet{Home: *fleetHome, Tmux: tmux}); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "serving runtime %s for fleet home %s\n", RuntimeID, *fleetHome)
	return module.Serve(ctx, reg, os.Stdin, os.Stdout)
}

// Register registers the claude-fleet runtime, inspect only: there is no
// continue or detach, so ClawConnect answers those with
// unsupported_operation.
func Register(reg *agentsession.Registry, f Fleet) error {
	return reg.Register(agentsession.Runtime{ID: RuntimeID, Provider: Provider, Inspect: f.Inspect})
}
