package module

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/agentsession"
)

func TestParseSpec(t *testing.T) {
	got := parseSpec(" /abs/mod --flag x ,\n\n rel/mod,./dot  \n, ", "/base")
	want := []entry{
		{spec: "/abs/mod --flag x", path: "/abs/mod", args: []string{"--flag", "x"}},
		{spec: "rel/mod", path: "/base/rel/mod", args: []string{}},
		{spec: "./dot", path: "/base/dot", args: []string{}},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(entry{})); diff != "" {
		t.Errorf("parseSpec mismatch (-want +got):\n%s", diff)
	}
	if got := parseSpec(" ,\n ", "/"); got != nil {
		t.Errorf("blank spec = %v", got)
	}
}

func TestLoadEmptySpecRegistersNothing(t *testing.T) {
	reg := agentsession.NewRegistry()
	rec := newLogRecorder()
	l := Load(t.Context(), "", reg, LoadOptions{Logger: rec.logger()})
	defer l.Close()
	if reg.Len() != 0 || len(l.Runtimes()) != 0 || rec.all() != "" {
		t.Errorf("empty spec: %d runtimes, log %q", reg.Len(), rec.all())
	}
	var nilLoaded *Loaded
	nilLoaded.Close()
	if nilLoaded.Runtimes() != nil {
		t.Error("nil Loaded has runtimes")
	}
	if l := Load(t.Context(), "/x", nil, LoadOptions{Logger: rec.logger()}); len(l.Runtimes()) != 0 {
		t.Error("nil registry loaded something")
	}
}

// loadHelper loads the Go helper module (the test binary on Serve).
func loadHelper(t *testing.T, mode string, opts LoadOptions) (*agentsession.Registry, *Loaded, *logRecorder) {
	t.Helper()
	reg := agentsession.NewRegistry()
	rec := newLogRecorder()
	opts.Logger = rec.logger()
	opts.Env = helperEnv(mode)
	l := Load(t.Context(), helperSpec(t), reg, opts)
	t.Cleanup(l.Close)
	return reg, l, rec
}

