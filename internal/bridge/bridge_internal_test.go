package bridge

import (
	"errors"
	"strings"
	"testing"

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
