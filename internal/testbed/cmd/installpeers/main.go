// Command installpeers installs the pinned npm-installed peers that the
// end-to-end tests run against (see package peers) into the cache directory
// ($CLAWCONNECT_CACHE, default ~/.cache/clawconnect), reusing what is there.
// scripts/setup/peers.sh runs it.
//
// Usage:
//
//	go run ./internal/testbed/cmd/installpeers [-v] [peer ...]
//
// With no peer named it installs all of them: node, openclaw, claude-code,
// codex, mcp-inspector, mcp-sdk, mcp-ext-tasks, mcp-ext-apps.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/clawconnect/clawconnect/internal/testbed/peers"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "installpeers:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("installpeers", flag.ContinueOnError)
	fs.SetOutput(stderr)
	verbose := fs.Bool("v", false, "show npm's output")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ids := peers.All()
	if fs.NArg() > 0 {
		ids = ids[:0]
		for _, a := range fs.Args() {
			ids = append(ids, peers.ID(a))
		}
	}
	opts := peers.Options{Logger: slog.New(slog.NewTextHandler(stderr, nil))}
	if *verbose {
		opts.Output = stderr
	}
	in, err := peers.NewInstaller(opts)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := in.Ensure(ctx, ids...); err != nil {
		return err
	}
	for _, id := range ids {
		s, _ := id.Spec()
		fmt.Fprintf(stdout, "%-14s %s@%s  %s\n", id, s.Package, s.Version, in.Dir(id))
	}
	fmt.Fprintf(stdout, "peers ready in %.1fs\n", time.Since(start).Seconds())
	return nil
}
