package bridge

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/gateway"
	"github.com/clawconnect/clawconnect/internal/task"
)

// TestMapErrHidesStoreDetail: a store failure reaches a tool caller as "the
// task store is unavailable; retry", without the database's user, name,
// host or port (they stay in the server log).
func TestMapErrHidesStoreDetail(t *testing.T) {
	t.Parallel()
	err := mapErr("check task", &task.StoreUnavailableError{Op: "check task"})
	if !errors.Is(err, task.ErrStoreUnavailable) || err.Error() != task.ErrStoreUnavailable.Error() {
		t.Fatalf("mapErr = %q", err)
	}
	for _, secret := range []string{"user=", "127.0.0.1", "35739"} {
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("mapErr shows %q: %q", secret, err)
		}
	}
}

// TestGatewayStateBeforeAndAfterADial: a gateway nothing has dialled yet
// is "not connected yet", not "unavailable"; one whose dial failed is
// "unavailable".
func TestGatewayStateBeforeAndAfterADial(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "ws://" + ln.Addr().String()
	_ = ln.Close() // the port now refuses connections
	g := &lazyGateway{opts: gateway.Options{URL: url}, timeout: 10 * time.Second}
	if got := g.state(); got != StateNotConnectedYet {
		t.Fatalf("state before any dial = %q, want %q", got, StateNotConnectedYet)
	}
	if _, err := g.client(t.Context()); err == nil {
		t.Fatal("dial of a closed port succeeded")
	}
	if got := g.state(); got != "unavailable" {
		t.Fatalf("state after a failed dial = %q, want %q", got, "unavailable")
	}
}
