package tmux

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/testbed/poll"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// server is a private tmux server on a socket in a short temporary
// directory (socket paths are limited to about 100 bytes).
type server struct {
	dir, socket string
}

func newServer(t *testing.T) *server {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux not installed")
	}
	dir, err := os.MkdirTemp("", "cctmux")
	if err != nil {
		t.Fatal(err)
	}
	dir, err = filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := &server{dir: dir, socket: filepath.Join(dir, "s")}
	t.Cleanup(func() {
		_ = exec.Command("tmux", "-S", s.socket, "kill-server").Run()
		_ = os.RemoveAll(dir)
	})
	return s
}

// tmux runs a tmux command on the server and returns its trimmed output.
func (s *server) tmux(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", s.socket}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("tmux %v: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// newSession starts a detached session running shell command cmd in the
// server's directory and returns its pane id.
func (s *server) newSession(t *testing.T, name, cmd string) string {
	t.Helper()
	return s.tmux(t, "new-session", "-d", "-P", "-F", "#{pane_id}", "-s", name, "-x", "100", "-y", "30", "-c", s.dir, cmd)
}

// fifo makes a named pipe in the server's directory and returns its path
// and a channel of what is written into it (closed at EOF). The reader
// goroutine ends when the writer closes the pipe; Cleanup closes it too.
func (s *server) fifo(t *testing.T, name string) (string, <-chan string) {
	t.Helper()
	path := filepath.Join(s.dir, name)
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	ch := make(chan string, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(ch)
		f, err := os.OpenFile(path, os.O_RDONLY, 0)
		if err != nil {
			return
		}
		defer f.Close()
		r := bufio.NewReader(f)
		for {
			b := make([]byte, 4096)
			n, err := r.Read(b)
			if n > 0 {
				ch <- string(b[:n])
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		// The pane's writer goes with the server; then unblock an open
		// that never met a writer.
		_ = exec.Command("tmux", "-S", s.socket, "kill-server").Run()
		if w, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		for range ch {
		}
		<-done
	})
	return path, ch
}

// readUntil collects from ch until the collected text contains want or
// the bound expires.
func readUntil(t *testing.T, ch <-chan string, want string) string {
	t.Helper()
	var got strings.Builder
	deadline := time.After(10 * time.Second)
	for !strings.Contains(got.String(), want) {
		select {
		case s, ok := <-ch:
			if !ok {
				t.Fatalf("pipe closed; got %q, want it to contain %q", got.String(), want)
			}
			got.WriteString(s)
		case <-deadline:
			t.Fatalf("timed out; got %q, want it to contain %q", got.String(), want)
		}
	}
	return got.String()
}

// waitCapture polls the pane's screen until it contains want (bounded).
func waitCapture(t *testing.T, c *Client, p Pane, opts CaptureOptions, want string) string {
	t.Helper()
	var got string
	if !poll.WithinEvery(10*time.Second, 10*time.Millisecond, func() bool {
		var err error
		if got, err = c.Capture(t.Context(), p, opts); err != nil {
			t.Fatal(err)
		}
		return strings.Contains(got, want)
	}) {
		t.Fatalf("screen never showed %q; last:\n%s", want, got)
	}
	return got
}

func (s *server) client(opts Options) *Client {
	opts.NoDefaultServer = true
	if len(opts.Sockets) == 0 && opts.TMUX == "" {
		opts.Sockets = []string{s.socket}
	}
	return New(opts)
}

func (s *server) pane(t *testing.T, c *Client, id string) Pane {
	t.Helper()
	p, err := c.Resolve(t.Context(), s.socket, id)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestListPanesRealTmux(t *testing.T) {
	s := newServer(t)
	id1 := s.newSession(t, "one", "exec sleep 600")
	s.tmux(t, "split-window", "-t", "one", "-c", "/", "exec sleep 601")
	id3 := s.newSession(t, "two words", "exec sleep 602")
	link := filepath.Join(s.dir, "link")
	if err := os.Symlink(s.socket, link); err != nil {
		t.Fatal(err)
	}
	// The same server through $TMUX, a symlink and its own path, plus a
	// socket with no server: listed once, the dead one skipped.
	c := New(Options{
		NoDefaultServer: true,
		TMUX:            s.socket + ",123,0",
		Sockets:         []string{link, " " + s.socket + " ", filepath.Join(s.dir, "nobody")},
	})
	if diff := cmp.Diff([]string{s.socket, link, filepath.Join(s.dir, "nobody")}, c.Sockets()); diff != "" {
		t.Errorf("Sockets() (-want +got):\n%s", diff)
	}
	// A pane's command and path settle once its shell has exec'd sleep.
	var panes []Pane
	var err error
	poll.Within(10*time.Second, func() bool {
		if panes, err = c.ListPanes(t.Context()); err != nil {
			return true
		}
		settled := len(panes) == 3
		for _, p := range panes {
			settled = settled && p.Command == "sleep" && p.Path != ""
		}
		return settled
	})
	if err != nil {
		t.Fatal(err)
	}
	pid := func(id string) int {
		n, err := strconv.Atoi(s.tmux(t, "display-message", "-p", "-t", id, "#{pane_pid}"))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	id2 := s.tmux(t, "display-message", "-p", "-t", "one:0.1", "#{pane_id}")
	want := []Pane{
		{Session: "one", Window: 0, Index: 0, PID: pid(id1), Command: "sleep", Path: s.dir, Socket: s.socket, ID: id1, Queried: s.socket},
		{Session: "one", Window: 0, Index: 1, PID: pid(id2), Command: "sleep", Path: "/", Socket: s.socket, ID: id2, Queried: s.socket},
		{Session: "two words", Window: 0, Index: 0, PID: pid(id3), Command: "sleep", Path: s.dir, Socket: s.socket, ID: id3, Queried: s.socket},
	}
	if diff := cmp.Diff(want, panes); diff != "" {
		t.Errorf("ListPanes (-want +got):\n%s", diff)
	}

	// Through the symlink only, the pane carries the canonical socket.
	viaLink, err := New(Options{NoDefaultServer: true, Sockets: []string{link}}).ListPanes(t.Context())
	if err != nil || len(viaLink) != 3 || viaLink[0].Socket != s.socket || viaLink[0].Queried != link {
		t.Errorf("via symlink: %+v, %v", viaLink, err)
	}
}

func TestResolve(t *testing.T) {
	s := newServer(t)
	id := s.newSession(t, "w", "exec sleep 600")
	c := s.client(Options{})
	p, err := c.Resolve(t.Context(), s.socket, id)
	if err != nil || p.ID != id || p.Session != "w" {
		t.Fatalf("Resolve = %+v, %v", p, err)
	}
	if _, err := c.Resolve(t.Context(), s.socket, "%999"); !errors.Is(err, ErrPaneGone) {
		t.Errorf("unknown pane: %v, want ErrPaneGone", err)
	}
	for _, tc := range []struct{ socket, id string }{{"", id}, {s.socket, "1"}, {s.socket, ""}} {
		if _, err := c.Resolve(t.Context(), tc.socket, tc.id); !errors.Is(err, ErrInvalid) {
			t.Errorf("Resolve(%q, %q): %v, want ErrInvalid", tc.socket, tc.id, err)
		}
	}
	s.tmux(t, "kill-server")
	if _, err := c.Resolve(t.Context(), s.socket, id); !errors.Is(err, ErrPaneGone) || errors.Is(err, ErrUncertain) {
		t.Errorf("after kill-server: %v, want ErrPaneGone", err)
	}
}

func TestCaptureAndSize(t *testing.T) {
	s := newServer(t)
	id := s.newSession(t, "w", `printf 'hello screen\n\033[31mred text\033[0m\n'; exec sleep 600`)
	c := s.client(Options{})
	p := s.pane(t, c, id)
	plain := waitCapture(t, c, p, CaptureOptions{}, "red text")
	if !strings.Contains(plain, "hello screen") || strings.Contains(plain, "\x1b[") {
		t.Errorf("plain capture:\n%q", plain)
	}
	ansi, err := c.Capture(t.Context(), p, CaptureOptions{ANSI: true, Scrollback: -1})
	if err != nil || !strings.Contains(ansi, "\x1b[31mred text") {
		t.Errorf("ANSI capture = %q, %v", ansi, err)
	}
	w, h, err := c.Size(t.Context(), p)
	if err != nil || w != 100 || h != 30 {
		t.Errorf("Size = %d×%d, %v; want 100×30", w, h, err)
	}
	gone := p
	gone.ID = "%999"
	if _, err := c.Capture(t.Context(), gone, CaptureOptions{}); !errors.Is(err, ErrNotSent) {
		t.Errorf("capture of a missing pane: %v, want ErrNotSent", err)
	}
}

func TestSendTextOneLineAndKeys(t *testing.T) {
	s := newServer(t)
	path, out := s.fifo(t, "out")
	id := s.newSession(t, "w", "exec cat > "+path)
	c := s.client(Options{})
	p := s.pane(t, c, id)
	// Text that looks like an option and holds tmux key names is typed
	// literally; Enter is a separate call.
	if err := c.SendText(t.Context(), p, "-n Enter C-c 'q' \"$HOME\""); err != nil {
		t.Fatal(err)
	}
	if err := c.SendKeys(t.Context(), p, KeyEnter); err != nil {
		t.Fatal(err)
	}
	if got := readUntil(t, out, "\n"); got != "-n Enter C-c 'q' \"$HOME\"\n" {
		t.Errorf("pane received %q", got)
	}
	if err := c.SendText(t.Context(), p, ""); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty text: %v, want ErrInvalid", err)
	}
	if err := c.SendText(t.Context(), p, "a\x00b"); !errors.Is(err, ErrInvalid) {
		t.Errorf("NUL: %v, want ErrInvalid", err)
	}
	for _, k := range []Key{"", "-t", "hello world", "Enter;", "C-"} {
		if err := c.SendKeys(t.Context(), p, k); !errors.Is(err, ErrInvalid) {
			t.Errorf("key %q: %v, want ErrInvalid", k, err)
		}
	}
	if err := c.SendKeys(t.Context(), p); !errors.Is(err, ErrInvalid) {
		t.Errorf("no keys: %v, want ErrInvalid", err)
	}
	// C-d on an empty line ends cat, which closes the pipe.
	if err := c.SendKeys(t.Context(), p, "C-d"); err != nil {
		t.Fatal(err)
	}
	for range out {
	}
}

func TestSendTextMultilineUsesBracketedPaste(t *testing.T) {
	s := newServer(t)
	path, out := s.fifo(t, "out")
	// The program asks for bracketed paste and reads raw bytes.
	id := s.newSession(t, "w", `stty raw -echo; printf '\033[?2004hREADY'; exec cat > `+path)
	c := s.client(Options{})
	p := s.pane(t, c, id)
	// tmux parses the pane's output in order: once READY shows, the mode
	// is on.
	waitCapture(t, c, p, CaptureOptions{}, "READY")
	if err := c.SendText(t.Context(), p, "first line\nsecond $line\n-third"); err != nil {
		t.Fatal(err)
	}
	if err := c.SendKeys(t.Context(), p, KeyEnter); err != nil {
		t.Fatal(err)
	}
	got := readUntil(t, out, "\x1b[201~\r")
	if want := "\x1b[200~first line\rsecond $line\r-third\x1b[201~\r"; got != want {
		t.Errorf("pane received %q, want %q", got, want)
	}
	// One line with a tab is pasted too: typed, the tab is the Tab key.
	if err := c.SendText(t.Context(), p, "a\tb"); err != nil {
		t.Fatal(err)
	}
	if err := c.SendKeys(t.Context(), p, KeyEnter); err != nil {
		t.Fatal(err)
	}
	if got, want := readUntil(t, out, "\x1b[201~\r"), "\x1b[200~a\tb\x1b[201~\r"; got != want {
		t.Errorf("pane received %q for a line with a tab, want %q", got, want)
	}
	if bufs := s.tmux(t, "list-buffers", "-F", "#{buffer_name}"); bufs != "" {
		t.Errorf("paste buffers left behind: %q", bufs)
	}
	// A paste into a pane that is gone fails and deletes its buffer.
	gone := p
	gone.ID = "%999"
	if err := c.SendText(t.Context(), gone, "a\nb"); !errors.Is(err, ErrNotSent) {
		t.Errorf("paste into a missing pane: %v, want ErrNotSent", err)
	}
	if bufs := s.tmux(t, "list-buffers", "-F", "#{buffer_name}"); bufs != "" {
		t.Errorf("paste buffers left behind after a failed paste: %q", bufs)
	}
}

// TestSendTextArrivesByteExact checks that text tmux's own command parser
// would alter reaches the pane as it was given: tmux reads an argument
// ending in ';' as a command separator and a final `\;` as an escaped ';'.
// One line is typed; text with a line break or a tab is pasted.
func TestSendTextArrivesByteExact(t *testing.T) {
	texts := []string{
		"run the tests;",
		`a \;`,
		`a \\;`,
		`a\\\;`,
		"a ;",
		";",
		";;",
		`\;`,
		`\`,
		`trailing \`,
		"a;b; c",
		"#{pane_id} #(id) #[fg=red] %1",
		"#{pane_id};",
		"~ ~/x",
		"-",
		"-n",
		"--",
		"{ a ; b }",
		"'q;' \"x;\"",
	}
	s := newServer(t)
	typed, typedOut := s.fifo(t, "typed")
	pasted, pastedOut := s.fifo(t, "pasted")
	c := s.client(Options{})
	lineID := s.newSession(t, "line", "exec cat > "+typed)
	pasteID := s.newSession(t, "paste", `stty raw -echo; printf '\033[?2004hREADY'; exec cat > `+pasted)
	line, paste := s.pane(t, c, lineID), s.pane(t, c, pasteID)
	waitCapture(t, c, paste, CaptureOptions{}, "READY")
	for _, text := range texts {
		if err := c.SendText(t.Context(), line, text); err != nil {
			t.Fatalf("SendText(%q): %v", text, err)
		}
		if err := c.SendKeys(t.Context(), line, KeyEnter); err != nil {
			t.Fatal(err)
		}
		if got := readUntil(t, typedOut, "\n"); got != text+"\n" {
			t.Errorf("typed %q, pane received %q", text, strings.TrimSuffix(got, "\n"))
		}
		for _, text := range []string{"first\n" + text, "a\t" + text} {
			if err := c.SendText(t.Context(), paste, text); err != nil {
				t.Fatalf("SendText(%q): %v", text, err)
			}
			if err := c.SendKeys(t.Context(), paste, KeyEnter); err != nil {
				t.Fatal(err)
			}
			got := readUntil(t, pastedOut, "\x1b[201~\r")
			want := "\x1b[200~" + strings.ReplaceAll(text, "\n", "\r") + "\x1b[201~\r"
			if got != want {
				t.Errorf("pasted %q, pane received %q, want %q", text, got, want)
			}
		}
	}
	if bufs := s.tmux(t, "list-buffers", "-F", "#{buffer_name}"); bufs != "" {
		t.Errorf("paste buffers left behind: %q", bufs)
	}
}

func TestLiteralArg(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{"a", "a"},
		{"a;", `a\;`},
		{";", `\;`},
		{";;", `;\;`},
		{`a\;`, `a\\;`},
		{`a\\;`, `a\\\;`},
		{"a;b", "a;b"},
		{`a\`, `a\`},
	} {
		if got := literalArg(tt.in); got != tt.want {
			t.Errorf("literalArg(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestPaneIDMustBePaneID checks that a pane whose id is not %N is refused
// before any tmux runs: a watched pane's capture puts its target into a
// command line tmux parses whole.
func TestPaneIDMustBePaneID(t *testing.T) {
	t.Parallel()
	c := New(Options{Binary: "/nonexistent/tmux", NoDefaultServer: true})
	for _, id := range []string{"%1; kill-server", "%1;", "1", "%", "%1 ", "#{pane_id}"} {
		p := Pane{Session: "s", Socket: "/nowhere", ID: id}
		if _, err := c.Capture(t.Context(), p, CaptureOptions{}); !errors.Is(err, ErrInvalid) {
			t.Errorf("Capture with id %q: %v, want ErrInvalid", id, err)
		}
		if err := c.SendText(t.Context(), p, "x"); !errors.Is(err, ErrInvalid) {
			t.Errorf("SendText with id %q: %v, want ErrInvalid", id, err)
		}
	}
}

// fakeTmux writes an executable script standing in for tmux.
func fakeTmux(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tmux")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestErrorSemantics(t *testing.T) {
	// Not parallel: writing an executable while another test forks can
	// make exec fail with ETXTBSY (the child holds the write descriptor).
	p := Pane{Session: "s", PID: 1, Socket: "/nowhere", ID: "%1"}
	tests := []struct {
		name     string
		bin      string
		ctx      func() (context.Context, context.CancelFunc)
		want     error
		not      error
		contains string
	}{
		{name: "tmux missing", bin: filepath.Join(t.TempDir(), "no-tmux"), want: ErrNotSent, not: ErrUncertain, contains: "did not start"},
		{name: "tmux not executable", bin: t.TempDir(), want: ErrNotSent, not: ErrUncertain},
		{name: "tmux fails", bin: fakeTmux(t, `echo "can't find pane: %1" >&2; exit 1`), want: ErrNotSent, not: ErrUncertain, contains: "can't find pane"},
		{name: "tmux killed", bin: fakeTmux(t, `kill -9 $$`), want: ErrUncertain, not: ErrNotSent},
		{name: "tmux times out", bin: fakeTmux(t, `exec sleep 30`), want: ErrUncertain, not: ErrNotSent},
		{name: "context ends while tmux runs", bin: fakeTmux(t, `case " $* " in *" delete-buffer "*) exit 0;; esac; exec sleep 30`), want: ErrUncertain, not: ErrNotSent,
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 50*time.Millisecond)
			}},
		{name: "context ended before", bin: fakeTmux(t, `exit 0`), want: ErrNotSent, not: ErrUncertain,
			ctx: func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return ctx, cancel
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Only the hanging tmux meets the command timeout; the others
			// get time enough for a loaded machine.
			timeout := time.Minute
			if tc.name == "tmux times out" {
				timeout = 100 * time.Millisecond
			}
			c := New(Options{Binary: tc.bin, NoDefaultServer: true, Sockets: []string{"/nowhere"}, Timeout: timeout})
			calls := map[string]func(context.Context) error{
				"SendText":  func(ctx context.Context) error { return c.SendText(ctx, p, "hello") },
				"SendPaste": func(ctx context.Context) error { return c.SendText(ctx, p, "hello\nworld") },
				"SendKeys":  func(ctx context.Context) error { return c.SendKeys(ctx, p, KeyEnter) },
			}
			if tc.name == "tmux missing" || tc.name == "tmux not executable" {
				if _, err := c.ListPanes(t.Context()); !errors.Is(err, ErrNoTmux) {
					t.Errorf("ListPanes: %v, want ErrNoTmux", err)
				}
			} else if tc.ctx == nil {
				if panes, err := c.ListPanes(t.Context()); err != nil || len(panes) != 0 {
					t.Errorf("ListPanes = %v, %v; want a failing server skipped", panes, err)
				}
			}
			for name, call := range calls {
				ctx := t.Context()
				if tc.ctx != nil {
					var cancel context.CancelFunc
					ctx, cancel = tc.ctx()
					defer cancel()
				}
				err := call(ctx)
				if !errors.Is(err, tc.want) || errors.Is(err, tc.not) {
					t.Errorf("%s: %v; want %v and not %v", name, err, tc.want, tc.not)
				}
				if tc.contains != "" && (err == nil || !strings.Contains(err.Error(), tc.contains)) {
					t.Errorf("%s: %v; want it to say %q", name, err, tc.contains)
				}
			}
		})
	}
}

func TestResolveUncertainIsNotGone(t *testing.T) {
	// Not parallel: writing an executable while another test forks can
	// make exec fail with ETXTBSY (the child holds the write descriptor).
	c := New(Options{Binary: fakeTmux(t, `exec sleep 30`), NoDefaultServer: true, Timeout: 50 * time.Millisecond})
	_, err := c.Resolve(t.Context(), "/some/socket", "%1")
	if !errors.Is(err, ErrUncertain) || errors.Is(err, ErrPaneGone) {
		t.Errorf("Resolve with a hanging tmux: %v; want ErrUncertain, not ErrPaneGone", err)
	}
}

func TestListPanesPassesArguments(t *testing.T) {
	// Not parallel: writing an executable while another test forks can
	// make exec fail with ETXTBSY (the child holds the write descriptor).
	dir := t.TempDir()
	log := filepath.Join(dir, "args")
	bin := fakeTmux(t, `printf '%s\n' "$@" >> `+log+`; printf 'w\t0\t0\t7\tsh\t/x\t/s\t%%1\n'`)
	c := New(Options{Binary: bin, Sockets: []string{"/s"}})
	panes, err := c.ListPanes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// The default server and /s both answered with the same pane: one row.
	if len(panes) != 1 || panes[0].Socket != "/s" || panes[0].Queried != "" {
		t.Errorf("panes = %+v", panes)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	want := "-L\ndefault\nlist-panes\n-a\n-F\n" + ListFormat + "\n-S\n/s\nlist-panes\n-a\n-F\n" + ListFormat + "\n"
	if diff := cmp.Diff(want, string(b)); diff != "" {
		t.Errorf("tmux arguments (-want +got):\n%s", diff)
	}
}

func TestWatchOutput(t *testing.T) {
	s := newServer(t)
	idA := s.newSession(t, "w", "exec cat")
	idB := s.tmux(t, "split-window", "-P", "-F", "#{pane_id}", "-t", "w", "exec cat")
	c := s.client(Options{})
	a, b := s.pane(t, c, idA), s.pane(t, c, idB)
	wctx, stop := context.WithCancel(t.Context())
	defer stop()
	ch, err := c.WatchOutput(wctx, a)
	if err != nil {
		t.Fatal(err)
	}
	// Whatever the panes drew before is not of interest.
	select {
	case <-ch:
	default:
	}
	// Output in the other pane is dropped.
	if err := c.SendText(t.Context(), b, "other-pane"); err != nil {
		t.Fatal(err)
	}
	waitCapture(t, c, b, CaptureOptions{}, "other-pane")
	select {
	case <-ch:
		t.Error("output of another pane was reported")
	default:
	}
	// The watched pane's output (cat's echo) is.
	if err := c.SendText(t.Context(), a, "watched"); err != nil {
		t.Fatal(err)
	}
	select {
	case _, ok := <-ch:
		if !ok {
			t.Fatal("channel closed instead of reporting output")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no output reported for the watched pane")
	}
	// The session's size is untouched by the control client.
	if got := s.tmux(t, "display-message", "-p", "-t", idA, "#{window_width}x#{window_height}"); got != "100x30" {
		t.Errorf("window size = %s, want 100x30", got)
	}
	// Ending the context closes the channel.
	stop()
	drained(t, ch)

	// A session that goes away closes the channel too.
	ch2, err := c.WatchOutput(t.Context(), a)
	if err != nil {
		t.Fatal(err)
	}
	s.tmux(t, "kill-session", "-t", "w")
	drained(t, ch2)

	if _, err := c.WatchOutput(t.Context(), a); !errors.Is(err, ErrNotSent) {
		t.Errorf("watch of a gone pane: %v, want ErrNotSent", err)
	}
	legacy := a
	legacy.ID, legacy.Socket = "", ""
	if _, err := c.WatchOutput(t.Context(), legacy); !errors.Is(err, ErrInvalid) {
		t.Errorf("watch of a legacy pane: %v, want ErrInvalid", err)
	}
}

// drained waits (bounded) until ch is closed.
func drained(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("the output channel was not closed")
		}
	}
}

// TestWatchOutputSharesOneClientPerSession: the watches of a session's
// panes share one control client, which reports each pane's output to its
// own watches only and stops when the last watch ends; another session
// has its own (tmux reports a session's output only to its clients).
func TestWatchOutputSharesOneClientPerSession(t *testing.T) {
	s := newServer(t)
	idA := s.newSession(t, "w", "exec cat")
	idB := s.tmux(t, "new-window", "-d", "-P", "-F", "#{pane_id}", "-t", "w", "exec cat")
	idC := s.newSession(t, "v", "exec cat")
	c := s.client(Options{})
	a, b, pc := s.pane(t, c, idA), s.pane(t, c, idB), s.pane(t, c, idC)
	watch := func(p Pane) (<-chan struct{}, context.CancelFunc) {
		ctx, stop := context.WithCancel(t.Context())
		ch, err := c.WatchOutput(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		return ch, stop
	}
	chA, stopA := watch(a)
	chA2, stopA2 := watch(a) // a Turn monitor and a watch on one pane
	chB, stopB := watch(b)
	chC, stopC := watch(pc)
	defer stopC()
	clients := func() int {
		out := s.tmux(t, "list-clients", "-F", "#{client_control_mode}")
		return strings.Count(out, "1")
	}
	if n := clients(); n != 2 {
		t.Fatalf("%d control clients for two sessions, want 2", n)
	}
	for _, ch := range []<-chan struct{}{chA, chA2, chB, chC} {
		select { // whatever the panes drew before is not of interest
		case <-ch:
		default:
		}
	}
	got := func(ch <-chan struct{}, what string) {
		t.Helper()
		select {
		case _, ok := <-ch:
			if !ok {
				t.Fatalf("%s: channel closed instead of reporting output", what)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no output reported", what)
		}
	}
	if err := c.SendText(t.Context(), b, "bee"); err != nil {
		t.Fatal(err)
	}
	got(chB, "pane b")
	select {
	case <-chA:
		t.Fatal("pane b's output woke pane a's watch")
	default:
	}
	if err := c.SendText(t.Context(), a, "ay"); err != nil {
		t.Fatal(err)
	}
	got(chA, "pane a")
	got(chA2, "pane a's second watch")
	// One watch of a pane leaves; the client stays for the others.
	stopA()
	drained(t, chA)
	if err := c.SendText(t.Context(), a, "again"); err != nil {
		t.Fatal(err)
	}
	got(chA2, "pane a's remaining watch")
	c.ctlMu.Lock()
	var shared *control
	for _, cc := range c.controls {
		cc.mu.Lock()
		for _, id := range cc.subs {
			if id == idB {
				shared = cc
			}
		}
		cc.mu.Unlock()
	}
	c.ctlMu.Unlock()
	// The last watch of the session leaves: its client stops.
	stopA2()
	stopB()
	drained(t, chB)
	select {
	case <-shared.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the session's control client did not stop after its last watch ended")
	}
	if n := clients(); n != 1 {
		t.Fatalf("%d control clients after session w's watches ended, want 1 (session v's)", n)
	}
}

// TestCaptureOfAWatchedPaneUsesItsControlClient: a pane whose output is
// watched is captured through its session's control client, with the
// same text a capture-pane process prints, and no tmux process started.
func TestCaptureOfAWatchedPaneUsesItsControlClient(t *testing.T) {
	s := newServer(t)
	id := s.newSession(t, "w", "exec cat")
	c := s.client(Options{})
	p := s.pane(t, c, id)
	text := `héllo \ back % "q" 	tab`
	if err := c.SendText(t.Context(), p, text); err != nil {
		t.Fatal(err)
	}
	waitCapture(t, c, p, CaptureOptions{}, "tab")
	for _, opts := range []CaptureOptions{{}, {ANSI: true}, {Scrollback: -1}} {
		want, err := c.Capture(t.Context(), p, opts) // no watch: a process
		if err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(t.Context())
		if _, err := c.WatchOutput(ctx, p); err != nil {
			t.Fatal(err)
		}
		bin := c.bin
		c.bin = filepath.Join(s.dir, "no-tmux-here") // a process would fail now
		got, err := c.Capture(t.Context(), p, opts)
		c.bin = bin
		stop()
		if err != nil {
			t.Fatalf("capture %+v of a watched pane: %v", opts, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("capture %+v through the control client differs (-process +control):\n%s", opts, diff)
		}
	}
}

// BenchmarkCapture compares a capture that starts a tmux process with one
// sent through the control client of a watched pane's session.
func BenchmarkCapture(b *testing.B) {
	if _, err := exec.LookPath("tmux"); err != nil {
		b.Skip("tmux not installed")
	}
	dir, err := os.MkdirTemp("", "cctmux")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "s")
	if out, err := exec.Command("tmux", "-S", sock, "-f", "/dev/null", "new-session", "-d", "-s", "w", "-x", "100", "-y", "30", "exec cat").CombinedOutput(); err != nil {
		b.Fatalf("tmux: %v: %s", err, out)
	}
	defer func() { _ = exec.Command("tmux", "-S", sock, "kill-server").Run() }()
	c := New(Options{Sockets: []string{sock}, NoDefaultServer: true})
	panes, err := c.ListPanes(b.Context())
	if err != nil || len(panes) != 1 {
		b.Fatalf("panes = %v, %v", panes, err)
	}
	p := panes[0]
	b.Run("process", func(b *testing.B) {
		for b.Loop() {
			if _, err := c.Capture(b.Context(), p, CaptureOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("control", func(b *testing.B) {
		ctx, stop := context.WithCancel(b.Context())
		defer stop()
		if _, err := c.WatchOutput(ctx, p); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := c.Capture(b.Context(), p, CaptureOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
