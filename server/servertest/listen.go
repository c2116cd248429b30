package servertest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/server"
)

// Listen runs srv.ListenAndServe (with its connection limits, which an
// httptest server lacks) on a free loopback port until the test ends, and
// returns the bound address. A ListenAndServe error fails the test.
func Listen(t testing.TB, srv *server.Server) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan net.Addr, 1)
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe(ctx, "127.0.0.1:0", time.Second, func(a net.Addr) { addrc <- a }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("ListenAndServe: %v", err)
		}
	})
	select {
	case a := <-addrc:
		return a.String()
	case err := <-errc:
		t.Fatalf("ListenAndServe: %v", err)
	}
	return ""
}