func TestLoaderAgainstServe(t *testing.T) {
	reg, l, rec := loadHelper(t, "noisy", LoadOptions{})
	if diff := cmp.Diff([]string{"go-rt", "go-rt2"}, l.Runtimes()); diff != "" {
		t.Fatalf("runtimes mismatch (-want +got):\n%s\nlog:\n%s", diff, rec.all())
	}
	rec.waitFor(t, "registered runtime(s): go-rt, go-rt2")
	rec.waitFor(t, "helper starting up module=")
	rt, _ := reg.Get("go-rt")
	if diff := cmp.Diff(agentsession.Capabilities{Inspect: true, Continue: true}, rt.Capabilities()); diff != "" {
		t.Errorf("go-rt capabilities (-want +got):\n%s", diff)
	}
	rt2, _ := reg.Get("go-rt2")
	if diff := cmp.Diff(agentsession.Capabilities{Inspect: true, Detach: true}, rt2.Capabilities()); diff != "" {
		t.Errorf("go-rt2 capabilities (-want +got):\n%s", diff)
	}

	now := time.UnixMilli(1_700_000_000_000)
	dispatch := func(runtime, session string, req agentsession.Request, timeout time.Duration) agentsession.Status {
		ref := agentsession.Ref{Runtime: runtime, Provider: "marker-said", SessionID: session, LastKnownState: agentsession.StateStarting}
		return reg.Dispatch(t.Context(), ref, req, agentsession.CallOptions{Timeout: timeout, Now: now})
	}
	inspect := agentsession.Request{Op: agentsession.OpInspect}
	tests := []struct {
		name    string
		runtime string
		session string
		req     agentsession.Request
		check   func(t *testing.T, st agentsession.Status)
	}{
		{"inspect round trip", "go-rt", "s1", inspect, func(t *testing.T, st agentsession.Status) {
			want := agentsession.Status{Runtime: "go-rt", Provider: "go-provider", SessionID: "s1", State: "running",
				Alive: agentsession.Bool(true), LatestResponse: "hello s1", ReconciledAt: now.UnixMilli(),
				Metadata: map[string]string{"provider_seen": "go-provider", "last": "starting"}}
			if diff := cmp.Diff(want, st); diff != "" {
				t.Errorf("status mismatch (-want +got):\n%s", diff)
			}
		}},
		{"continue carries the prompt", "go-rt", "s1", agentsession.Request{Op: agentsession.OpContinue, Prompt: "next"},
			func(t *testing.T, st agentsession.Status) {
				if st.LatestResponse != "continued: next" {
					t.Errorf("%+v", st)
				}
			}},
		{"detach carries the reason", "go-rt2", "s1", agentsession.Request{Op: agentsession.OpDetach, Reason: "bye"},
			func(t *testing.T, st agentsession.Status) {
				if st.State != agentsession.StateDead || st.Detail != "detached: bye" {
					t.Errorf("%+v", st)
				}
			}},
		{"an operation not described is never sent", "go-rt", "s1", agentsession.Request{Op: agentsession.OpDetach},
			func(t *testing.T, st agentsession.Status) { wantCode(t, st, agentsession.CodeUnsupportedOperation) }},
		{"null is session_not_found", "go-rt", "missing", inspect,
			func(t *testing.T, st agentsession.Status) { wantCode(t, st, agentsession.CodeSessionNotFound) }},
		{"a JSON-RPC error is <op>_failed with its message", "go-rt", "err", inspect,
			func(t *testing.T, st agentsession.Status) {
				wantCode(t, st, "inspect_failed")
				if st.Error.Message != "the runtime is on fire" {
					t.Errorf("message %q", st.Error.Message)
				}
			}},
		{"-32601 is unsupported_operation", "go-rt", "unsupported", inspect,
			func(t *testing.T, st agentsession.Status) { wantCode(t, st, agentsession.CodeUnsupportedOperation) }},
		{"a panicking callback is an error, the module survives", "go-rt", "panic", inspect,
			func(t *testing.T, st agentsession.Status) { wantCode(t, st, "inspect_failed") }},
		{"the module sees the deadline", "go-rt", "deadline", inspect,
			func(t *testing.T, st agentsession.Status) {
				if st.Detail != "deadline=true in=true" {
					t.Errorf("detail %q", st.Detail)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.check(t, dispatch(tc.runtime, tc.session, tc.req, 10*time.Second))
		})
	}

	t.Run("deadline ends the call at the deadline", func(t *testing.T) {
		st := dispatch("go-rt", "hang", inspect, 300*time.Millisecond)
		wantCode(t, st, "inspect_timeout")
		rec.waitFor(t, "hang hang cancelled")
	})
	t.Run("a caller giving up sends cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan agentsession.Status)
		go func() {
			ref := agentsession.Ref{Runtime: "go-rt", SessionID: "hang"}
			done <- reg.Dispatch(ctx, ref, inspect, agentsession.CallOptions{Timeout: -1})
		}()
		rec.waitFor(t, "hang started deadline=false")
		cancel()
		wantCode(t, <-done, "inspect_failed")
		rec.waitFor(t, "hang hang cancelled: context canceled")
		// The module is still healthy.
		wantCode(t, dispatch("go-rt", "missing", inspect, 10*time.Second), agentsession.CodeSessionNotFound)
	})
	t.Run("concurrent calls are multiplexed", func(t *testing.T) {
		errs := make(chan string, 40)
		for i := range 40 {
			go func() {
				s := "c" + string(rune('a'+i%26))
				st := dispatch("go-rt", s, inspect, 10*time.Second)
				if st.LatestResponse != "hello "+s {
					errs <- st.LatestResponse
					return
				}
				errs <- ""
			}()
		}
		for range 40 {
			if e := <-errs; e != "" {
				t.Errorf("crossed answer: %q", e)
			}
		}
	})
	t.Run("a crash fails the call and the next call restarts", func(t *testing.T) {
		st := dispatch("go-rt", "crash", inspect, 10*time.Second)
		wantCode(t, st, "inspect_failed")
		if !strings.Contains(st.Error.Message, "module exited") {
			t.Errorf("message %q", st.Error.Message)
		}
		rec.waitFor(t, "runtime module exited")
	})
}

