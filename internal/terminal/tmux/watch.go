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
	"time"
)

// WatchOutput reports when the pane writes output, so a monitor can look
// at it at once instead of polling. It starts a tmux control-mode client
// attached to the pane's session with the flags ignore-size and read-only,
// so it neither resizes the user's windows nor types anything, and waits
// (bounded by Options.Timeout) until tmux has attached it: a pane or
// server that is gone is an error then (ErrNotSent, or ErrUncertain on a
// timeout).
//
// The returned channel has capacity one and is coalesced: one value
// means "output since the last receive". It is closed when ctx ends or
// the control client exits (the session or the server went away); the
// one goroutine reading tmux ends with it. Output of the session's other
// panes is read and dropped.
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
	args := []string{"-C", "attach-session", "-f", "ignore-size,read-only", "-t", t}
	if sock := p.server(); sock != "" {
		args = append([]string{"-S", sock}, args...)
	} else {
		args = append([]string{"-L", "default"}, args...)
	}
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.WaitDelay = time.Second
	// A control client ends at EOF on its stdin: keep a pipe open for its
	// lifetime (closed when the process is reaped).
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("tmux watch output of %s: %w", t, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("tmux watch output of %s: %w", t, err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("tmux watch output of %s: %w: %w: %w", t, ErrNotSent, ErrNoTmux, err)
	}
	r := bufio.NewReaderSize(stdout, 64<<10)
	attached := make(chan error, 1)
	ch := make(chan struct{}, 1)
	prefix := []byte("%output " + p.ID + " ")
	go func() {
		defer close(ch)
		waited := false
		wait := func() {
			if !waited {
				waited = true
				_ = stdin.Close()
				_ = cmd.Wait()
			}
		}
		defer wait()
		started := false
		var reply []string // lines of a command reply (between %begin and %end/%error)
		for {
			line, err := readLine(r)
			if err != nil {
				if !started {
					wait() // stderr is complete only once tmux is reaped
					attached <- fmt.Errorf("%w: control client ended before attaching: %s", ErrNotSent, clip(strings.TrimSpace(strings.Join(append(reply, stderr.String()), " "))))
				}
				return
			}
			if started {
				if bytes.HasPrefix(line, prefix) {
					select {
					case ch <- struct{}{}:
					default:
					}
				} else if bytes.HasPrefix(line, []byte("%exit")) {
					return
				}
				continue
			}
			switch s := string(line); {
			case strings.HasPrefix(s, "%session-changed "):
				started = true
				attached <- nil
			case strings.HasPrefix(s, "%error "), strings.HasPrefix(s, "%exit"):
				attached <- fmt.Errorf("%w: %s", ErrNotSent, clip(strings.Join(reply, " ")))
				return
			case strings.HasPrefix(s, "%begin "), strings.HasPrefix(s, "%end "):
			case !strings.HasPrefix(s, "%"):
				reply = append(reply, s)
			}
		}
	}()
	timer := time.NewTimer(c.timeout)
	defer timer.Stop()
	select {
	case err := <-attached:
		if err != nil {
			return nil, fmt.Errorf("tmux watch output of %s: %w", t, err)
		}
		return ch, nil
	case <-timer.C:
		_ = cmd.Process.Kill()
		for range ch {
		}
		return nil, fmt.Errorf("tmux watch output of %s: %w: not attached within %s", t, ErrUncertain, c.timeout)
	case <-ctx.Done():
		for range ch { // the context kills tmux; wait for the reader to end
		}
		return nil, fmt.Errorf("tmux watch output of %s: %w: %w", t, ErrUncertain, ctx.Err())
	}
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
