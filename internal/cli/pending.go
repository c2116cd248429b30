package cli

import (
	"context"
	"errors"
	"sync"

	"github.com/clawconnect/clawconnect/internal/task"
	"github.com/clawconnect/clawconnect/server"
)

// pendingTasks is a server.Tasks whose backend opens in the background, so
// a stdio server answers initialize and tools/list while the store, the
// task managers and the runtime modules start. The open begins on Start
// (server.ServeStdio calls it once the tools are registered, so the open
// competes neither with the answer to initialize nor with the
// registration) or on the first call, whichever comes first. Each call
// waits for the backend (or its ctx) and then delegates, or returns the
// open error.
type pendingTasks struct {
	ctx   context.Context
	open  func(context.Context) (*backend, error)
	ready chan struct{} // closed when b or err is set
	b     *backend
	err   error

	mu      sync.Mutex
	started bool
	closed  bool
	wg      sync.WaitGroup
}

// newPending returns a pendingTasks that runs open(ctx) in a goroutine it
// owns once started; close waits for it and closes the backend.
func newPending(ctx context.Context, open func(context.Context) (*backend, error)) *pendingTasks {
	return &pendingTasks{ctx: ctx, open: open, ready: make(chan struct{})}
}

var _ server.Starter = (*pendingTasks)(nil)

// Start begins the open unless it began already or close was called. It
// does not block, and is safe to call from any goroutine, any number of
// times.
func (p *pendingTasks) Start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started || p.closed {
		return
	}
	p.started = true
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.b, p.err = p.open(p.ctx)
		close(p.ready)
	}()
}

// wait returns the backend's tasks once open finished.
func (p *pendingTasks) wait(ctx context.Context) (server.Tasks, error) {
	p.Start()
	select {
	case <-p.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if p.err != nil {
		return nil, p.err
	}
	return p.b.tasks, nil
}

// sharedStore waits for the backend and returns the store it owns (nil
// when it owns none).
func (p *pendingTasks) sharedStore(ctx context.Context) (any, error) {
	if _, err := p.wait(ctx); err != nil {
		return nil, err
	}
	return p.b.shared, nil
}

// errPendingClosed is what calls get once close ran before anything
// started the open.
var errPendingClosed = errors.New("task service closed")

// close waits for a started open to finish and closes the backend; a later
// start does nothing, and calls that never started it get
// errPendingClosed. It is idempotent.
func (p *pendingTasks) close() {
	p.mu.Lock()
	already, started := p.closed, p.started
	p.closed = true
	if !already && !started {
		p.err = errPendingClosed
		close(p.ready)
	}
	p.mu.Unlock()
	if already {
		return
	}
	p.wg.Wait()
	if p.b != nil {
		p.b.close()
	}
}

// The methods below implement server.Tasks by delegation.

func (p *pendingTasks) Run(ctx context.Context, req server.RunRequest) (task.RunResult, error) {
	t, err := p.wait(ctx)
	if err != nil {
		return task.RunResult{}, err
	}
	return t.Run(ctx, req)
}

func (p *pendingTasks) Check(ctx context.Context, req server.CheckRequest, onUpdate func(task.Snapshot)) (task.Snapshot, error) {
	t, err := p.wait(ctx)
	if err != nil {
		return task.Snapshot{}, err
	}
	return t.Check(ctx, req, onUpdate)
}

func (p *pendingTasks) GetTask(ctx context.Context, id string, d task.Detail, known int64) (task.TaskDetail, error) {
	t, err := p.wait(ctx)
	if err != nil {
		return task.TaskDetail{}, err
	}
	return t.GetTask(ctx, id, d, known)
}

func (p *pendingTasks) GetPrompt(ctx context.Context, id string) (task.PromptResult, error) {
	t, err := p.wait(ctx)
	if err != nil {
		return task.PromptResult{}, err
	}
	return t.GetPrompt(ctx, id)
}

func (p *pendingTasks) ListTasks(ctx context.Context, view task.ListView) ([]task.TaskSummary, error) {
	t, err := p.wait(ctx)
	if err != nil {
		return nil, err
	}
	return t.ListTasks(ctx, view)
}

func (p *pendingTasks) GetSession(ctx context.Context, req server.SessionRequest) (task.SessionResult, error) {
	t, err := p.wait(ctx)
	if err != nil {
		return task.SessionResult{}, err
	}
	return t.GetSession(ctx, req)
}

func (p *pendingTasks) ListSessions(ctx context.Context) ([]task.ContinuationState, error) {
	t, err := p.wait(ctx)
	if err != nil {
		return nil, err
	}
	return t.ListSessions(ctx)
}

func (p *pendingTasks) Cancel(ctx context.Context, id string) (task.CancelResult, error) {
	t, err := p.wait(ctx)
	if err != nil {
		return task.CancelResult{}, err
	}
	return t.Cancel(ctx, id)
}