// TestLoaderRestartBackoff proves a crashed module is restarted on the next
// call only after its backoff, and that calls in the window fail fast.
func TestLoaderRestartBackoff(t *testing.T) {
	for _, tc := range []struct {
		name    string
		backoff time.Duration
		want    agentsession.ErrorCode
		msg     string
	}{
		{"inside the backoff window the call fails fast", time.Hour, "inspect_failed", "restarting"},
		{"after the backoff the module is restarted", time.Nanosecond, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg, _, rec := loadHelper(t, "basic", LoadOptions{RestartBackoff: tc.backoff})
			ref := agentsession.Ref{Runtime: "go-rt", SessionID: "crash"}
			opts := agentsession.CallOptions{Timeout: 10 * time.Second}
			wantCode(t, reg.Dispatch(t.Context(), ref, agentsession.Request{Op: agentsession.OpInspect}, opts), "inspect_failed")
			rec.waitFor(t, "runtime module exited")
			ref.SessionID = "s2"
			st := reg.Dispatch(t.Context(), ref, agentsession.Request{Op: agentsession.OpInspect}, opts)
			if tc.want == "" {
				if st.Error != nil || st.LatestResponse != "hello s2" {
					t.Fatalf("after restart: %+v\n%s", st, rec.all())
				}
				rec.waitFor(t, "runtime module restarted")
				return
			}
			wantCode(t, st, tc.want)
			if !strings.Contains(st.Error.Message, tc.msg) {
				t.Errorf("message %q", st.Error.Message)
			}
		})
	}
}

func wantCode(t *testing.T, st agentsession.Status, code agentsession.ErrorCode) {
	t.Helper()
	if st.Error == nil || st.Error.Code != code {
		t.Fatalf("status %+v, want error code %s", st, code)
	}
	if st.State != agentsession.StateUnavailable {
		t.Errorf("state %q, want unavailable", st.State)
	}
}

