package terminal

import "context"

// transitionOps registers the thread-transition operations on the host's
// socket API. A transition runs to its end even if the client goes away:
// input already typed must be recorded.
func transitionOps(s *Service, op func(name string, f func(ctx context.Context, r apiRequest) (any, error))) {
	op("new-thread", func(ctx context.Context, r apiRequest) (any, error) {
		return s.NewThread(context.WithoutCancel(ctx), r.TerminalID)
	})
	op("clear-thread", func(ctx context.Context, r apiRequest) (any, error) {
		return s.ClearThread(context.WithoutCancel(ctx), r.TerminalID)
	})
	op("resume-thread", func(ctx context.Context, r apiRequest) (any, error) {
		return s.ResumeThread(context.WithoutCancel(ctx), r.TerminalID, r.ThreadID)
	})
	op("adopt-thread", func(ctx context.Context, r apiRequest) (any, error) {
		return s.AdoptThread(context.WithoutCancel(ctx), r.TerminalID)
	})
	op("resolve-transition", func(ctx context.Context, r apiRequest) (any, error) {
		return s.ResolveTransition(context.WithoutCancel(ctx), r.TransitionID, r.Adopt)
	})
	op("transition", func(ctx context.Context, r apiRequest) (any, error) { return s.Transition(ctx, r.TransitionID) })
	op("threads", func(ctx context.Context, r apiRequest) (any, error) { return s.Threads(ctx, r.TerminalID) })
}

// NewThread calls Service.NewThread.
func (c *Client) NewThread(ctx context.Context, terminalID string) (out TransitionView, err error) {
	return out, c.call(ctx, "new-thread", apiRequest{TerminalID: terminalID}, &out)
}

// ClearThread calls Service.ClearThread.
func (c *Client) ClearThread(ctx context.Context, terminalID string) (out TransitionView, err error) {
	return out, c.call(ctx, "clear-thread", apiRequest{TerminalID: terminalID}, &out)
}

// ResumeThread calls Service.ResumeThread.
func (c *Client) ResumeThread(ctx context.Context, terminalID, threadID string) (out TransitionView, err error) {
	return out, c.call(ctx, "resume-thread", apiRequest{TerminalID: terminalID, ThreadID: threadID}, &out)
}

// AdoptThread calls Service.AdoptThread.
func (c *Client) AdoptThread(ctx context.Context, terminalID string) (out TransitionView, err error) {
	return out, c.call(ctx, "adopt-thread", apiRequest{TerminalID: terminalID}, &out)
}

// ResolveTransition calls Service.ResolveTransition.
func (c *Client) ResolveTransition(ctx context.Context, id string, adopt bool) (out TransitionView, err error) {
	return out, c.call(ctx, "resolve-transition", apiRequest{TransitionID: id, Adopt: adopt}, &out)
}

// Transition calls Service.Transition.
func (c *Client) Transition(ctx context.Context, id string) (out TransitionView, err error) {
	return out, c.call(ctx, "transition", apiRequest{TransitionID: id}, &out)
}

// Threads calls Service.Threads.
func (c *Client) Threads(ctx context.Context, terminalID string) (out ThreadsResult, err error) {
	return out, c.call(ctx, "threads", apiRequest{TerminalID: terminalID}, &out)
}
