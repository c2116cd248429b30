package module

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clawconnect/clawconnect/agentsession"
	"github.com/clawconnect/clawconnect/internal/backoff"
)

// Errors a proxy callback may return; dispatch records them as <op>_failed.
var (
	errClosed  = errors.New("module loader closed")
	errExited  = errors.New("module exited")
	errBackoff = errors.New("module is restarting after a failure")
)

// stderrLineMax bounds one forwarded stderr line; longer lines are cut.
const stderrLineMax = 4096

// stderrLinesPerSecond bounds the stderr lines forwarded per second; the
// rest are counted and reported as suppressed.
const stderrLinesPerSecond = 100

// moduleClient supervises one module executable: it starts it, restarts it
// with backoff after it exits, and multiplexes concurrent calls over its
// stdin and stdout.
type moduleClient struct {
	name string
	path string
	args []string
	cfg  *config

	startSem chan struct{} // one (re)start at a time
	wg       sync.WaitGroup

	mu       sync.Mutex
	cur      *proc
	closed   bool
	failures int
	retryAt  time.Time
	served   map[string]map[agentsession.Op]bool
}

// proc is one running process of a module.
type proc struct {
	c       *moduleClient
	cmd     *exec.Cmd
	stdin   *os.File
	writeMu chan struct{} // 1 slot; a channel so that waiting honours ctx
	nextID  atomic.Int64

	mu      sync.Mutex
	pending map[int64]chan *message
	exited  bool
	exitErr error
	done    chan struct{} // closed once the process is gone and its pipes drained
	fatal   atomic.Value  // string: why the host killed it
}

func newModuleClient(name, path string, args []string, cfg *config) *moduleClient {
	return &moduleClient{name: name, path: path, args: args, cfg: cfg, startSem: make(chan struct{}, 1)}
}

// start spawns the module and runs describe. The process is left running
// only when describe succeeded.
func (c *moduleClient) start(ctx context.Context) (*proc, describeResult, error) {
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, describeResult{}, fmt.Errorf("start: %w", err)
	}
	cmd := exec.Command(c.path, c.args...)
	cmd.Env = c.cfg.env
	cmd.Stdin = stdinR
	cmd.WaitDelay = 2 * time.Second
	setProcessGroup(cmd)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		return nil, describeResult{}, fmt.Errorf("start: %w", err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		return nil, describeResult{}, fmt.Errorf("start: %w", err)
	}
	if err := cmd.Start(); err != nil {
		stdinR.Close()
		stdinW.Close()
		return nil, describeResult{}, fmt.Errorf("start: %w", err)
	}
	stdinR.Close() // the child holds its own copy
	p := &proc{
		c: c, cmd: cmd, stdin: stdinW, writeMu: make(chan struct{}, 1),
		pending: map[int64]chan *message{}, done: make(chan struct{}),
	}
	c.wg.Go(func() { p.supervise(stdout, stderr) })

	dctx, cancel := context.WithTimeout(ctx, c.cfg.describeTimeout)
	defer cancel()
	res, rerr, err := p.call(dctx, methodDescribe, describeParams{ProtocolVersion: ProtocolVersion})
	if err == nil && rerr != nil {
		err = fmt.Errorf("describe answered error %d: %s", rerr.Code, rerr.Message)
	}
	var desc describeResult
	if err == nil {
		desc, err = c.parseDescribe(res)
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("no describe answer within %s", c.cfg.describeTimeout)
		}
		p.stop(0)
		return nil, describeResult{}, err
	}
	return p, desc, nil
}

// parseDescribe validates a describe result. Invalid runtimes are logged
// and skipped; a module with no valid runtime is an error.
func (c *moduleClient) parseDescribe(raw json.RawMessage) (describeResult, error) {
	var res describeResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return describeResult{}, fmt.Errorf("bad describe answer: %w", err)
	}
	if res.ProtocolVersion != ProtocolVersion {
		return describeResult{}, fmt.Errorf("bad describe answer: protocolVersion %d, want %d", res.ProtocolVersion, ProtocolVersion)
	}
	valid := res.Runtimes[:0]
	seen := map[string]bool{}
	for _, rt := range res.Runtimes {
		ops, unknown := operationsOf(rt.Operations)
		switch {
		case !agentsession.ValidRuntimeID(rt.ID):
			c.cfg.log.Error("[agent-session] runtime module describes an invalid runtime id; skipped", "module", c.name, "runtime", rt.ID)
			continue
		case !ops[agentsession.OpInspect]:
			c.cfg.log.Error("[agent-session] runtime module describes a runtime without inspect; skipped", "module", c.name, "runtime", rt.ID)
			continue
		case seen[rt.ID]:
			c.cfg.log.Error("[agent-session] runtime module describes a runtime twice; the first is kept", "module", c.name, "runtime", rt.ID)
			continue
		}
		if len(unknown) > 0 {
			c.cfg.log.Warn("[agent-session] runtime module lists unknown operations; ignored", "module", c.name, "runtime", rt.ID, "operations", unknown)
		}
		seen[rt.ID] = true
		valid = append(valid, rt)
	}
	res.Runtimes = valid
	if len(valid) == 0 {
		return describeResult{}, errors.New("describe lists no valid runtime")
	}
	return res, nil
}