// TestLoaderAgainstShellModule loads a module written in POSIX shell and
// feeds the loader every kind of bad reply; none blocks startup, hangs a call
// past its deadline or crashes the host.
func TestLoaderAgainstShellModule(t *testing.T) {
	script, err := filepath.Abs("testdata/shmodule.sh")
	if err != nil {
		t.Fatal(err)
	}
	notExec := filepath.Join(t.TempDir(), "module.txt")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	inspect := agentsession.Request{Op: agentsession.OpInspect}
	tests := []struct {
		name       string
		spec       string
		wantLoaded bool
		wantLog    string
		timeout    time.Duration
		check      func(t *testing.T, st agentsession.Status)
	}{
		{name: "a well-behaved shell module", spec: script + " ok", wantLoaded: true, wantLog: "registered runtime(s): sh-rt",
			check: func(t *testing.T, st agentsession.Status) {
				if st.State != agentsession.StateCompleted || st.FinalResponse != "from the shell" || st.LastEventAt != 1767323045000 || st.Provider != "shell" {
					t.Errorf("%+v", st)
				}
			}},
		{name: "reply that is not JSON times out at the deadline", spec: script + " notjson", wantLoaded: true,
			wantLog: "not JSON-RPC", timeout: 300 * time.Millisecond,
			check: func(t *testing.T, st agentsession.Status) { wantCode(t, st, "inspect_timeout") }},
		{name: "answer to an unknown id is discarded", spec: script + " unknownid", wantLoaded: true, timeout: 300 * time.Millisecond,
			check: func(t *testing.T, st agentsession.Status) { wantCode(t, st, "inspect_timeout") }},
		{name: "a huge reply stops the module and fails the call", spec: script + " huge", wantLoaded: true, wantLog: "oversized line",
			check: func(t *testing.T, st agentsession.Status) {
				wantCode(t, st, "inspect_failed")
				if !strings.Contains(st.Error.Message, "exceeded 1048576 bytes") {
					t.Errorf("message %q", st.Error.Message)
				}
			}},
		{name: "wrong types normalize", spec: script + " wrongtypes", wantLoaded: true,
			check: func(t *testing.T, st agentsession.Status) {
				if st.State != agentsession.StateUnknown || st.Error != nil || st.Alive != nil || st.FinalResponse != "" {
					t.Errorf("%+v", st)
				}
			}},
		{name: "a result that is not an object fails", spec: script + " badresult", wantLoaded: true,
			check: func(t *testing.T, st agentsession.Status) { wantCode(t, st, "inspect_failed") }},
		{name: "a JSON-RPC error is inspect_failed", spec: script + " rpcerror", wantLoaded: true,
			check: func(t *testing.T, st agentsession.Status) {
				wantCode(t, st, "inspect_failed")
				if st.Error.Message != "shell says no" {
					t.Errorf("message %q", st.Error.Message)
				}
			}},
		{name: "exit mid-call fails the call", spec: script + " exit", wantLoaded: true,
			check: func(t *testing.T, st agentsession.Status) { wantCode(t, st, "inspect_failed") }},
		{name: "stderr flood is drained and rate limited", spec: script + " flood", wantLoaded: true, wantLog: "stderr rate limit reached"},
		{name: "no describe answer is skipped", spec: script + " silent", wantLog: "no describe answer within 300ms"},
		{name: "describe that is not JSON is skipped", spec: script + " notjsondescribe", wantLog: "no describe answer"},
		{name: "a bad runtime id is skipped", spec: script + " badid", wantLog: "invalid runtime id"},
		{name: "a bad protocol version is skipped", spec: script + " badversion", wantLog: "protocolVersion 2"},
		{name: "a crash before describe is skipped", spec: script + " crash", wantLog: "crashing before describe"},
		{name: "a missing executable is skipped", spec: "./does/not/exist", wantLog: `failed to load runtime module "./does/not/exist"`},
		{name: "a file that is not executable is skipped", spec: notExec, wantLog: "permission denied"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg := agentsession.NewRegistry()
			rec := newLogRecorder()
			describe := 10 * time.Second
			if strings.Contains(tc.wantLog, "no describe answer") {
				describe = 300 * time.Millisecond // these modules never answer: wait it out
			}
			l := Load(t.Context(), tc.spec, reg, LoadOptions{Logger: rec.logger(), DescribeTimeout: describe,
				MaxLineBytes: 1 << 20, RestartBackoff: time.Hour})
			defer l.Close()
			if got := reg.Has("sh-rt"); got != tc.wantLoaded {
				t.Fatalf("loaded = %v, want %v; log:\n%s", got, tc.wantLoaded, rec.all())
			}
			if reg.Has("sh-noinspect") {
				t.Error("a runtime without inspect was registered")
			}
			if tc.wantLoaded && rec.count("unknown operations") == 0 {
				t.Error("unknown operation teleport not reported")
			}
			if tc.check != nil {
				timeout := tc.timeout
				if timeout == 0 {
					timeout = 10 * time.Second
				}
				start := time.Now()
				st := reg.Dispatch(t.Context(), agentsession.Ref{Runtime: "sh-rt", SessionID: "s"}, inspect,
					agentsession.CallOptions{Timeout: timeout})
				tc.check(t, st)
				if elapsed := time.Since(start); elapsed > timeout+5*time.Second {
					t.Errorf("call took %v, past its %v deadline", elapsed, timeout)
				}
			}
			if tc.wantLog != "" {
				rec.waitFor(t, tc.wantLog)
			}
			if !tc.wantLoaded {
				rec.waitFor(t, "no runtime registered from CLAWCONNECT_AGENT_SESSION_RUNTIME_MODULES")
			}
		})
	}
}

// TestLoadSeveralModules loads a good and a broken module from one list: the
// broken one never blocks the good one.
func TestLoadSeveralModules(t *testing.T) {
	script, _ := filepath.Abs("testdata/shmodule.sh")
	reg := agentsession.NewRegistry()
	rec := newLogRecorder()
	spec := script + " silent,\n" + script + " ok\n,./nope"
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	l := Load(ctx, spec, reg, LoadOptions{Logger: rec.logger(), DescribeTimeout: 3 * time.Second})
	defer l.Close()
	if diff := cmp.Diff([]string{"sh-rt"}, l.Runtimes()); diff != "" {
		t.Errorf("runtimes (-want +got):\n%s\n%s", diff, rec.all())
	}
	if rec.count("failed to load runtime module") != 2 {
		t.Errorf("want two failures logged:\n%s", rec.all())
	}
	if rec.count("module=shmodule.sh#2") == 0 && rec.count("module=shmodule.sh") == 0 {
		t.Errorf("module names not in the log:\n%s", rec.all())
	}
}

