package host

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	"github.com/clawconnect/clawconnect/internal/testbed/poll"
)

// fakeService follows an id by holding its monitor lease until ctx ends,
// as the Turn service's followers do; it reports each follower that got
// the lease and each that found it taken.
type fakeService struct {
	mu       sync.Mutex
	attached *Host
	recovers int
	followed chan string // ids whose lease a follower holds
	lost     chan string // ids whose lease another host held
}

func (f *fakeService) Attach(h *Host) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attached = h
}

func (f *fakeService) Follow(ctx context.Context, h *Host, id string) error {
	_, lctx, release, err := h.Claim(ctx, store.LeaseMonitor, id)
	if errors.Is(err, store.ErrLeaseLost) {
		f.lost <- id
		return nil
	}
	if err != nil {
		return err
	}
	defer release()
	f.followed <- id
	<-lctx.Done()
	return nil
}

func (f *fakeService) Recover(context.Context, *Host) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recovers++
}

// run runs h until the test ends.
func run(t *testing.T, h *Host) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = h.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func receive(t *testing.T, ch <-chan string, what string) string {
	t.Helper()
	select {
	case id := <-ch:
		return id
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s within 10 s", what)
		return ""
	}
}

// TestHostFollowsThroughItsService: the host drives work only through
// host.Service: New attaches it, an id watched before Run is followed once
// Run starts, one follower runs per id however often it is watched, a
// rescan asks the service to recover, and a second host on the same store
// finds the id's lease held and does not follow it.
func TestHostFollowsThroughItsService(t *testing.T) {
	st, err := sqlite.Open(t.Context(), sqlite.Options{Path: filepath.Join(t.TempDir(), sqlite.FileName)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	noFiles := func(context.Context, []string) (<-chan struct{}, error) { return nil, nil }
	f := &fakeService{followed: make(chan string, 4), lost: make(chan string, 4)}
	h := New(f, Options{Store: st, Owner: "host-a", Rescan: time.Hour, LeaseTTL: time.Hour, Watch: noFiles})
	if f.attached != h {
		t.Fatal("New did not attach the host to its service")
	}
	if h.Watch("turn-1") {
		t.Fatal("Watch before Run reported a running host")
	}
	run(t, h)
	if id := receive(t, f.followed, "follower"); id != "turn-1" {
		t.Fatalf("followed %q, want turn-1", id)
	}
	if !h.Watch("turn-1") {
		t.Fatal("Watch while Run runs reported no running host")
	}
	if n := h.Monitoring(); n != 1 {
		t.Fatalf("Monitoring() = %d after watching one id twice, want 1", n)
	}
	poll.Until(t, 10*time.Second, "the first rescan asks the service to recover", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.recovers > 0
	})

	other := &fakeService{followed: make(chan string, 4), lost: make(chan string, 4)}
	h2 := New(other, Options{Store: st, Owner: "host-b", Rescan: time.Hour, LeaseTTL: time.Hour, Watch: noFiles})
	run(t, h2)
	h2.Watch("turn-1")
	if id := receive(t, other.lost, "lost claim"); id != "turn-1" {
		t.Fatalf("host-b lost the claim of %q, want turn-1", id)
	}
	select {
	case id := <-other.followed:
		t.Fatalf("host-b followed %s while host-a holds its lease", id)
	default:
	}
}

// cutShort is a store whose lease claims are cut short the way a driver
// reports a cancel that came after the statement ran: the row is written,
// then the caller's context ends and the claim reports that instead.
type cutShort struct {
	store.Store
	cancel context.CancelFunc
}

func (c cutShort) ClaimWork(ctx context.Context, kind, id, owner string, now, until int64) (store.WorkLease, error) {
	l, err := c.Store.ClaimWork(ctx, kind, id, owner, now, until)
	c.cancel()
	if ctx.Err() != nil {
		return store.WorkLease{}, ctx.Err()
	}
	return l, err
}

// TestClaimCutShortByAStopIsGivenBack: a host stopping while a follower
// claims a lease leaves no lease behind, so another host takes the work
// over at once instead of after the lease's time.
func TestClaimCutShortByAStopIsGivenBack(t *testing.T) {
	st, err := sqlite.Open(t.Context(), sqlite.Options{Path: filepath.Join(t.TempDir(), sqlite.FileName)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	ctx, cancel := context.WithCancel(t.Context())
	h := New(&fakeService{}, Options{Store: cutShort{st, cancel}, Owner: "host-a", LeaseTTL: time.Hour})
	_, lctx, release, err := h.Claim(ctx, store.LeaseWatch, "watch-1")
	if err == nil {
		if lctx.Err() == nil {
			t.Fatal("the lease's context outlived the host's")
		}
		release()
	}
	leases, err := st.WorkLeases(t.Context(), store.LeaseWatch, []string{"watch-1"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	for _, l := range leases {
		if l.Until > now {
			t.Fatalf("lease held after a claim cut short by the host's stop: %+v", l)
		}
	}
}