// setServed records which runtimes and operations the running process
// serves.
func (c *moduleClient) setServed(desc describeResult) {
	served := map[string]map[agentsession.Op]bool{}
	for _, rt := range desc.Runtimes {
		served[rt.ID], _ = operationsOf(rt.Operations)
	}
	c.mu.Lock()
	c.served = served
	c.mu.Unlock()
}

// running returns the current process, starting one if none runs and the
// backoff allows it.
func (c *moduleClient) running(ctx context.Context) (*proc, error) {
	c.mu.Lock()
	closed, p := c.closed, c.cur
	c.mu.Unlock()
	if closed {
		return nil, errClosed
	}
	if p != nil && !p.isExited() {
		return p, nil
	}
	select {
	case c.startSem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-c.startSem }()
	c.mu.Lock()
	closed, p, retryAt := c.closed, c.cur, c.retryAt
	c.mu.Unlock()
	switch {
	case closed:
		return nil, errClosed
	case p != nil && !p.isExited():
		return p, nil
	case time.Now().Before(retryAt):
		return nil, fmt.Errorf("%w; next attempt in %s", errBackoff, time.Until(retryAt).Round(time.Millisecond))
	}
	p, desc, err := c.start(ctx)
	if err != nil {
		c.failed()
		c.cfg.log.Error("[agent-session] runtime module failed to restart", "module", c.name, "err", err)
		return nil, fmt.Errorf("restart module: %w", err)
	}
	c.setServed(desc)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		c.mu.Unlock()
		p.stop(0)
		c.mu.Lock()
		return nil, errClosed
	}
	c.cur = p
	c.cfg.log.Info("[agent-session] runtime module restarted", "module", c.name)
	return p, nil
}

// failed counts a failure and moves the next restart out by the backoff.
func (c *moduleClient) failed() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failures++
	c.retryAt = time.Now().Add(backoff.Policy{Min: c.cfg.backoff, Max: c.cfg.maxBackoff}.Jittered(c.failures))
}

// exited is called by a process's supervisor once it is gone.
func (c *moduleClient) exited(p *proc, err error) {
	c.mu.Lock()
	current := c.cur == p
	closed := c.closed
	if current {
		c.cur = nil
	}
	c.mu.Unlock()
	if current && !closed {
		c.failed()
		c.cfg.log.Error("[agent-session] runtime module exited; it will be restarted on the next call", "module", c.name, "err", err)
	}
}

