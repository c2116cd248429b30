package tmux

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// WatchOutput reports when the pane writes output, so a monitor can look
// at it at once instead of polling. Output is read from a tmux control-mode
// client attached to the pane's session with the flags ignore-size and
// read-only, so it neither resizes the user's windows nor types anything.
// Every watch of the session's panes shares that one client (tmux reports
// to a control client the output of its own session's panes only, so one
// per session is the fewest that hear them all); the first watch starts it
// and waits (bounded by Options.Timeout) until tmux has attached it, and
// the last one to end stops it. A pane or server that is gone is an error
// (ErrNotSent, or ErrUncertain on a timeout).
//
// The returned channel has capacity one and is coalesced: one value
// means "output since the last receive". It is closed when ctx ends or
// the control client exits (the session or the server went away).
func (c *Client) WatchOutput(ctx context.Context, p Pane) (<-chan struct{}, error) {
	t, err := p.target()
	if err != nil {
		return nil, fmt.Errorf("tmux watch output: %w", err)
	}
	if p.ID == "" {
		return nil, fmt.Errorf("tmux watch output of %s: %w: a legacy pane without a pane id", t, ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("tmux watch output of %s: %w: not started: %w", t, ErrNotSent, err)
	}
	// The session the pane is in now (a listed name may be stale): also
	// proves the pane still exists.
	out, err := c.run(ctx, p.server(), "display-message", "-p", "-t", t, "#{session_id}")
	if err != nil {
		return nil, fmt.Errorf("tmux watch output of %s: %w", t, err)
	}
	session := strings.TrimSpace(string(out))
	key := p.server() + "\t" + session
	ch := make(chan struct{}, 1)
	c.ctlMu.Lock()
	cc := c.controls[key]
	if cc == nil {
		if cc, err = c.startControl(key, p.server(), session); err != nil {
			c.ctlMu.Unlock()
			return nil, fmt.Errorf("tmux watch output of %s: %w", t, err)
		}
		c.controls[key] = cc
	}
	cc.mu.Lock()
	cc.subs[ch] = p.ID // under ctlMu: the client cannot stop meanwhile
	cc.mu.Unlock()
	c.ctlMu.Unlock()
	select {
	case <-cc.ready:
	case <-ctx.Done():
		c.unwatch(cc, ch)
		return nil, fmt.Errorf("tmux watch output of %s: %w: %w", t, ErrUncertain, ctx.Err())
	}
	if cc.err != nil {
		c.unwatch(cc, ch)
		return nil, fmt.Errorf("tmux watch output of %s: %w", t, cc.err)
	}
	context.AfterFunc(ctx, func() { c.unwatch(cc, ch) })
	return ch, nil
}

// control is one control-mode client and the watches it serves.
type control struct {
	key    string
	cancel context.CancelFunc // kills the client
	ready  chan struct{}      // closed once attached, or err set
	err    error              // why it did not attach; set before ready closes
	done   chan struct{}      // closed when its reader ended

	mu      sync.Mutex
	subs    map[chan struct{}]string // watch channel → pane id; closed and emptied when the client ends
	stdin   io.Writer                // commands (Client.Capture); written under mu
	pending []chan reply             // replies awaited, in the order the commands were written
	over    bool                     // the client ended: no more commands
}

// reply is the output of one command sent through a control client.
type reply struct {
	out []byte
	err error
}

// unwatch ends one watch; the last one stops the client. Idempotent.
func (c *Client) unwatch(cc *control, ch chan struct{}) {
	c.ctlMu.Lock()
	defer c.ctlMu.Unlock()
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if _, ok := cc.subs[ch]; !ok {
		return // ended with the client
	}
	delete(cc.subs, ch)
	close(ch)
	if len(cc.subs) == 0 {
		if c.controls[cc.key] == cc {
			delete(c.controls, cc.key)
		}
		cc.cancel()
	}
}

// ended forgets a client that exited and closes its watches.
func (c *Client) ended(cc *control) {
	c.ctlMu.Lock()
	if c.controls[cc.key] == cc {
		delete(c.controls, cc.key)
	}
	c.ctlMu.Unlock()
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for ch := range cc.subs {
		close(ch)
	}
	clear(cc.subs)
	cc.over = true
	for _, r := range cc.pending {
		r <- reply{err: fmt.Errorf("%w: the control client ended", ErrUncertain)}
	}
	cc.pending = nil
}

// wake tells the watches of pane id that it wrote output.
func (cc *control) wake(id string) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for ch, pane := range cc.subs {
		if pane == id {
			select {
			case ch <- struct{}{}:
			default: // a wake-up is pending already
			}
		}
	}
}

// startControl starts the control client of session on server; its
// reader runs until the client exits (the session or server went away,
// or the last watch stopped it).
func (c *Client) startControl(key, server, session string) (*control, error) {
	ctx, cancel := context.WithCancel(context.Background())
	cc := &control{key: key, cancel: cancel, ready: make(chan struct{}), done: make(chan struct{}), subs: map[chan struct{}]string{}}
	args := []string{"-C", "attach-session", "-f", "ignore-size,read-only", "-t", session}
	if server != "" {
		args = append([]string{"-S", server}, args...)
	} else {
		args = append([]string{"-L", "default"}, args...)
	}
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.WaitDelay = time.Second
	// A control client ends at EOF on its stdin: keep a pipe open for its
	// lifetime (closed when the process is reaped).
	stdin, err := cmd.StdinPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("%w: %w: %w", ErrNotSent, ErrNoTmux, err)
	}
	cc.stdin = stdin
	reap := sync.OnceFunc(func() { _ = stdin.Close(); _ = cmd.Wait() })
	attached := make(chan error, 1)
	go func() {
		defer close(cc.done)
		defer c.ended(cc)
		defer reap()
		r := bufio.NewReaderSize(stdout, 64<<10)
		err := awaitAttach(r, &stderr, reap)
		attached <- err
		if err == nil {
			cc.follow(r)
		}
	}()
	go func() {
		timer := time.NewTimer(c.timeout)
		defer timer.Stop()
		select {
		case err := <-attached:
			cc.err = err
		case <-timer.C:
			cancel()
			cc.err = fmt.Errorf("%w: not attached within %s", ErrUncertain, c.timeout)
		}
		close(cc.ready)
	}()
	return cc, nil
}

