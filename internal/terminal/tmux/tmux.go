// Package tmux is the tmux provider of terminal turns: it discovers panes
// on the default server, the server of $TMUX and extra sockets, addresses
// each pane by its stable %pane_id on its canonical socket, captures its
// screen, and sends it text and keys with exact error semantics: a tmux
// that ran and failed (or never started) means the input was not sent
// (ErrNotSent); a tmux that was killed or timed out means the outcome is
// uncertain (ErrUncertain), and such input must never be sent again.
//
// Every operation runs one tmux command with a bounded time; a Client
// keeps no state between calls but its list of servers (which AddSockets
// extends) and the control-mode clients that report pane output (one per
// tmux session, while anyone watches its panes), through which a watched
// pane is also captured without starting a tmux process. It is safe for
// concurrent use.
package tmux

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Sentinel errors; match them with errors.Is.
var (
	// ErrNotSent means the tmux command had no effect: tmux could not be
	// started, or it ran and reported failure. For a send, the input did
	// not reach the pane.
	ErrNotSent = errors.New("tmux: command failed, input not sent")
	// ErrUncertain means tmux was killed or timed out (or its context
	// ended while it ran): the command may or may not have taken effect.
	// Input whose outcome is uncertain must never be sent again.
	ErrUncertain = errors.New("tmux: command killed or timed out, outcome uncertain")
	// ErrPaneGone means no pane with the requested identity exists any
	// more (its server is gone, or the pane was closed).
	ErrPaneGone = errors.New("tmux: pane no longer available")
	// ErrAmbiguous means more than one pane matched an identity that
	// must be unique.
	ErrAmbiguous = errors.New("tmux: pane identity is ambiguous")
	// ErrNoTmux means the tmux executable could not be started (not
	// installed, not executable); it comes with ErrNotSent.
	ErrNoTmux = errors.New("tmux: cannot start tmux")
	// ErrInvalid reports bad arguments (empty text, an unknown key, a
	// pane without an address); nothing was run.
	ErrInvalid = errors.New("tmux: invalid argument")
)

// DefaultTimeout bounds each tmux command when Options.Timeout is zero.
const DefaultTimeout = 5 * time.Second

// DefaultScrollback is the number of history lines Capture reads when it
// is given zero.
const DefaultScrollback = 200

// Options configures a Client. The zero value lists the default server
// only, with the tmux found on PATH.
type Options struct {
	// Binary is the tmux executable; default "tmux" looked up on PATH.
	Binary string
	// TMUX is the value of the caller's $TMUX environment variable
	// ("<socket>,<server pid>,<session>"); its socket is listed too.
	// The caller reads the environment; this package never does.
	TMUX string
	// Sockets are extra server sockets to list (for example from
	// CLAWCONNECT_TMUX_SOCKETS, split by the caller).
	Sockets []string
	// NoDefaultServer leaves out the default server (tmux -L default,
	// not the $TMUX server a tmux without -S would follow).
	// Tests set it so they never touch a user's server.
	NoDefaultServer bool
	// Timeout bounds each tmux command; default DefaultTimeout.
	Timeout time.Duration
	// Logger receives debug records of skipped sockets and rejected
	// lines; nil discards them.
	Logger *slog.Logger
}

// Client runs tmux commands. It is safe for concurrent use.
type Client struct {
	bin     string
	mu      sync.Mutex
	sockets []string // "" is the default server; guarded by mu
	timeout time.Duration
	log     *slog.Logger

	// controls are the running control-mode clients, one per tmux
	// session, shared by every WatchOutput of its panes (watch.go).
	ctlMu    sync.Mutex
	controls map[string]*control
}

// New returns a Client for opts.
func New(opts Options) *Client {
	c := &Client{bin: opts.Binary, timeout: opts.Timeout, log: opts.Logger, controls: map[string]*control{}}
	if c.bin == "" {
		c.bin = "tmux"
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	seen := map[string]bool{}
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			c.sockets = append(c.sockets, s)
		}
	}
	if !opts.NoDefaultServer {
		add("")
	}
	if s, _, _ := strings.Cut(opts.TMUX, ","); s != "" {
		add(s)
	}
	for _, s := range opts.Sockets {
		if s = strings.TrimSpace(s); s != "" {
			add(s)
		}
	}
	return c
}

// Sockets returns the servers ListPanes queries, in order; "" is the
// default server.
func (c *Client) Sockets() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.sockets...)
}

// AddSockets makes ListPanes query the servers at paths too, from now on,
// and returns how many it did not query yet. The caller validates the
// paths; an empty one is ignored.
func (c *Client) AddSockets(paths ...string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, p := range paths {
		if p == "" || slices.Contains(c.sockets, p) {
			continue
		}
		c.sockets = append(c.sockets, p)
		n++
	}
	return n
}

