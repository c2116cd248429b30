// Package fakecli is a scriptable stand-in for a runtime CLI, for the tests
// of the subprocess adapters. A test binary calls MaybeRun first thing in
// TestMain; when the adapter under test spawns that same binary with the
// FAKECLI_* environment, it becomes the fake CLI: it records its argv,
// environment and stdin, then follows directives the test writes into a
// FIFO (print a stdout line, write stderr, exit). Real process groups and
// real signals are exercised; nothing is mocked.
package fakecli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/executor"
	"github.com/clawconnect/clawconnect/executor/contract"
)

// Environment variables of the fake process.
const (
	envFIFO        = "FAKECLI_FIFO"
	envRecord      = "FAKECLI_RECORD"
	envIgnoreTerm  = "FAKECLI_IGNORE_TERM"
	envExitAtStart = "FAKECLI_EXIT_AT_START"
)

// Directive is one instruction to the fake process.
type Directive struct {
	Out  string `json:"out,omitempty"`  // print as a stdout line
	Raw  string `json:"raw,omitempty"`  // write to stdout verbatim (no newline added)
	Err  string `json:"err,omitempty"`  // write to stderr
	Exit *int   `json:"exit,omitempty"` // exit with this code
}

// Out returns a directive printing line on stdout.
func Out(line string) Directive { return Directive{Out: line} }

// Exit returns a directive making the process exit with code.
func Exit(code int) Directive { return Directive{Exit: &code} }

// Record is what the fake process saw at start.
type Record struct {
	Args  []string `json:"args"`
	Env   []string `json:"env"`
	Stdin string   `json:"stdin"`
	Dir   string   `json:"dir"`
}

// MaybeRun turns the process into the fake CLI when the FAKECLI_FIFO
// environment variable is set, and never returns then. Otherwise it returns
// at once.
func MaybeRun() {
	fifo := os.Getenv(envFIFO)
	if fifo == "" {
		return
	}
	os.Exit(run(fifo))
}

func run(fifo string) int {
	if os.Getenv(envIgnoreTerm) == "1" {
		signal.Ignore(syscall.SIGTERM)
	}
	var stdin []byte
	if fi, err := os.Stdin.Stat(); err == nil && fi.Mode()&os.ModeCharDevice == 0 {
		stdin, _ = io.ReadAll(os.Stdin)
	}
	if path := os.Getenv(envRecord); path != "" {
		dir, _ := os.Getwd()
		b, _ := json.Marshal(Record{Args: os.Args[1:], Env: os.Environ(), Stdin: string(stdin), Dir: dir})
		if err := os.WriteFile(path, b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "fakecli:", err)
			return 3
		}
	}
	if code := os.Getenv(envExitAtStart); code != "" {
		var n int
		fmt.Sscan(code, &n)
		fmt.Fprintln(os.Stderr, "fakecli: exiting at start as told")
		return n
	}
	f, err := os.Open(fifo)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakecli:", err)
		return 3
	}
	defer f.Close()
	out := bufio.NewWriter(os.Stdout)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		var d Directive
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			fmt.Fprintln(os.Stderr, "fakecli: bad directive:", err)
			return 3
		}
		if d.Out != "" {
			out.WriteString(d.Out)
			out.WriteByte('\n')
		}
		if d.Raw != "" {
			out.WriteString(d.Raw)
		}
		out.Flush()
		if d.Err != "" {
			fmt.Fprint(os.Stderr, d.Err)
		}
		if d.Exit != nil {
			return *d.Exit
		}
	}
	return 0
}

// Fake is the test side of one fake CLI: a work directory, the FIFO the
// process reads directives from, and the recorder of side effects.
type Fake struct {
	Dir    string // scratch root
	Work   string // the run's working directory
	fifo   string
	record string
	w      *os.File
	Logs   *LogRecorder
}

