package task

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/postgres"
	"github.com/clawconnect/clawconnect/taskapi"
)

// pgReplicaStores opens n stores (separate pools, like separate processes)
// on one fresh PostgreSQL schema, or skips without TEST_DATABASE_URL.
func pgReplicaStores(t *testing.T, n int) []store.Store {
	url := os.Getenv("TEST_DATABASE_URL")
	if url == "" {
		t.Skip("TEST_DATABASE_URL is not set; source scripts/setup/postgres.sh to run the replica tests")
	}
	r := make([]byte, 6)
	_, _ = rand.Read(r)
	schema := "cctask_" + hex.EncodeToString(r)
	t.Cleanup(func() {
		if db, err := sql.Open("pgx", url); err == nil {
			_, _ = db.Exec(`DROP SCHEMA IF EXISTS ` + schema + ` CASCADE`)
			_ = db.Close()
		}
	})
	var out []store.Store
	for range n {
		s, err := postgres.Open(t.Context(), postgres.Options{URL: url, Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		out = append(out, s)
	}
	return out
}

// TestReplicasOnPostgres: two replicas share PostgreSQL. Either answers
// reads for any task; a cancel through the replica that does not follow
// the task wins over the follower; and when the following replica dies,
// the other takes its task over after the lease and finishes it.
func TestReplicasOnPostgres(t *testing.T) {
	stores := pgReplicaStores(t, 2)
	e := newEnv(t)
	lease := func(owner string, st store.Store) func(o *Options) {
		return func(o *Options) { o.Owner, o.Lease, o.Store = owner, 300*time.Millisecond, st }
	}
	a := e.manager(lease("replica-a", stores[0]))
	b := e.manager(lease("replica-b", stores[1]))

	// Reads and cancel through the other replica.
	e.gw.abortOK = true
	res, err := a.Submit(t.Context(), SubmitRequest{Task: "to cancel"})
	if err != nil {
		t.Fatal(err)
	}
	e.gw.waitStarted(t, res.JobID)
	if g, err := b.GetTask(t.Context(), res.JobID, taskapi.DetailCore, 0); err != nil || g.Status != "running" {
		t.Fatalf("read via b: %+v %v", g, err)
	}
	c, err := b.Cancel(t.Context(), res.JobID, "")
	if err != nil || !c.Requested || c.Status != "cancelled" {
		t.Fatalf("cancel via b: %+v %v", c, err)
	}
	if s := await(t, a, res.JobID); s.Status != "cancelled" || s.TerminalReason != "cancelled-by-request" {
		t.Fatalf("seen by a: %s %s", s.Status, s.TerminalReason)
	}

	// Takeover after the owner dies.
	res, err = a.Submit(t.Context(), SubmitRequest{Task: "long"})
	if err != nil {
		t.Fatal(err)
	}
	e.gw.waitStarted(t, res.JobID)
	a.Close() // replica a is gone; its lease lapses
	e.gw.waitStarted(t, res.JobID)
	e.gw.end(res.JobID, Outcome{Status: OutcomeOK, Text: "finished by b"})
	s := await(t, b, res.JobID)
	if s.Summary != "finished by b" {
		t.Fatalf("after takeover: %+v", s)
	}
	task, err := stores[1].GetTask(t.Context(), "main", res.JobID)
	if err != nil || task.Owner != "replica-b" {
		t.Fatalf("owner %+v %v", task, err)
	}
}

// TestWaitOnAnotherReplicasTask: a waiting check_task on a replica that
// does not follow the task returns as soon as the follower writes the
// outcome, woken by the store's change announcement. Its re-read timer is
// an hour, longer than the test may run.
func TestWaitOnAnotherReplicasTask(t *testing.T) {
	stores := pgReplicaStores(t, 2)
	e := newEnv(t)
	a := e.manager(func(o *Options) { o.Owner, o.Store = "replica-a", stores[0] })
	seen := &readAfterWatch{Store: stores[1], read: make(chan struct{}, 1)}
	b := e.manager(func(o *Options) { o.Owner, o.Store, o.ForeignPollInterval = "replica-b", seen, time.Hour })

	res, err := a.Submit(t.Context(), SubmitRequest{Task: "followed by a"})
	if err != nil {
		t.Fatal(err)
	}
	e.gw.waitStarted(t, res.JobID)
	type result struct {
		s   *taskapi.Snapshot
		err error
	}
	got := make(chan result, 1)
	go func() {
		s, err := b.Check(t.Context(), CheckRequest{JobID: res.JobID, WaitMs: waitMs(120_000)})
		got <- result{s, err}
	}()
	select { // b watches the task and has read it running: it is waiting
	case <-seen.read:
	case <-time.After(10 * time.Second):
		t.Fatal("replica b never read the task after watching it")
	}
	e.gw.end(res.JobID, Outcome{Status: OutcomeOK, Text: "done by a"})
	select {
	case r := <-got:
		if r.err != nil || r.s.Status != "completed" || r.s.Summary != "done by a" {
			t.Fatalf("b's check_task = %+v, %v", r.s, r.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("b's waiting check_task did not return when a finished the task")
	}
}

// readAfterWatch is a store that reports the first task read made after a
// watch started.
type readAfterWatch struct {
	store.Store
	read     chan struct{}
	watching atomic.Bool
}

func (s *readAfterWatch) WatchTask(id string) (<-chan struct{}, func()) {
	s.watching.Store(true)
	return s.Store.WatchTask(id)
}

func (s *readAfterWatch) GetTask(ctx context.Context, agent, id string) (*store.Task, error) {
	t, err := s.Store.GetTask(ctx, agent, id)
	if s.watching.Load() && err == nil && t.Status == store.StatusRunning {
		select {
		case s.read <- struct{}{}:
		default:
		}
	}
	return t, err
}