// Pane is one tmux pane as list-panes reported it.
type Pane struct {
	// Session, Window and Index locate the pane (see Target).
	Session string
	Window  int
	Index   int
	// PID is the pane's process (#{pane_pid}), usually a shell.
	PID int
	// Command is #{pane_current_command}; Path is #{pane_current_path}.
	Command string
	Path    string
	// Socket is the server's canonical socket (#{socket_path}) and ID the
	// stable pane id (%N). Both are empty for a legacy line.
	Socket string
	ID     string
	// Queried is the socket the listing ran against ("" = default server).
	Queried string
}

// Target is the pane's "session:window.pane" address.
func (p Pane) Target() string {
	return p.Session + ":" + strconv.Itoa(p.Window) + "." + strconv.Itoa(p.Index)
}

// Key is the identity Discover de-duplicates by and Resolve looks up:
// "<socket>\t<%N>", or for a legacy pane "<target>\t<pid>".
func (p Pane) Key() string {
	if p.ID != "" {
		return p.Socket + "\t" + p.ID
	}
	return p.Target() + "\t" + strconv.Itoa(p.PID)
}

// server is the -S argument for I/O on the pane: the canonical socket,
// else the socket it was listed on.
func (p Pane) server() string {
	if p.Socket != "" {
		return p.Socket
	}
	return p.Queried
}

// target is the -t argument: the stable pane id, else the legacy target.
// An id that is not %N is refused: a watched pane's capture writes its
// target into a control client's command line, which tmux parses whole.
func (p Pane) target() (string, error) {
	if p.ID != "" {
		if !paneIDRE().MatchString(p.ID) {
			return "", fmt.Errorf("%w: pane id %q is not %%N", ErrInvalid, p.ID)
		}
		return p.ID, nil
	}
	if p.Session == "" {
		return "", fmt.Errorf("%w: pane has neither a pane id nor a session", ErrInvalid)
	}
	return p.Target(), nil
}

// ListPanes lists every pane on every configured server, de-duplicated by
// canonical socket and pane id (a server reachable under two paths is
// listed once). A server that is not running, or whose tmux fails, is
// skipped (logged at debug); so are lines ParseLine rejects. It returns an
// error only when ctx ends or tmux cannot be started at all (ErrNoTmux),
// so that a missing tmux is not mistaken for a machine without panes.
func (c *Client) ListPanes(ctx context.Context) ([]Pane, error) {
	var all []Pane
	seen := map[string]bool{}
	for _, s := range c.Sockets() {
		panes, err := c.ListSocket(ctx, s)
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("tmux list panes: %w", ctx.Err())
			}
			if errors.Is(err, ErrNoTmux) {
				return nil, fmt.Errorf("tmux list panes: %w (is tmux installed? Options.Binary is %q)", err, c.bin)
			}
			c.log.Debug("tmux socket skipped", "socket", s, "err", err)
		}
		for _, p := range panes {
			if k := p.Key(); !seen[k] {
				seen[k] = true
				all = append(all, p)
			}
		}
	}
	return all, nil
}

// ListSocket lists the panes of one server ("" = default server). Lines
// that do not parse are logged and left out; the panes that parsed are
// returned with a nil error. A tmux failure is an error wrapping
// ErrNotSent (the server is not running, for example) or ErrUncertain.
func (c *Client) ListSocket(ctx context.Context, socket string) ([]Pane, error) {
	out, err := c.run(ctx, socket, "list-panes", "-a", "-F", ListFormat)
	if err != nil {
		return nil, fmt.Errorf("tmux list panes on %s: %w", socketName(socket), err)
	}
	panes, perr := ParseListPanes(out, socket)
	if perr != nil {
		c.log.Debug("tmux list-panes lines rejected", "socket", socket, "err", perr)
	}
	return panes, nil
}

