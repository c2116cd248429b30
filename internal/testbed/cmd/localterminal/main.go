// Command localterminal starts Codex and Claude Code, each in a tmux pane of
// its own private tmux server and backed by the project's fake model, for
// trying ClawConnect's terminal Turns without an account or any network:
// it installs the CLIs into the cache if needed, answers their start-up
// dialogs, prints the environment lines that point clawconnect at those
// panes (and only those), and runs until interrupted, then stops both.
//
// Usage:
//
//	go run ./internal/testbed/cmd/localterminal [flags]
//
//	-agents LIST   which agents to start: codex, claude-code or both
//	               (default "codex,claude-code")
//	-env-file F    once ready, write the environment lines to F (KEY=value,
//	               sourceable with `set -a; . F`; default
//	               $CLAWCONNECT_CACHE/localterminal.env); removed on exit
//
// A request typed into a pane is answered "FAKE-REPLY: <request>"; the
// trigger words of package fakemodel (ECHO=<word>, SLOW, ...) script it.
// The agents are started so that they ask: Claude Code in its default
// permission mode (a Bash call shows its permission dialog), Codex with
// request_user_input offered outside Plan mode; so "TOOLCALL: ESCALATE
// <cmd>" (Codex) or "TOOLCALL: <cmd>" (Claude Code) asks for approval and
// "QUESTION: <text> | <option> | <option>" asks a question in either.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/peers"
	"github.com/clawconnect/clawconnect/internal/testbed/realcli"
	"github.com/clawconnect/clawconnect/internal/testbed/realtui"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "localterminal:", err)
		os.Exit(1)
	}
}

// config is the parsed command line.
type config struct {
	agents  []realcli.Kind
	envFile string
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	var agents string
	fs := flag.NewFlagSet("localterminal", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&agents, "agents", "codex,claude-code", "agents to start, comma-separated: codex, claude-code")
	fs.StringVar(&c.envFile, "env-file", "", "write the environment lines to this file once ready (default $CLAWCONNECT_CACHE/localterminal.env; removed on exit)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q: the only flags are -agents and -env-file", fs.Args())
	}
	seen := map[realcli.Kind]bool{}
	for _, a := range strings.Split(agents, ",") {
		k := realcli.Kind(strings.TrimSpace(a))
		if k != realcli.Codex && k != realcli.ClaudeCode {
			return c, fmt.Errorf("-agents: unknown agent %q: use codex, claude-code or codex,claude-code", a)
		}
		if !seen[k] {
			seen[k] = true
			c.agents = append(c.agents, k)
		}
	}
	return c, nil
}

// envLines are the variables that point a clawconnect process at the
// panes' tmux servers and at nothing else.
func envLines(sockets []string) string {
	return "CLAWCONNECT_TMUX_SOCKETS=" + strings.Join(sockets, ",") + "\n" +
		"CLAWCONNECT_TMUX_DEFAULT_SERVER=off\n"
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if c.envFile == "" {
		cache, err := peers.DefaultCacheDir()
		if err != nil {
			return err
		}
		c.envFile = filepath.Join(cache, "localterminal.env")
	}
	if c.envFile, err = filepath.Abs(c.envFile); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(c.envFile), 0o755); err != nil {
		return fmt.Errorf("env file: %w", err)
	}
	_ = os.Remove(c.envFile) // a stale file must not point at panes that are gone

	model, err := fakemodel.Start(ctx, fakemodel.Options{})
	if err != nil {
		return fmt.Errorf("start the fake model: %w", err)
	}
	defer model.Close()

	var tuis []*realtui.TUI
	defer func() {
		for _, t := range tuis {
			if err := t.Close(); err != nil {
				fmt.Fprintln(stderr, "localterminal: stop:", err)
			}
			_ = t.CLI.Close()
		}
	}()
	start := time.Now()
	for _, kind := range c.agents {
		fmt.Fprintf(stderr, "starting %s in a private tmux server (installs it into the cache on first use)...\n", kind)
		tui, err := startOne(ctx, kind, model)
		if err != nil {
			return err
		}
		tuis = append(tuis, tui)
	}
	var sockets []string
	for _, t := range tuis {
		sockets = append(sockets, t.Socket)
	}
	env := envLines(sockets)
	if err := peers.WriteEnvFile(c.envFile, env); err != nil {
		return fmt.Errorf("write env file: %w", err)
	}
	defer os.Remove(c.envFile)

	fmt.Fprintf(stdout, "Agents ready in %s, on the fake model at %s (a request is answered \"FAKE-REPLY: <request>\"):\n",
		time.Since(start).Round(100*time.Millisecond), model.URL())
	for _, t := range tuis {
		fmt.Fprintf(stdout, "  %-12s pane %s   watch it: tmux -S %s attach   (detach: Ctrl-b d)\n", t.CLI.Kind, t.Pane, t.Socket)
	}
	fmt.Fprintf(stdout, "\nEnvironment for clawconnect (written to %s):\n", c.envFile)
	for _, line := range strings.Split(strings.TrimSpace(env), "\n") {
		fmt.Fprintln(stdout, "  export "+line)
	}
	fmt.Fprintln(stdout, "\nPress Ctrl-C to stop.")
	<-ctx.Done()
	fmt.Fprintln(stderr, "stopping the agents...")
	return nil
}

// askingArgs start kind in a mode that asks the user: Claude Code's
// default permission mode (its Bash calls ask for approval), Codex with its
// user-input dialog enabled outside Plan mode (the feature the terminal
// readers name codex.QuestionFeature; without it request_user_input only
// answers the model that it is unavailable in Default mode). Codex's
// default approval policy already asks for an escalated command.
func askingArgs(kind realcli.Kind) []string {
	if kind == realcli.ClaudeCode {
		return []string{"--permission-mode", "default"}
	}
	return []string{"--enable", "default_mode_request_user_input"}
}

// startOne prepares kind against model and starts its TUI, ready for a
// request. On error it stops what it started.
func startOne(ctx context.Context, kind realcli.Kind, model *fakemodel.Server) (*realtui.TUI, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute) // a first install downloads the CLI
	defer cancel()
	cli, err := realcli.Prepare(ctx, kind, realcli.Options{ModelServer: model})
	if err != nil {
		return nil, fmt.Errorf("prepare %s: %w", kind, err)
	}
	tui, err := realtui.Start(ctx, cli, realtui.Options{Args: askingArgs(kind)})
	if err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("start %s: %w", kind, err)
	}
	if _, err := tui.WaitReady(ctx); err != nil {
		_ = tui.Close()
		_ = cli.Close()
		if errors.Is(err, context.Canceled) {
			return nil, err
		}
		return nil, fmt.Errorf("%s did not reach its idle composer: %w", kind, err)
	}
	return tui, nil
}