// invoke calls op on runtime for ref through the module.
func (c *moduleClient) invoke(ctx context.Context, runtime string, op agentsession.Op, ref agentsession.Ref, prompt, reason string) (*agentsession.Observation, error) {
	p, err := c.running(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	ops, known := c.served[runtime]
	c.mu.Unlock()
	if !known {
		return nil, fmt.Errorf("module %s no longer serves runtime %q", c.name, runtime)
	}
	if !ops[op] {
		return nil, fmt.Errorf("module %s: %w", c.name, agentsession.ErrUnsupportedOperation)
	}
	params := callParams{Runtime: runtime, Ref: ref, Prompt: prompt, Reason: reason}
	if dl, ok := ctx.Deadline(); ok {
		params.TimeoutMs = max(int64(math.Ceil(float64(time.Until(dl))/float64(time.Millisecond))), 1)
	}
	res, rerr, err := p.call(ctx, string(op), params)
	if err != nil {
		return nil, err
	}
	if rerr != nil {
		if rerr.Code == codeMethodNotFound {
			return nil, fmt.Errorf("%s: %w", rerr.Message, agentsession.ErrUnsupportedOperation)
		}
		if rerr.Message == "" {
			return nil, fmt.Errorf("module error %d", rerr.Code)
		}
		return nil, errors.New(rerr.Message)
	}
	c.mu.Lock()
	c.failures = 0
	c.mu.Unlock()
	if isJSONNull(res) {
		return nil, nil
	}
	var obs agentsession.Observation
	if err := json.Unmarshal(res, &obs); err != nil {
		return nil, fmt.Errorf("module %s answered an invalid result: %w", c.name, err)
	}
	// Checked here as well as by dispatch so that the refusal names the
	// module the operator configured, not only the runtime it serves.
	if err := agentsession.CheckObservation(ref, &obs); err != nil {
		return nil, fmt.Errorf("module %s (runtime %s): %w", c.name, runtime, err)
	}
	return &obs, nil
}

func isJSONNull(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

// close stops the module's process and waits for its goroutines.
func (c *moduleClient) close() {
	c.startSem <- struct{}{} // no (re)start in progress; one started later sees closed
	defer func() { <-c.startSem }()
	c.mu.Lock()
	c.closed = true
	p := c.cur
	c.cur = nil
	c.mu.Unlock()
	if p != nil {
		p.stop(2 * time.Second)
	}
	c.wg.Wait()
}

func (p *proc) isExited() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exited
}

// call sends one request and waits for its response, the process's exit or
// ctx. On ctx it notifies the module with cancel and forgets the request; a
// late answer is then discarded.
func (p *proc) call(ctx context.Context, method string, params any) (json.RawMessage, *rpcError, error) {
	id := p.nextID.Add(1)
	ch := make(chan *message, 1)
	p.mu.Lock()
	if p.exited {
		err := p.exitErr
		p.mu.Unlock()
		return nil, nil, err
	}
	p.pending[id] = ch
	p.mu.Unlock()
	forget := func() {
		p.mu.Lock()
		delete(p.pending, id)
		p.mu.Unlock()
	}
	idRaw := json.RawMessage(strconv.FormatInt(id, 10))
	if err := p.write(ctx, message{ID: idRaw, Method: method, Params: mustJSON(params)}); err != nil {
		forget()
		return nil, nil, err
	}
	select {
	case m := <-ch:
		return m.Result, m.Error, nil
	case <-p.done:
		return nil, nil, p.exitError()
	case <-ctx.Done():
		forget()
		p.c.wg.Go(func() {
			cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = p.write(cctx, message{Method: methodCancel, Params: mustJSON(cancelParams{ID: idRaw})})
		})
		return nil, nil, ctx.Err()
	}
}

func (p *proc) exitError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitErr
}

// write sends one message line, waiting for the stdin pipe at most until
// ctx is done, so a module that stops reading cannot hang a call.
func (p *proc) write(ctx context.Context, m message) error {
	m.JSONRPC = "2.0"
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode request: %w", err)
	}
	b = append(b, '\n')
	select {
	case p.writeMu <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-p.done:
		return p.exitError()
	}
	defer func() { <-p.writeMu }()
	dl, _ := ctx.Deadline()
	_ = p.stdin.SetWriteDeadline(dl)
	if _, err := p.stdin.Write(b); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return context.DeadlineExceeded
		}
		return fmt.Errorf("write request: %w", err)
	}
	return nil
}

// supervise reads the module's stdout and stderr to their end, then reaps
// the process and fails whatever is still pending.
func (p *proc) supervise(stdout, stderr io.Reader) {
	var errWG sync.WaitGroup
	errWG.Go(func() { p.forwardStderr(stderr) })
	p.readReplies(stdout)
	errWG.Wait()
	waitErr := p.cmd.Wait()
	p.stdin.Close()

	err := fmt.Errorf("%w", errExited)
	if f, _ := p.fatal.Load().(string); f != "" {
		err = fmt.Errorf("%w: %s", errExited, f)
	} else if waitErr != nil {
		err = fmt.Errorf("%w: %v", errExited, waitErr)
	}
	p.mu.Lock()
	p.exited = true
	p.exitErr = err
	p.pending = map[int64]chan *message{}
	p.mu.Unlock()
	close(p.done)
	p.c.exited(p, err)
}