// New creates a fake whose FIFO and files live in t.TempDir; t.Cleanup
// closes the FIFO, which makes a still-running fake process exit.
func New(t *testing.T) *Fake {
	t.Helper()
	dir := t.TempDir()
	f := &Fake{Dir: dir, Work: filepath.Join(dir, "work"), fifo: filepath.Join(dir, "ctl.fifo"), record: filepath.Join(dir, "record.json"), Logs: &LogRecorder{store: &recStore{}}}
	if err := os.Mkdir(f.Work, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(f.fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// O_RDWR never blocks and keeps the FIFO open for the reader.
	w, err := os.OpenFile(f.fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.w = w
	t.Cleanup(func() { w.Close() })
	return f
}

// Binary is the program adapters should spawn: this test binary.
func (f *Fake) Binary(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// Environ is the environment that makes the spawned binary this fake, plus
// extra (KEY=value).
func (f *Fake) Environ(extra ...string) []string {
	env := append(os.Environ(), envFIFO+"="+f.fifo, envRecord+"="+f.record, noRaceExitSleep())
	return append(env, extra...)
}

// noRaceExitSleep is the GORACE entry that keeps a race-enabled fake from
// sleeping at exit (by default the race runtime waits a second there, so
// that other goroutines can report), which made every fake run a second
// longer under -race. Other GORACE options pass through.
func noRaceExitSleep() string {
	return "GORACE=" + strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0")
}

// Send writes directives for the process.
func (f *Fake) Send(t *testing.T, ds ...Directive) {
	t.Helper()
	for _, d := range ds {
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.w.Write(append(b, '\n')); err != nil {
			t.Fatalf("send directive: %v", err)
		}
	}
}

// Recorded returns what the process saw at start.
func (f *Fake) Recorded(t *testing.T) Record {
	t.Helper()
	b, err := os.ReadFile(f.record)
	if err != nil {
		t.Fatalf("read fake record: %v", err)
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// Calls returns the adapter's side effects: its log records (abort, set
// model, write context) and the files in the work directory.
func (f *Fake) Calls(t *testing.T) []contract.RecordedCall {
	t.Helper()
	calls := f.Logs.Calls()
	entries, _ := os.ReadDir(f.Work)
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(f.Work, e.Name()))
		if err != nil {
			continue
		}
		calls = append(calls, contract.RecordedCall{Method: "file", Params: map[string]string{"name": e.Name(), "content": string(b)}})
	}
	return calls
}

// LogRecorder is a slog.Handler that keeps every record as a RecordedCall
// (the message as method, the attributes as params). It is safe for
// concurrent use; handlers derived with WithAttrs share its records.
type LogRecorder struct {
	store *recStore
	attrs []slog.Attr
}

type recStore struct {
	mu    sync.Mutex
	calls []contract.RecordedCall
}

func (r *LogRecorder) st() *recStore {
	if r.store == nil {
		r.store = &recStore{}
	}
	return r.store
}

// Logger returns a logger writing into r.
func (r *LogRecorder) Logger() *slog.Logger { r.st(); return slog.New(r) }

// Enabled implements slog.Handler.
func (r *LogRecorder) Enabled(context.Context, slog.Level) bool { return true }

// Handle implements slog.Handler.
func (r *LogRecorder) Handle(_ context.Context, rec slog.Record) error {
	params := map[string]any{}
	for _, a := range r.attrs {
		params[a.Key] = a.Value.Any()
	}
	rec.Attrs(func(a slog.Attr) bool { params[a.Key] = a.Value.Any(); return true })
	s := r.st()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, contract.RecordedCall{Method: rec.Message, Params: params})
	return nil
}

// WithAttrs implements slog.Handler.
func (r *LogRecorder) WithAttrs(as []slog.Attr) slog.Handler {
	return &LogRecorder{store: r.st(), attrs: append(append([]slog.Attr(nil), r.attrs...), as...)}
}

// WithGroup implements slog.Handler (groups are flattened).
func (r *LogRecorder) WithGroup(string) slog.Handler { return r }

// Calls returns the records so far.
func (r *LogRecorder) Calls() []contract.RecordedCall {
	s := r.st()
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]contract.RecordedCall(nil), s.calls...)
}

// HarnessConfig describes a subprocess adapter to the contract suite.
type HarnessConfig struct {
	Label string
	// New builds the adapter over the fake (binary, environment, logger).
	New func(t *testing.T, f *Fake) executor.RuntimeAdapter
	// Prelude is what the runtime prints at start (its init lines).
	Prelude []Directive
	// Translate turns the n-th abstract frame of a run into directives.
	Translate func(fr contract.Frame, n int) []Directive
}

// Harness returns a contract harness running the adapter against a fresh
// fake CLI per case. Every adapter that is a Disposer is disposed when the
// case ends, so no process outlives it.
func Harness(cfg HarnessConfig) contract.Harness {
	var (
		fake *Fake
		n    int
	)
	return contract.Harness{
		Label: cfg.Label,
		New: func(t *testing.T) executor.RuntimeAdapter {
			fake = New(t)
			a := cfg.New(t, fake)
			if d, ok := a.(executor.Disposer); ok {
				t.Cleanup(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					if err := d.Dispose(ctx); err != nil {
						t.Errorf("dispose: %v", err)
					}
				})
			}
			return a
		},
		Start: func(t *testing.T, a executor.RuntimeAdapter, _ []contract.Frame) (*executor.RunHandle, error) {
			n = 0
			run, err := a.Start(t.Context(), executor.Task{}, executor.StartOptions{SessionKey: "contract-session", Message: "contract prompt", Cwd: fake.Work})
			if err == nil {
				fake.Send(t, cfg.Prelude...)
			}
			return run, err
		},
		Emit: func(t *testing.T, fr contract.Frame) {
			n++
			fake.Send(t, cfg.Translate(fr, n)...)
		},
		RecordedCalls: func(t *testing.T) []contract.RecordedCall { return fake.Calls(t) },
	}
}

