package server

import (
	"context"
	"io"
	"sync/atomic"
)

// ServeStdioViaSDK is ServeStdio with every message handed to go-sdk: the
// path the stdio calls are held to (stdio_calls.go).
func (s *Server) ServeStdioViaSDK(ctx context.Context, r io.Reader, w io.Writer) error {
	return s.serveStdio(ctx, r, w, stdioOptions{viaSDK: true})
}

// ServeStdioCounted is ServeStdio that counts in direct the tool calls it
// answered past go-sdk.
func (s *Server) ServeStdioCounted(ctx context.Context, r io.Reader, w io.Writer, direct *atomic.Int64) error {
	return s.serveStdio(ctx, r, w, stdioOptions{direct: direct})
}
