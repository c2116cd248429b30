package task

import (
	"context"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/storetest"
)

// cutShortClaims is a store whose task claims are cut short the way a
// driver reports a cancel that came after the statement ran: the rows are
// written, then the caller's context ends and the claim reports that.
type cutShortClaims struct {
	store.Store
	cancel context.CancelFunc
}

func (s cutShortClaims) ClaimTasks(ctx context.Context, c store.Claim) ([]*store.Task, error) {
	ts, err := s.Store.ClaimTasks(ctx, c)
	s.cancel()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return ts, err
}

// TestClaimCutShortLeavesNoTaskUnfollowed: a claim of running tasks that a
// stop cuts short leaves no task leased here and followed by no one: it is
// followed, or, when the manager is closing, its lease is given back, so
// another process takes it over at once instead of after the lease.
func TestClaimCutShortLeavesNoTaskUnfollowed(t *testing.T) {
	for _, closing := range []bool{false, true} {
		name := "running"
		if closing {
			name = "closing"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			task := storetest.Task("job-lapsed", "main", "agent:main:k1", time.Now().UnixMilli())
			task.Owner, task.LeaseUntil = "gone", time.Now().Add(-time.Minute).UnixMilli()
			if err := e.st.CreateTask(t.Context(), task); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			m := e.manager(func(o *Options) {
				o.NoClaim = true // the claim below is the only one
				o.Store = cutShortClaims{e.st, cancel}
			})
			if closing {
				m.mu.Lock()
				m.closed = true
				m.mu.Unlock()
			}
			_, _ = m.claim(ctx, nil, false)
			followed := m.getLive(task.ID) != nil
			got, err := e.st.GetTask(t.Context(), "main", task.ID)
			if err != nil {
				t.Fatal(err)
			}
			held := got.Owner == m.o.Owner && got.LeaseUntil > time.Now().UnixMilli()
			switch {
			case closing && (followed || held):
				t.Fatalf("claimed as the manager closed: followed %t, lease %s until %d", followed, got.Owner, got.LeaseUntil)
			case !closing && held && !followed:
				t.Fatalf("the task is leased here (until %d) and followed by no one", got.LeaseUntil)
			}
		})
	}
}
