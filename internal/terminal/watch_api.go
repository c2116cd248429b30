package terminal

import "context"

// watchOps adds the watch and inspect operations to Handler.
func watchOps(s *Service, op func(string, func(context.Context, apiRequest) (any, error))) {
	op("watch", func(ctx context.Context, r apiRequest) (any, error) { return s.Watch(ctx, r.Watch) })
	op("unwatch", func(ctx context.Context, r apiRequest) (any, error) { return s.Unwatch(ctx, r.WatchID) })
	op("watch-status", func(ctx context.Context, r apiRequest) (any, error) { return s.WatchStatus(ctx, r.WatchID) })
	op("watches", func(ctx context.Context, r apiRequest) (any, error) { return s.Watches(ctx, r.Limit) })
	op("inspect", func(ctx context.Context, r apiRequest) (any, error) {
		// Keys already typed into the pane must be undone even if the
		// client goes away.
		return s.Inspect(context.WithoutCancel(ctx), r.TerminalID)
	})
}

// Watch calls Service.Watch.
func (c *Client) Watch(ctx context.Context, r WatchRequest) (out WatchView, err error) {
	return out, c.call(ctx, "watch", apiRequest{Watch: r}, &out)
}

// Unwatch calls Service.Unwatch.
func (c *Client) Unwatch(ctx context.Context, id string) (out WatchView, err error) {
	return out, c.call(ctx, "unwatch", apiRequest{WatchID: id}, &out)
}

// WatchStatus calls Service.WatchStatus.
func (c *Client) WatchStatus(ctx context.Context, id string) (out WatchView, err error) {
	return out, c.call(ctx, "watch-status", apiRequest{WatchID: id}, &out)
}

// Watches calls Service.Watches.
func (c *Client) Watches(ctx context.Context, limit int) (out []WatchView, err error) {
	return out, c.call(ctx, "watches", apiRequest{Limit: limit}, &out)
}

// Inspect calls Service.Inspect.
func (c *Client) Inspect(ctx context.Context, terminalID string) (out InspectResult, err error) {
	return out, c.call(ctx, "inspect", apiRequest{TerminalID: terminalID}, &out)
}
