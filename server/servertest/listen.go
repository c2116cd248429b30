package servertest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/server"
)

// shutdownGrace is how long the requests still in flight when a test ends
// may take to finish. The shutdown returns as soon as they have; on a
// loaded machine under the race detector one took longer than a second
// (http.Server.Shutdown looks again only every 500 ms by then), and the
// test failed on it.
const shutdownGrace = 10 * time.Second

// Listen runs srv.ListenAndServe (with its connection limits, which an
// httptest server lacks) on a free loopback port until the test ends, and
// returns the bound address. A ListenAndServe error fails the test.
func Listen(t testing.TB, srv *server.Server) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan net.Addr, 1)
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe(ctx, "127.0.0.1:0", shutdownGrace, func(a net.Addr) { addrc <- a }) }()
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