func TestLoadedCloseStopsModules(t *testing.T) {
	reg, l, _ := loadHelper(t, "basic", LoadOptions{})
	l.Close()
	l.Close() // idempotent
	st := reg.Dispatch(t.Context(), agentsession.Ref{Runtime: "go-rt", SessionID: "s"},
		agentsession.Request{Op: agentsession.OpInspect}, agentsession.CallOptions{})
	wantCode(t, st, "inspect_failed")
	if !strings.Contains(st.Error.Message, "closed") {
		t.Errorf("message %q", st.Error.Message)
	}
}

// TestModuleEnvScrubbed is issue 11 item 5 (environment half): a runtime
// module never inherits ClawConnect's own secrets, whether it inherits the
// process environment or is given one.
func TestModuleEnvScrubbed(t *testing.T) {
	script, err := filepath.Abs("testdata/shmodule.sh")
	if err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{
		"OPENCLAW_PASSWORD": "pw-secret", "OPENCLAW_GATEWAY_TOKEN": "gw-secret",
		"MCP_USER_TOKENS": "ana:http-secret", "PUBLIC_MCP_PASS": "shared-secret",
		"CLAWCONNECT_DATABASE_URL": "postgres://u:db-secret@h/db",
	}
	for _, inherit := range []bool{true, false} {
		name := "explicit env"
		if inherit {
			name = "inherited env"
		}
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "env.txt")
			var env []string
			if inherit {
				for k, v := range secrets {
					t.Setenv(k, v)
				}
				t.Setenv("SHMODULE_ENV_OUT", out)
			} else {
				env = []string{"PATH=" + os.Getenv("PATH"), "SHMODULE_ENV_OUT=" + out, "KEEP_ME=1"}
				for k, v := range secrets {
					env = append(env, k+"="+v)
				}
			}
			reg := agentsession.NewRegistry()
			loaded := Load(t.Context(), script+" ok", reg, LoadOptions{Env: env})
			defer loaded.Close()
			if _, ok := reg.Get("sh-rt"); !ok {
				t.Fatal("the module did not load")
			}
			data, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			got := string(data)
			for k, v := range secrets {
				if strings.Contains(got, k+"=") || strings.Contains(got, v) {
					t.Errorf("module environment carries %s", k)
				}
			}
			if !strings.Contains(got, "SHMODULE_ENV_OUT=") || (!inherit && !strings.Contains(got, "KEEP_ME=1")) {
				t.Errorf("harmless variables were dropped too:\n%s", got)
			}
		})
	}
}

// TestStdoutFloodRateLimited is issue 11 item 8: a module flooding stdout
// with lines that are not JSON-RPC is drained, still loads, and its noise
// reaches the log at the stderr rate with the rest counted, not line by
// line.
func TestStdoutFloodRateLimited(t *testing.T) {
	script, err := filepath.Abs("testdata/shmodule.sh")
	if err != nil {
		t.Fatal(err)
	}
	reg := agentsession.NewRegistry()
	rec := newLogRecorder()
	l := Load(t.Context(), script+" stdoutflood", reg, LoadOptions{Logger: rec.logger(), RestartBackoff: time.Hour})
	if !reg.Has("sh-rt") {
		t.Fatalf("the flooding module did not load; log:\n%s", rec.all())
	}
	rec.waitFor(t, "stdout rate limit reached")
	l.Close() // flushes the count of the last window
	rec.waitFor(t, "suppressed stdout lines")
	logged := rec.count("not JSON-RPC; ignored")
	if logged == 0 || logged > 1000 {
		t.Errorf("%d of 3000 noise lines logged one by one, want a rate-limited few", logged)
	}
	suppressed := 0
	for _, line := range strings.Split(rec.all(), "\n") {
		if _, rest, ok := strings.Cut(line, "suppressed stdout lines"); ok {
			if _, n, ok := strings.Cut(rest, "lines="); ok {
				var v int
				fmt.Sscan(n, &v)
				suppressed += v
			}
		}
	}
	if logged+suppressed != 3000 {
		t.Errorf("logged %d + suppressed %d != 3000 noise lines", logged, suppressed)
	}
}

