// Command localgateway starts a local OpenClaw gateway backed by the
// project's fake model server, for trying ClawConnect without an OpenClaw
// account or any network: it installs Node 24 and OpenClaw into the cache
// if needed, starts the gateway on 127.0.0.1, prints its URL, token and the
// environment lines ClawConnect reads, and runs until interrupted.
//
// Usage:
//
//	go run ./internal/testbed/cmd/localgateway [flags]
//
//	-port N        gateway port (default: a free port)
//	-token T       gateway token (default: random)
//	-dir DIR       keep config, state and logs in DIR (default: a temporary
//	               directory, removed on exit)
//	-env-file F    once ready, write the environment lines to F (KEY=value,
//	               sourceable with `set -a; . F`); removed again on exit
//	-plugin DIR    also load the ClawConnect OpenClaw plugin from DIR
//	               (plugins/openclaw/plugin), its tools offered by name
//	-plugin-binary B, -plugin-home H
//	               the plugin's binary and home settings (default:
//	               clawconnect on PATH, ~/.clawconnect)
//
// Replies come from the fake model: "FAKE-REPLY: <prompt>" by default, and
// the trigger words of package fakemodel (ECHO=<token>, SLOW, FAIL400, …)
// script them. scripts/local-gateway.sh wraps this command, also in the
// background.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/clawconnect/clawconnect/internal/testbed/peers"
	"github.com/clawconnect/clawconnect/internal/testbed/realgateway"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "localgateway:", err)
		os.Exit(1)
	}
}

// config is the parsed command line.
type config struct {
	port         int
	token        string
	dir          string
	envFile      string
	plugin       string
	pluginBinary string
	pluginHome   string
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("localgateway", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&c.port, "port", 0, "gateway port on 127.0.0.1 (default: a free port)")
	fs.StringVar(&c.token, "token", "", "gateway auth token (default: random)")
	fs.StringVar(&c.dir, "dir", "", "directory for config, state and logs (default: temporary, removed on exit)")
	fs.StringVar(&c.envFile, "env-file", "", "write the environment lines to this file once ready (removed on exit)")
	fs.StringVar(&c.plugin, "plugin", "", "also load the ClawConnect plugin from this directory (plugins/openclaw/plugin)")
	fs.StringVar(&c.pluginBinary, "plugin-binary", "", "the plugin's binary setting: the clawconnect it runs (default: clawconnect on PATH)")
	fs.StringVar(&c.pluginHome, "plugin-home", "", "the plugin's home setting: its CLAWCONNECT_HOME (default ~/.clawconnect)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if c.port < 0 || c.port > 65535 {
		return c, fmt.Errorf("-port %d: out of range", c.port)
	}
	if c.plugin == "" && (c.pluginBinary != "" || c.pluginHome != "") {
		return c, errors.New("-plugin-binary and -plugin-home configure the plugin: give its directory with -plugin plugins/openclaw/plugin too")
	}
	return c, nil
}

// envLines are the variables a ClawConnect process needs to use gw.
// OPENCLAW_PASSWORD carries the token too: ClawConnect sends the agent's
// secret as both auth.token and auth.password.
func envLines(url, token string, pid int) string {
	return "OPENCLAW_URL=" + url + "\n" +
		"OPENCLAW_GATEWAY_TOKEN=" + token + "\n" +
		"OPENCLAW_PASSWORD=" + token + "\n" +
		"OPENCLAW_AGENT_ID=main\n" +
		"CLAWCONNECT_LOCAL_GATEWAY_PID=" + strconv.Itoa(pid) + "\n"
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	if c.envFile != "" {
		if c.envFile, err = filepath.Abs(c.envFile); err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(c.envFile), 0o755); err != nil {
			return err
		}
		_ = os.Remove(c.envFile) // a stale file must not look like a ready gateway
	}
	if c.dir != "" {
		if err := os.MkdirAll(c.dir, 0o755); err != nil {
			return err
		}
	}
	opts := realgateway.Options{Port: c.port, Token: c.token, Dir: c.dir, Logger: logger}
	if c.plugin != "" {
		p, err := clawconnectPlugin(c)
		if err != nil {
			return err
		}
		opts.Plugins, opts.ToolSearchOff = []realgateway.Plugin{p}, true
	}
	fmt.Fprintln(stderr, "starting a local OpenClaw gateway (installs Node 24 and OpenClaw on first use; the start takes 15-60 s)...")
	gw, err := realgateway.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(stderr, "stopping the gateway...")
		if err := gw.Close(); err != nil {
			fmt.Fprintln(stderr, "localgateway: stop:", err)
		}
	}()
	env := envLines(gw.URL(), gw.Token(), os.Getpid())
	if c.envFile != "" {
		if err := peers.WriteEnvFile(c.envFile, env); err != nil {
			return fmt.Errorf("write env file: %w", err)
		}
		defer os.Remove(c.envFile)
	}
	fmt.Fprintf(stdout, `OpenClaw gateway ready in %s
  URL:    %s
  token:  %s
  model:  fake model at %s (reply "FAKE-REPLY: <prompt>"; ECHO=<word> replies <word>)
  files:  %s (gateway log gateway.out, model requests model-requests.jsonl)

Environment for clawconnect:
`, gw.StartDuration().Round(100*time.Millisecond), gw.URL(), gw.Token(), gw.ModelServer().URL(), gw.Dir())
	for _, line := range []string{"OPENCLAW_URL=" + gw.URL(), "OPENCLAW_GATEWAY_TOKEN=" + gw.Token(),
		"OPENCLAW_PASSWORD=" + gw.Token(), "OPENCLAW_AGENT_ID=main"} {
		fmt.Fprintln(stdout, "  export "+line)
	}
	if c.envFile != "" {
		fmt.Fprintf(stdout, "(also written to %s)\n", c.envFile)
	}
	fmt.Fprintln(stdout, "\nPress Ctrl-C to stop.")
	select {
	case <-ctx.Done():
		return nil
	case <-gw.Exited():
		if out, err := os.ReadFile(gw.LogPath()); err == nil {
			stderr.Write(lastBytes(out, 4000))
		}
		return errors.New("the gateway process exited on its own")
	}
}

// clawconnectPlugin is the ClawConnect plugin of c: its directory, which
// must hold the plugin's manifest, and its config.
func clawconnectPlugin(c config) (realgateway.Plugin, error) {
	dir, err := filepath.Abs(c.plugin)
	if err != nil {
		return realgateway.Plugin{}, fmt.Errorf("-plugin: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "openclaw.plugin.json")); err != nil {
		return realgateway.Plugin{}, fmt.Errorf("-plugin %s: no openclaw.plugin.json there; give the repository's plugins/openclaw/plugin directory", c.plugin)
	}
	cfg := map[string]any{}
	if c.pluginBinary != "" {
		cfg["binary"] = c.pluginBinary
	}
	if c.pluginHome != "" {
		cfg["home"] = c.pluginHome
	}
	return realgateway.Plugin{ID: "clawconnect", Dir: dir, Config: cfg}, nil
}

func lastBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
