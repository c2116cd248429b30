package fakemodel

import (
	"context"
	"testing"
	"time"
)

// New starts a server for a test and closes it when the test ends. It fails
// the test if the server cannot start.
func New(tb testing.TB, opts Options) *Server {
	tb.Helper()
	s, err := Start(context.Background(), opts)
	if err != nil {
		tb.Fatalf("start fake model server: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("close fake model server: %v", err)
		}
	})
	return s
}

// MustWaitRequest waits up to timeout for a request matching match (see
// WaitRequest) and fails the test if none arrives.
func (s *Server) MustWaitRequest(tb testing.TB, timeout time.Duration, match func(Request) bool) Request {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	r, err := s.WaitRequest(ctx, match)
	if err != nil {
		tb.Fatalf("fake model: no matching request within %v: %v (%d requests logged)", timeout, err, len(s.Requests()))
	}
	return r
}
