package cli

import (
	"context"
	"sync"

	"github.com/clawconnect/clawconnect/internal/task"
	"github.com/clawconnect/clawconnect/server"
)

// pendingTasks is a server.Tasks whose backend opens in the background, so
// a stdio server answers initialize and tools/list while the store, the
// task managers and the runtime modules start. Each call waits for the
// backend (or its ctx) and then delegates, or returns the open error.
type pendingTasks struct {
	ready chan struct{} // closed when b or err is set
	b     *backend
	err   error

	closeOnce sync.Once
	wg        sync.WaitGroup
}

// openPending starts open in a goroutine owned by the returned value; close
// waits for it and closes the backend.
func openPending(ctx context.Context, open func(context.Context) (*backend, error)) *pendingTasks {
	p := &pendingTasks{ready: make(chan struct{})}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.b, p.err = open(ctx)
		close(p.ready)
	}()
	return p
}

// wait returns the backend's tasks once open finished.
func (p *pendingTasks) wait(ctx context.Context) (server.Tasks, error) {
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

// close waits for the open to finish and closes the backend; idempotent.
func (p *pendingTasks) close() {
	p.closeOnce.Do(func() {
		p.wg.Wait()
		if p.b != nil {
			p.b.close()
		}
	})
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