// awaitAttach reads the control client's lines until tmux attached it;
// a client that ends first is reaped (its stderr is complete only then)
// and is ErrNotSent with what tmux said.
func awaitAttach(r *bufio.Reader, stderr *bytes.Buffer, reap func()) error {
	var reply []string // lines of a command reply (between %begin and %end/%error)
	for {
		line, err := readLine(r)
		if err != nil {
			reap()
			return fmt.Errorf("%w: control client ended before attaching: %s", ErrNotSent, clip(strings.TrimSpace(strings.Join(append(reply, stderr.String()), " "))))
		}
		switch s := string(line); {
		case strings.HasPrefix(s, "%session-changed "):
			return nil
		case strings.HasPrefix(s, "%error "), strings.HasPrefix(s, "%exit"):
			return fmt.Errorf("%w: %s", ErrNotSent, clip(strings.Join(reply, " ")))
		case strings.HasPrefix(s, "%begin "), strings.HasPrefix(s, "%end "):
		case !strings.HasPrefix(s, "%"):
			reply = append(reply, s)
		}
	}
}

// follow wakes the watches of each pane that writes output (the session's
// other notifications are read and dropped) and hands each command reply
// (a %begin … %end or %error block; tmux sends no notification inside
// one) to its caller, until the client exits.
func (cc *control) follow(r *bufio.Reader) {
	var block []byte // the %begin line's "time number flags", while in a block
	var out []byte
	for {
		line, err := readLine(r)
		if err != nil {
			return
		}
		if block != nil {
			end, isEnd := bytes.CutPrefix(line, []byte("%end "))
			fail, isErr := bytes.CutPrefix(line, []byte("%error "))
			switch {
			case isEnd && bytes.Equal(end, block):
				cc.answer(reply{out: out})
			case isErr && bytes.Equal(fail, block):
				cc.answer(reply{err: fmt.Errorf("%w: %s", ErrNotSent, clip(strings.TrimSpace(string(out))))})
			default:
				out = append(append(out, line...), '\n')
				continue
			}
			block, out = nil, nil
			continue
		}
		if rest, ok := bytes.CutPrefix(line, []byte("%output ")); ok {
			id, _, _ := bytes.Cut(rest, []byte(" "))
			cc.wake(string(id))
		} else if rest, ok := bytes.CutPrefix(line, []byte("%begin ")); ok {
			block, out = bytes.Clone(rest), []byte{}
		} else if bytes.HasPrefix(line, []byte("%exit")) {
			return
		}
	}
}

// answer hands r to the oldest command awaiting its reply.
func (cc *control) answer(r reply) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if len(cc.pending) == 0 {
		return // not ours (none is sent but through command)
	}
	cc.pending[0] <- r
	cc.pending = cc.pending[1:]
}

// command runs one tmux command line through the control client and
// returns its output, bounded by timeout and ctx. A command whose reply
// does not come in time is ErrUncertain.
func (cc *control) command(ctx context.Context, timeout time.Duration, line string) ([]byte, error) {
	ch := make(chan reply, 1)
	cc.mu.Lock()
	if cc.over {
		cc.mu.Unlock()
		return nil, fmt.Errorf("%w: the control client ended", ErrNotSent)
	}
	if _, err := io.WriteString(cc.stdin, line+"\n"); err != nil {
		cc.mu.Unlock()
		return nil, fmt.Errorf("%w: %w", ErrNotSent, err)
	}
	cc.pending = append(cc.pending, ch)
	cc.mu.Unlock()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case r := <-ch:
		return r.out, r.err
	case <-timer.C:
		return nil, fmt.Errorf("%w: no reply within %s", ErrUncertain, timeout)
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", ErrUncertain, ctx.Err())
	}
}

// paneControl returns the attached control client that serves a watch of
// p, or nil.
func (c *Client) paneControl(p Pane) *control {
	if p.ID == "" {
		return nil
	}
	prefix := p.server() + "\t"
	c.ctlMu.Lock()
	defer c.ctlMu.Unlock()
	for key, cc := range c.controls {
		if !strings.HasPrefix(key, prefix) {
			continue
		}
		select {
		case <-cc.ready:
		default:
			continue
		}
		if cc.err != nil {
			continue
		}
		cc.mu.Lock()
		for _, id := range cc.subs {
			if id == p.ID {
				cc.mu.Unlock()
				return cc
			}
		}
		cc.mu.Unlock()
	}
	return nil
}

// readLine returns the next line without its newline; of a line longer
// than the reader's buffer only the start is returned, the rest skipped.
func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		start := append([]byte(nil), line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			_, err = r.ReadSlice('\n')
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		return start, nil
	}
	if err != nil {
		return nil, err
	}
	return bytes.TrimRight(line, "\r\n"), nil
}
