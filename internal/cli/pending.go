package cli

import (
	"context"
	"errors"
	"sync"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/server"
	"github.com/clawconnect/clawconnect/taskapi"
)

// pendingTasks is a server.Tasks whose backend opens in the background, so
// a stdio server answers initialize and tools/list while the store, the
// task managers and the runtime modules start. The open begins on Start
// (server.ServeStdio calls it once the tools are registered, so the open
// competes neither with the answer to initialize nor with the
// registration) or on the first call, whichever comes first. Each call
// waits for the backend (or its ctx) and then delegates. A failed open
// (the store unreachable when the client started the server) is tried
// again by the next call; the calls it fails are told that the task
// service is unavailable and to retry, while the failure itself goes to
// the server's log (stderr), since it may name the database's user, host
// and port.
type pendingTasks struct {
	ctx  context.Context
	open func(context.Context) (*backend, error)

	mu     sync.Mutex
	cur    *openAttempt // nil until started
	closed bool
	wg     sync.WaitGroup
}

// openAttempt is one run of open.
type openAttempt struct {
	ready chan struct{} // closed when b or err is set
	b     *backend
	err   error
}

// newPending returns a pendingTasks that runs open(ctx) in a goroutine it
// owns once started; close waits for it and closes the backend.
func newPending(ctx context.Context, open func(context.Context) (*backend, error)) *pendingTasks {
	return &pendingTasks{ctx: ctx, open: open}
}

var _ server.Starter = (*pendingTasks)(nil)

// Start begins the open unless it began already or close was called. It
// does not block, and is safe to call from any goroutine, any number of
// times.
func (p *pendingTasks) Start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur == nil && !p.closed {
		p.startLocked()
	}
}

// startLocked begins a new open attempt (p.mu held).
func (p *pendingTasks) startLocked() {
	a := &openAttempt{ready: make(chan struct{})}
	p.cur = a
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		a.b, a.err = p.open(p.ctx)
		close(a.ready)
	}()
}

// errServiceUnavailable is what calls get when the backend could not open.
var errServiceUnavailable = errors.New("the task service is unavailable (its store could not be opened; the reason is in the server's log); retry in a few seconds")

// wait returns the backend's tasks once an open succeeded; after a failed
// open it starts another one.
func (p *pendingTasks) wait(ctx context.Context) (server.Tasks, error) {
	p.mu.Lock()
	if p.closed && (p.cur == nil || p.cur.b == nil) {
		p.mu.Unlock()
		return nil, errPendingClosed
	}
	if p.cur == nil {
		p.startLocked()
	} else {
		select {
		case <-p.cur.ready:
			if p.cur.err != nil && p.ctx.Err() == nil {
				p.startLocked() // the last open failed: try again
			}
		default:
		}
	}
	a := p.cur
	p.mu.Unlock()
	select {
	case <-a.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if a.err != nil {
		return nil, unavailableError{a.err}
	}
	return a.b.tasks, nil
}

// sharedStore waits for the backend and returns the store it owns (nil
// when it owns none).
func (p *pendingTasks) sharedStore(ctx context.Context) (store.Store, error) {
	if _, err := p.wait(ctx); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur == nil || p.cur.b == nil {
		return nil, errPendingClosed
	}
	return p.cur.b.shared, nil
}

// unavailableError reads as errServiceUnavailable and matches it and its
// hidden cause with errors.Is.
type unavailableError struct{ cause error }

func (e unavailableError) Error() string   { return errServiceUnavailable.Error() }
func (e unavailableError) Unwrap() []error { return []error{errServiceUnavailable, e.cause} }

// errPendingClosed is what calls get once close ran before anything
// started the open.
var errPendingClosed = errors.New("task service closed")

// close waits for a started open to finish and closes the backend; a later
// start does nothing, and later calls get errPendingClosed. It is
// idempotent.
func (p *pendingTasks) close() {
	p.mu.Lock()
	already := p.closed
	p.closed = true
	p.mu.Unlock()
	if already {
		return
	}
	p.wg.Wait()
	p.mu.Lock()
	a := p.cur
	p.mu.Unlock()
	if a != nil && a.b != nil {
		a.b.close()
	}
}

// The methods below implement server.Tasks by delegation.

func (p *pendingTasks) Run(ctx context.Context, req server.RunRequest) (taskapi.RunResult, error) {
	t, err := p.wait(ctx)
	if err != nil {
		return taskapi.RunResult{}, err
	}
	return t.Run(ctx, req)
}

func (p *pendingTasks) Check(ctx context.Context, req server.CheckRequest, onUpdate func(taskapi.Snapshot)) (taskapi.Snapshot, error) {
	t, err := p.wait(ctx)
	if err != nil {
		return taskapi.Snapshot{}, err
	}
	return t.Check(ctx, req, onUpdate)
}

func (p *pendingTasks) GetTask(ctx context.Context, id string, d taskapi.Detail, known int64) (taskapi.TaskDetail, error) {
	t, err := p.wait(ctx)
	if err != nil {
		return taskapi.TaskDetail{}, err
	}
	return t.GetTask(ctx, id, d, known)
}

func (p *pendingTasks) GetPrompt(ctx context.Context, id string) (taskapi.PromptResult, error) {
	t, err := p.wait(ctx)
	if err != nil {
		return taskapi.PromptResult{}, err
	}
	return t.GetPrompt(ctx, id)
}

func (p *pendingTasks) ListTasks(ctx context.Context, view taskapi.ListView, only *string) ([]taskapi.TaskSummary, error) {
	t, err := p.wait(ctx)
	if err != nil {
		return nil, err
	}
	return t.ListTasks(ctx, view, only)
}

func (p *pendingTasks) GetSession(ctx context.Context, req server.SessionRequest) (taskapi.SessionResult, error) {
	t, err := p.wait(ctx)
	if err != nil {
		return taskapi.SessionResult{}, err
	}
	return t.GetSession(ctx, req)
}

func (p *pendingTasks) ListSessions(ctx context.Context, only *string) ([]taskapi.ContinuationState, error) {
	t, err := p.wait(ctx)
	if err != nil {
		return nil, err
	}
	return t.ListSessions(ctx, only)
}

func (p *pendingTasks) Cancel(ctx context.Context, id string) (taskapi.CancelResult, error) {
	t, err := p.wait(ctx)
	if err != nil {
		return taskapi.CancelResult{}, err
	}
	return t.Cancel(ctx, id)
}