// TestModuleReplyBounds runs a module's replies through an attachment book:
// a module adding metadata keys with each reply is stopped at the bound with
// the stored metadata intact, a reply with unsafe identity fields is refused
// naming the module, and a good one is taken.
func TestModuleReplyBounds(t *testing.T) {
	reg, l, rec := loadHelper(t, "basic", LoadOptions{})
	if len(l.Runtimes()) == 0 {
		t.Fatalf("helper module not loaded; log:\n%s", rec.all())
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	module := "module " + filepath.Base(exe) + " (runtime go-rt): reply refused: "
	book, err := agentsession.NewBook(t.Context(), agentsession.NewMemoryStore(), agentsession.BookOptions{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(book.Close)
	attach := func(t *testing.T, key, session string) {
		t.Helper()
		h := agentsession.ParseHandoff(`<agent-session>{"runtime":"go-rt","sessionId":"` + session + `","state":"running","remoteUrl":"https://h.example/first"}</agent-session>`)
		if _, err := book.Apply(t.Context(), key, "job1", h.Directive); err != nil {
			t.Fatal(err)
		}
	}
	inspect := func(t *testing.T, key string) (*agentsession.Status, agentsession.Attachment) {
		t.Helper()
		st, err := book.Observe(t.Context(), key, agentsession.Request{Op: agentsession.OpInspect})
		if err != nil {
			t.Fatal(err)
		}
		cur, err := book.Current(t.Context(), key)
		if err != nil || cur == nil {
			t.Fatalf("current: %v, %v", cur, err)
		}
		return st, *cur
	}

	t.Run("growing metadata", func(t *testing.T) {
		attach(t, "grow", "grow")
		var kept map[string]string
		for i := range 20 {
			st, cur := inspect(t, "grow")
			if i < 2 {
				if st.Error != nil {
					t.Fatalf("reply %d: %+v", i+1, st.Error)
				}
				kept = cur.Metadata
				continue
			}
			want := module + "metadata would hold 300 keys, over the limit of 256; the stored metadata is kept"
			if st.Error == nil || st.Error.Code != "inspect_failed" || !strings.HasPrefix(st.Error.Message, want) {
				t.Fatalf("reply %d: error %+v, want inspect_failed %q", i+1, st.Error, want)
			}
			if len(cur.Metadata) != 200 || !maps.Equal(cur.Metadata, kept) || cur.Error == nil || cur.Status != "running" {
				t.Fatalf("reply %d: record has %d metadata keys, status %q, error %+v; want the 200 kept", i+1, len(cur.Metadata), cur.Status, cur.Error)
			}
		}
	})
	t.Run("unsafe fields refused", func(t *testing.T) {
		attach(t, "bad", "badfields")
		st, cur := inspect(t, "bad")
		if st.Error == nil || st.Error.Code != "inspect_failed" || !strings.HasPrefix(st.Error.Message, module+"providerSessionId is not a safe handle") ||
			!strings.Contains(st.Error.Message, "host may hold only") || !strings.Contains(st.Error.Message, "remoteUrl carries user information") {
			t.Fatalf("status %+v", st)
		}
		if strings.Contains(st.Error.Message, "hunter2") || strings.Contains(st.Error.Message, "\x1b") {
			t.Errorf("the error quotes a refused value: %q", st.Error.Message)
		}
		if cur.Status != "running" || cur.RemoteURL != "https://h.example/first" || cur.Host != "" || cur.ProviderSessionID != "" {
			t.Errorf("a refused reply changed the record: %+v", cur)
		}
	})
	t.Run("good fields taken", func(t *testing.T) {
		attach(t, "good", "goodfields")
		st, cur := inspect(t, "good")
		if st.Error != nil {
			t.Fatalf("status %+v", st)
		}
		if cur.Status != "needs_input" || cur.RemoteURL != "https://h.example/s/1?tab=log#L10" || cur.Host != "box-1.example:8443" ||
			cur.ProviderSessionID != "0199a6c2-7b1e-7c4d-9a3f-2b8e4f1d6c0a" {
			t.Errorf("record %+v", cur)
		}
		b, ok := agentsession.BlockedDelegationFor("job1", true, &cur)
		if !ok || !strings.Contains(b.Notice, "Open it at https://h.example/s/1?tab=log#L10.") {
			t.Errorf("blocked delegation %+v", b)
		}
	})
}