// Resolve lists the panes of socket again and returns the one whose pane
// id is paneID. No match is ErrPaneGone (also when the server is gone);
// more than one is ErrAmbiguous; a timed-out tmux is ErrUncertain.
func (c *Client) Resolve(ctx context.Context, socket, paneID string) (Pane, error) {
	if socket == "" || !paneIDRE().MatchString(paneID) {
		return Pane{}, fmt.Errorf("tmux resolve %q on %q: %w: want a socket path and a pane id %%N", paneID, socket, ErrInvalid)
	}
	panes, err := c.ListSocket(ctx, socket)
	if err != nil {
		if errors.Is(err, ErrUncertain) {
			return Pane{}, fmt.Errorf("tmux resolve %s: %w", paneID, err)
		}
		return Pane{}, fmt.Errorf("tmux resolve %s on %s: %w: %w", paneID, socket, ErrPaneGone, err)
	}
	var found []Pane
	for _, p := range panes {
		if p.ID == paneID && p.Socket == socket {
			found = append(found, p)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return Pane{}, fmt.Errorf("tmux resolve %s on %s: %w", paneID, socket, ErrPaneGone)
	default:
		return Pane{}, fmt.Errorf("tmux resolve %s on %s: %w: %d panes match", paneID, socket, ErrAmbiguous, len(found))
	}
}

// CaptureOptions says what Capture reads.
type CaptureOptions struct {
	// Scrollback is how many history lines above the visible screen to
	// include; zero means DefaultScrollback, negative means none.
	Scrollback int
	// ANSI keeps the escape sequences for colours and attributes (-e).
	ANSI bool
}

// Capture returns the pane's screen text (capture-pane -p).
func (c *Client) Capture(ctx context.Context, p Pane, opts CaptureOptions) (string, error) {
	t, err := p.target()
	if err != nil {
		return "", fmt.Errorf("tmux capture: %w", err)
	}
	args := []string{"capture-pane", "-p", "-t", t}
	if opts.ANSI {
		args = append(args, "-e")
	}
	n := opts.Scrollback
	if n == 0 {
		n = DefaultScrollback
	}
	if n > 0 {
		args = append(args, "-S", "-"+strconv.Itoa(n))
	}
	if cc := c.paneControl(p); cc != nil {
		// A watched pane: ask through its session's control client
		// rather than start a tmux process per look. Any failure there
		// falls back to the process (a capture changes nothing).
		if out, err := cc.command(ctx, c.timeout, strings.Join(args, " ")); err == nil {
			return string(out), nil
		}
	}
	out, err := c.run(ctx, p.server(), args...)
	if err != nil {
		return "", fmt.Errorf("tmux capture %s: %w", t, err)
	}
	return string(out), nil
}

// Size returns the pane's width and height in cells.
func (c *Client) Size(ctx context.Context, p Pane) (width, height int, err error) {
	t, err := p.target()
	if err != nil {
		return 0, 0, fmt.Errorf("tmux size: %w", err)
	}
	out, err := c.run(ctx, p.server(), "display-message", "-p", "-t", t, "#{pane_width}\t#{pane_height}")
	if err != nil {
		return 0, 0, fmt.Errorf("tmux size %s: %w", t, err)
	}
	w, h, ok := strings.Cut(strings.TrimSpace(string(out)), "\t")
	if width, err = atoi(w); ok && err == nil {
		height, err = atoi(h)
	}
	if !ok || err != nil {
		return 0, 0, fmt.Errorf("tmux size %s: unexpected display-message output %q", t, clip(string(out)))
	}
	return width, height, nil
}

// SendText types text into the pane without pressing Enter. One line is
// sent with `send-keys -l`; text containing CR, LF or a tab goes through a
// named buffer pasted with bracketed paste (`set-buffer -b` then
// `paste-buffer -p -d`), and the buffer is deleted if the paste fails: a
// tab typed as a key is the agent's Tab (Claude Code 2.1.332 drops it from
// the draft), pasted it is text. Either way the text arrives byte for
// byte, a final ';' included (literalArg). Empty text and
// text holding NUL are refused with ErrInvalid. Errors wrap ErrNotSent or
// ErrUncertain; after ErrUncertain the text must not be sent again.
func (c *Client) SendText(ctx context.Context, p Pane, text string) error {
	t, err := p.target()
	if err != nil {
		return fmt.Errorf("tmux send text: %w", err)
	}
	if text == "" || strings.ContainsRune(text, 0) {
		return fmt.Errorf("tmux send text to %s: %w: text is empty or holds NUL", t, ErrInvalid)
	}
	sock := p.server()
	if !strings.ContainsAny(text, "\r\n\t") {
		if _, err := c.run(ctx, sock, "send-keys", "-t", t, "-l", "--", literalArg(text)); err != nil {
			return fmt.Errorf("tmux send text to %s: %w", t, err)
		}
		return nil
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	buf := "clawconnect-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(rnd[:])
	if _, err := c.run(ctx, sock, "set-buffer", "-b", buf, "--", literalArg(text)); err != nil {
		if errors.Is(err, ErrUncertain) {
			c.deleteBuffer(sock, buf)
		}
		return fmt.Errorf("tmux send text to %s: set buffer: %w", t, err)
	}
	if _, err := c.run(ctx, sock, "paste-buffer", "-p", "-d", "-b", buf, "-t", t); err != nil {
		c.deleteBuffer(sock, buf)
		return fmt.Errorf("tmux send text to %s: paste buffer: %w", t, err)
	}
	return nil
}

// literalArg returns s as a tmux command argument that tmux reads back as
// s. tmux splits its argv into commands before running them: an argument
// whose last byte is ';' ends a command there (the ';' is dropped), and
// one ending in `\;` is read as ending in ';'. Only the last byte and
// the one before it count, so a backslash put before a final ';' keeps
// every byte: "a;" is sent as `a\;`, `a\;` as `a\\;`.
func literalArg(s string) string {
	if strings.HasSuffix(s, ";") {
		return s[:len(s)-1] + `\;`
	}
	return s
}

// deleteBuffer removes a leftover paste buffer; it runs on its own short
// context because the caller's may have ended.
func (c *Client) deleteBuffer(sock, buf string) {
	ctx, cancel := context.WithTimeout(context.Background(), min(c.timeout, 2*time.Second))
	defer cancel()
	if _, err := c.run(ctx, sock, "delete-buffer", "-b", buf); err != nil {
		c.log.Debug("tmux delete buffer", "buffer", buf, "err", err)
	}
}

// Key is a tmux key name for SendKeys.
type Key string

// Keys the terminal turns send.
const (
	KeyEnter  Key = "C-m"
	KeyEscape Key = "Escape"
	KeyCtrlC  Key = "C-c"
	KeyYes    Key = "y"
	KeyUp     Key = "Up"
	KeyDown   Key = "Down"
	KeyTab    Key = "Tab"
)

// keyRE accepts tmux key names (Enter, C-m, M-x, F1, y, BSpace, …) and
// nothing that could be read as an option or as literal text.
var keyRE = lazyRE(`^(?:[CMS]-)*(?:[A-Za-z][A-Za-z0-9]*|[0-9])$`)

// SendKeys presses keys in the pane, in order, with one `send-keys` call
// (without -l, so they are key names). It is always a separate call from
// SendText. Keys that are not tmux key names are refused with ErrInvalid.
// Errors wrap ErrNotSent or ErrUncertain.
func (c *Client) SendKeys(ctx context.Context, p Pane, keys ...Key) error {
	t, err := p.target()
	if err != nil {
		return fmt.Errorf("tmux send keys: %w", err)
	}
	if len(keys) == 0 {
		return fmt.Errorf("tmux send keys to %s: %w: no keys", t, ErrInvalid)
	}
	args := []string{"send-keys", "-t", t}
	for _, k := range keys {
		if !keyRE().MatchString(string(k)) {
			return fmt.Errorf("tmux send keys to %s: %w: %q is not a tmux key name", t, ErrInvalid, k)
		}
		args = append(args, string(k))
	}
	if _, err := c.run(ctx, p.server(), args...); err != nil {
		return fmt.Errorf("tmux send keys to %s: %w", t, err)
	}
	return nil
}

// run runs tmux -S socket args... (-L default for the default server)
// bounded by c.timeout and ctx, and returns its stdout. A tmux that did not start or exited non-zero is
// ErrNotSent (with its stderr); one that was killed or outlived its time
// is ErrUncertain.
func (c *Client) run(ctx context.Context, socket string, args ...string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: not started: %w", ErrNotSent, err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	// Without -S, tmux would follow $TMUX (inherited) to the server the
	// caller runs in; -L default names the default server itself.
	full := append([]string{"-L", "default"}, args...)
	if socket != "" {
		full = append([]string{"-S", socket}, args...)
	}
	cmd := exec.CommandContext(ctx, c.bin, full...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if err == nil {
		return stdout.Bytes(), nil
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUncertain, args[0], ctx.Err())
	}
	var exit *exec.ExitError
	if errors.Is(err, exec.ErrWaitDelay) {
		return nil, fmt.Errorf("%w: %s: %w", ErrUncertain, args[0], err)
	}
	if errors.As(err, &exit) {
		if exit.Exited() {
			return nil, fmt.Errorf("%w: %s exited %d: %s", ErrNotSent, args[0], exit.ExitCode(), clip(strings.TrimSpace(stderr.String())))
		}
		return nil, fmt.Errorf("%w: %s: %w", ErrUncertain, args[0], err)
	}
	return nil, fmt.Errorf("%w: %w: %s did not start: %w", ErrNotSent, ErrNoTmux, args[0], err)
}

func socketName(s string) string {
	if s == "" {
		return "the default server"
	}
	return s
}

// KeySocket returns the server socket a pane key (Pane.Key) names, or ""
// for a legacy key, which names none.
func KeySocket(key string) string {
	s, id, ok := strings.Cut(key, "\t")
	if !ok || !strings.HasPrefix(id, "%") {
		return ""
	}
	return s
}
