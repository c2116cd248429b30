package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/testbed/peers"
	"github.com/clawconnect/clawconnect/internal/testbed/poll"
	"github.com/clawconnect/clawconnect/internal/testbed/realgateway"
)

func TestParseFlags(t *testing.T) {
	tests := []struct {
		args    []string
		want    config
		wantErr bool
	}{
		{nil, config{}, false},
		{[]string{"-port", "18789", "-token", "t", "-dir", "d", "-env-file", "e"}, config{port: 18789, token: "t", dir: "d", envFile: "e"}, false},
		{[]string{"-plugin", "p", "-plugin-binary", "b", "-plugin-home", "h"}, config{plugin: "p", pluginBinary: "b", pluginHome: "h"}, false},
		{[]string{"-plugin-binary", "b"}, config{}, true},
		{[]string{"-port", "70000"}, config{}, true},
		{[]string{"extra"}, config{}, true},
		{[]string{"-nope"}, config{}, true},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			got, err := parseFlags(tt.args, io.Discard)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err == nil {
				if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(config{})); diff != "" {
					t.Errorf("config (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestEnvFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "env")
	if err := peers.WriteEnvFile(path, envLines("ws://127.0.0.1:1", "tok", 42)); err != nil {
		t.Fatal(err)
	}
	got := readEnv(t, path)
	want := map[string]string{"OPENCLAW_URL": "ws://127.0.0.1:1", "OPENCLAW_GATEWAY_TOKEN": "tok",
		"OPENCLAW_PASSWORD": "tok", "OPENCLAW_AGENT_ID": "main", "CLAWCONNECT_LOCAL_GATEWAY_PID": "42"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("env file (-want +got):\n%s", diff)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("env file mode: %v %v", fi.Mode(), err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
}

func readEnv(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), "=")
		m[k] = v
	}
	return m
}

// TestRealLocalGateway runs the command as scripts/local-gateway.sh
// --background does: it waits for the env file, connects with what it
// says, then interrupts the command and checks the file is gone.
func TestRealLocalGateway(t *testing.T) {
	peers.RequireE2E(t)
	envFile := filepath.Join(t.TempDir(), "env")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out strings.Builder
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-env-file", envFile}, &out, io.Discard) }()

	if !poll.WithinEvery(5*time.Minute, 200*time.Millisecond, func() bool {
		if _, err := os.Stat(envFile); err == nil {
			return true
		}
		select {
		case err := <-done:
			t.Fatalf("localgateway exited before it was ready: %v", err)
		default:
		}
		return false
	}) {
		t.Fatal("no env file after 5 minutes")
	}
	env := readEnv(t, envFile)
	dctx, dcancel := context.WithTimeout(t.Context(), time.Minute)
	defer dcancel()
	p, err := realgateway.DialProbe(dctx, env["OPENCLAW_URL"], env["OPENCLAW_GATEWAY_TOKEN"])
	if err != nil {
		t.Fatalf("connect with the env file's values: %v", err)
	}
	p.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("localgateway: %v", err)
	}
	if _, err := os.Stat(envFile); !os.IsNotExist(err) {
		t.Errorf("env file still there after exit: %v", err)
	}
	for _, want := range []string{"export OPENCLAW_URL=" + env["OPENCLAW_URL"], "export OPENCLAW_GATEWAY_TOKEN=", "Ctrl-C"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestClawconnectPlugin(t *testing.T) {
	t.Parallel()
	if _, err := clawconnectPlugin(config{plugin: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "plugins/openclaw") {
		t.Errorf("a directory without the manifest: %v, want an error naming plugins/openclaw", err)
	}
	dir := filepath.Join("..", "..", "..", "..", "plugins", "openclaw", "plugin")
	p, err := clawconnectPlugin(config{plugin: dir, pluginBinary: "/bin/cc", pluginHome: "/h"})
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(dir)
	want := realgateway.Plugin{ID: "clawconnect", Dir: abs, Config: map[string]any{"binary": "/bin/cc", "home": "/h"}}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Errorf("plugin (-want +got):\n%s", diff)
	}
}