// RealHarnessConfig describes a subprocess adapter over a real CLI talking
// to the fake model server.
type RealHarnessConfig struct {
	Label string
	// New builds the adapter with logger recording its side effects.
	New func(t *testing.T, logger *slog.Logger) executor.RuntimeAdapter
	// WorkDir is the CLI's working directory (files written there count as
	// side effects).
	WorkDir string
}

// PromptFor turns a contract script into a prompt for the fake model
// server's trigger words: a tool call asks for one shell command, an abort
// holds the reply open until the client goes away, anything else gets the
// default echo reply.
func PromptFor(script []contract.Frame) string {
	for _, f := range script {
		switch f.Kind {
		case contract.FrameToolCall:
			return "TOOLCALL: echo tool-probe"
		case contract.FrameAborted:
			return "HANG"
		case contract.FrameDelta, contract.FrameFinal, contract.FrameError:
		}
	}
	return "say hello"
}

// RealHarness returns a contract harness over a real CLI: frames are not
// emitted but produced by the CLI from the prompt PromptFor builds.
func RealHarness(cfg RealHarnessConfig) contract.Harness {
	var logs *LogRecorder
	n := 0
	return contract.Harness{
		Label:   cfg.Label,
		Timeout: 3 * time.Minute,
		New: func(t *testing.T) executor.RuntimeAdapter {
			logs = &LogRecorder{store: &recStore{}}
			a := cfg.New(t, logs.Logger())
			if d, ok := a.(executor.Disposer); ok {
				t.Cleanup(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					if err := d.Dispose(ctx); err != nil {
						t.Errorf("dispose: %v", err)
					}
				})
			}
			return a
		},
		Start: func(t *testing.T, a executor.RuntimeAdapter, script []contract.Frame) (*executor.RunHandle, error) {
			n++
			return a.Start(t.Context(), executor.Task{}, executor.StartOptions{
				SessionKey: fmt.Sprintf("e2e-%d", n), Message: PromptFor(script), Cwd: cfg.WorkDir,
			})
		},
		RecordedCalls: func(t *testing.T) []contract.RecordedCall {
			calls := logs.Calls()
			entries, _ := os.ReadDir(cfg.WorkDir)
			for _, e := range entries {
				if b, err := os.ReadFile(filepath.Join(cfg.WorkDir, e.Name())); err == nil && !e.IsDir() {
					calls = append(calls, contract.RecordedCall{Method: "file", Params: map[string]string{"name": e.Name(), "content": string(b)}})
				}
			}
			return calls
		},
	}
}