func (p *proc) readReplies(stdout io.Reader) {
	log := p.c.cfg.log
	lr := newLineReader(stdout, p.c.cfg.maxLine)
	// Lines that are not replies are logged, at most stderrLinesPerSecond
	// of them a second, like stderr; the rest are counted.
	noise := lineBudget{perSecond: stderrLinesPerSecond}
	defer func() {
		if n := noise.flush(); n > 0 {
			log.Warn("[agent-session] runtime module: suppressed stdout lines that are not JSON-RPC", "module", p.c.name, "lines", n)
		}
	}()
	ignore := func(msg string, line []byte) {
		ok, suppressed, first := noise.take(time.Now())
		if suppressed > 0 {
			log.Warn("[agent-session] runtime module: suppressed stdout lines that are not JSON-RPC", "module", p.c.name, "lines", suppressed)
		}
		if first {
			log.Warn("[agent-session] runtime module stdout rate limit reached; dropping non-protocol lines for the rest of this second",
				"module", p.c.name, "lines_per_second", noise.perSecond)
		}
		if ok {
			log.Warn(msg, "module", p.c.name, "line", clip(line, 200))
		}
	}
	for {
		line, tooLong, err := lr.next()
		if err != nil {
			return
		}
		if tooLong {
			p.fatal.Store(fmt.Sprintf("a reply line exceeded %d bytes", p.c.cfg.maxLine))
			log.Error("[agent-session] runtime module sent an oversized line; stopping it", "module", p.c.name, "max_bytes", p.c.cfg.maxLine)
			_ = killGroup(p.cmd)
			_, _ = io.Copy(io.Discard, stdout)
			return
		}
		if len(line) == 0 {
			continue
		}
		var m message
		if err := json.Unmarshal(line, &m); err != nil {
			ignore("[agent-session] runtime module wrote a line that is not JSON-RPC; ignored", line)
			continue
		}
		id, err := strconv.ParseInt(string(m.ID), 10, 64)
		if err != nil || m.Method != "" {
			ignore("[agent-session] runtime module wrote a message that is not a response; ignored", line)
			continue
		}
		p.mu.Lock()
		ch := p.pending[id]
		delete(p.pending, id)
		p.mu.Unlock()
		if ch == nil {
			log.Debug("[agent-session] runtime module answered an unknown or abandoned request; discarded", "module", p.c.name, "id", id)
			continue
		}
		ch <- &m
	}
}

func (p *proc) forwardStderr(stderr io.Reader) {
	log := p.c.cfg.log
	lr := newLineReader(stderr, stderrLineMax)
	windowStart, count, suppressed := time.Now(), 0, 0
	for {
		line, tooLong, err := lr.next()
		if err != nil {
			break
		}
		if now := time.Now(); now.Sub(windowStart) >= time.Second {
			if suppressed > 0 {
				log.Warn(p.c.name+": suppressed stderr lines", "module", p.c.name, "lines", suppressed)
			}
			windowStart, count, suppressed = now, 0, 0
		}
		if count >= stderrLinesPerSecond {
			if suppressed == 0 {
				log.Warn(p.c.name+": stderr rate limit reached; dropping lines for the rest of this second",
					"module", p.c.name, "lines_per_second", stderrLinesPerSecond)
			}
			suppressed++
			continue
		}
		count++
		text := string(line)
		if tooLong {
			text += " …[truncated]"
		}
		log.Info(p.c.name+": "+text, "module", p.c.name)
	}
	if suppressed > 0 {
		log.Warn(p.c.name+": suppressed stderr lines", "module", p.c.name, "lines", suppressed)
	}
}

// lineBudget admits at most perSecond lines in each one-second window and
// counts the rest. It is used by one goroutine.
type lineBudget struct {
	perSecond   int
	windowStart time.Time
	count       int
	suppressed  int
}

// take admits one line at now. ok says whether to log it; suppressed is
// the count dropped in the window that just ended (to report now); first
// is set for the first line dropped in a window.
func (b *lineBudget) take(now time.Time) (ok bool, suppressed int, first bool) {
	if now.Sub(b.windowStart) >= time.Second {
		suppressed = b.suppressed
		b.windowStart, b.count, b.suppressed = now, 0, 0
	}
	if b.count >= b.perSecond {
		b.suppressed++
		return false, suppressed, b.suppressed == 1
	}
	b.count++
	return true, suppressed, false
}

// flush returns the count dropped in the current window and resets it.
func (b *lineBudget) flush() int {
	n := b.suppressed
	b.suppressed = 0
	return n
}

// stop closes the module's stdin (a Serve-based module then returns),
// waits up to grace for it to exit, then kills its process group.
func (p *proc) stop(grace time.Duration) {
	p.stdin.Close() // also unblocks a write in progress
	if grace > 0 {
		t := time.NewTimer(grace)
		select {
		case <-p.done:
		case <-t.C:
		}
		t.Stop()
	}
	_ = killGroup(p.cmd)
	<-p.done
}

func clip(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "…"
}

// config is LoadOptions with defaults applied.
type config struct {
	log             *slog.Logger
	env             []string
	describeTimeout time.Duration
	maxLine         int
	backoff         time.Duration
	maxBackoff      time.Duration
}
