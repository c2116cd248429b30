package task

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/postgres"
	"github.com/clawconnect/clawconnect/internal/store/storetest"
)

// errDown is what a store answers while its database is unreachable; the
// text is pgx's, with the details that must never reach a client.
var errDown = errors.New("failed to connect to `user=postgres database=clawconnect`: 127.0.0.1:35739 (127.0.0.1): dial error: connection refused")

// faultStore is a store whose database can be taken down (every call
// fails) or paused (every write blocks, as in a SIGSTOPped process).
type faultStore struct {
	store.Store

	mu     sync.Mutex
	down   bool
	paused chan struct{} // non-nil while paused; closed to resume
	// refused receives the name of each call refused while down.
	refused chan string
}

func newFaultStore(s store.Store) *faultStore {
	return &faultStore{Store: s, refused: make(chan string, 1<<12)}
}

func (s *faultStore) setDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

func (s *faultStore) pause() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.paused = make(chan struct{})
}

func (s *faultStore) resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.paused)
	s.paused = nil
}

// check refuses op while down; a write waits while paused.
func (s *faultStore) check(ctx context.Context, op string, write bool) error {
	s.mu.Lock()
	down, paused := s.down, s.paused
	s.mu.Unlock()
	if write && paused != nil {
		select {
		case <-paused:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if down {
		select {
		case s.refused <- op:
		default:
		}
		return errDown
	}
	return nil
}

func (s *faultStore) CreateTask(ctx context.Context, t *store.Task) error {
	if err := s.check(ctx, "CreateTask", true); err != nil {
		return err
	}
	return s.Store.CreateTask(ctx, t)
}

func (s *faultStore) GetTask(ctx context.Context, agent, id string) (*store.Task, error) {
	if err := s.check(ctx, "GetTask", false); err != nil {
		return nil, err
	}
	return s.Store.GetTask(ctx, agent, id)
}

func (s *faultStore) GetSession(ctx context.Context, agent, key string) (*store.Session, error) {
	if err := s.check(ctx, "GetSession", false); err != nil {
		return nil, err
	}
	return s.Store.GetSession(ctx, agent, key)
}

func (s *faultStore) UpdateTask(ctx context.Context, t *store.Task) error {
	if err := s.check(ctx, "UpdateTask", true); err != nil {
		return err
	}
	return s.Store.UpdateTask(ctx, t)
}

// UpdateTaskWithLogs is refused as the UpdateTask it carries.
func (s *faultStore) UpdateTaskWithLogs(ctx context.Context, t *store.Task, es []store.LogEntry) error {
	if err := s.check(ctx, "UpdateTask", true); err != nil {
		return err
	}
	return s.Store.UpdateTaskWithLogs(ctx, t, es)
}

func (s *faultStore) TouchPoll(ctx context.Context, agent, id string, at int64) (int64, error) {
	if err := s.check(ctx, "TouchPoll", true); err != nil {
		return 0, err
	}
	return s.Store.TouchPoll(ctx, agent, id, at)
}

func (s *faultStore) AppendLogs(ctx context.Context, id string, fence int64, es []store.LogEntry) error {
	if err := s.check(ctx, "AppendLogs", true); err != nil {
		return err
	}
	return s.Store.AppendLogs(ctx, id, fence, es)
}

func (s *faultStore) ClaimTasks(ctx context.Context, c store.Claim) ([]*store.Task, error) {
	if err := s.check(ctx, "ClaimTasks", true); err != nil {
		return nil, err
	}
	return s.Store.ClaimTasks(ctx, c)
}

func (s *faultStore) RenewLeases(ctx context.Context, owner string, until int64, ids []string) ([]string, error) {
	if err := s.check(ctx, "RenewLeases", true); err != nil {
		return nil, err
	}
	return s.Store.RenewLeases(ctx, owner, until, ids)
}

func (s *faultStore) ReleaseLeases(ctx context.Context, owner string, ids []string) (int, error) {
	if err := s.check(ctx, "ReleaseLeases", true); err != nil {
		return 0, err
	}
	return s.Store.ReleaseLeases(ctx, owner, ids)
}

func (s *faultStore) Heartbeat(ctx context.Context, p store.Process) error {
	if err := s.check(ctx, "Heartbeat", true); err != nil {
		return err
	}
	return s.Store.Heartbeat(ctx, p)
}

// awaitRefused waits until the store refused op n times.
func (s *faultStore) awaitRefused(t *testing.T, op string, n int) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for n > 0 {
		select {
		case got := <-s.refused:
			if got == op {
				n--
			}
		case <-timeout:
			t.Fatalf("the store never refused %s", op)
		}
	}
}

// TestOutcomeSurvivesStoreOutage (issue: a database blip at the end of a run
// left the task running forever): the store goes down just as the run
// ends; the follower keeps trying to write the outcome (and its log), a
// client meanwhile learns only that the store is unavailable, and once the
// store is back the task completes with the run's text and its session is
// free for the next task.
func TestOutcomeSurvivesStoreOutage(t *testing.T) {
	e := newEnv(t)
	fs := newFaultStore(e.st)
	m := e.manager(func(o *Options) {
		o.Store, o.RetryMin, o.RetryMax = fs, time.Millisecond, 5*time.Millisecond
	})
	res, err := m.Submit(t.Context(), SubmitRequest{Task: "x SLOW 4", SessionKey: "agent:main:blip"})
	if err != nil {
		t.Fatal(err)
	}
	e.gw.waitStarted(t, res.JobID)
	fs.setDown(true)
	e.gw.emit(res.JobID, Event{Kind: EventLifecycle, Phase: "end", Seq: 7}) // its log entry waits for the store
	e.gw.end(res.JobID, Outcome{Status: OutcomeOK, Text: "the answer"})
	fs.awaitRefused(t, "UpdateTask", 3) // retried, not given up

	_, err = m.Check(t.Context(), CheckRequest{JobID: res.JobID, Mode: CheckPoll})
	if !errors.Is(err, ErrStoreUnavailable) {
		t.Fatalf("check_task during the outage = %v, want ErrStoreUnavailable", err)
	}
	for _, secret := range []string{"user=", "postgres", "127.0.0.1", "35739"} {
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("the client-facing error %q shows %q", err, secret)
		}
	}

	fs.setDown(false)
	s := await(t, m, res.JobID)
	if s.Status != "completed" || s.Summary != "the answer" || s.TerminalReason != "live-final" {
		t.Fatalf("after the outage: %s %q %s", s.Status, s.Summary, s.TerminalReason)
	}
	found := false
	for _, l := range s.Logs {
		found = found || l.Text == "Agent lifecycle: end"
	}
	if !found {
		t.Fatalf("the log entry held back by the outage was lost: %+v", s.Logs)
	}
	if _, err := m.Submit(t.Context(), SubmitRequest{Task: "next", SessionKey: "agent:main:blip"}); err != nil {
		t.Fatalf("the session is not free after the outage: %v", err)
	}
}

// TestUnfollowedTaskBecomesClaimable (issue: renewal extended every running
// row the replica owned, including tasks it no longer followed): a running
// task this owner holds but does not follow is not renewed, so its lease
// runs out and it is claimed and followed again.
func TestUnfollowedTaskBecomesClaimable(t *testing.T) {
	e := newEnv(t)
	m := e.manager(func(o *Options) { o.Owner, o.Lease = "replica-a", 300*time.Millisecond })
	followed, err := m.Submit(t.Context(), SubmitRequest{Task: "followed"})
	if err != nil {
		t.Fatal(err)
	}
	e.gw.waitStarted(t, followed.JobID)
	// A task the owner holds (after its start-up claim) but does not follow,
	// as a follower that gave up used to leave it.
	orphan := storetest.Task("orphan", "main", "agent:main:orphan", time.Now().UnixMilli())
	orphan.Owner, orphan.LeaseUntil = "replica-a", time.Now().Add(300*time.Millisecond).UnixMilli()
	if err := e.st.CreateTask(t.Context(), orphan); err != nil {
		t.Fatal(err)
	}
	e.gw.waitStarted(t, "orphan") // claimed once its lease ran out, and followed
	e.gw.end("orphan", Outcome{Status: OutcomeOK, Text: "not stuck"})
	if s := await(t, m, "orphan"); s.Summary != "not stuck" {
		t.Fatalf("orphan: %+v", s)
	}
	e.gw.end(followed.JobID, Outcome{Status: OutcomeOK, Text: "ok"})
	await(t, m, followed.JobID)
}

// TestStaleFollowerChangesNothing (issue: outcome writes were not fenced by
// owner): replica A is paused past its lease while it follows a task; B
// takes the task over and finishes it; when A wakes, every write it had
// under way is refused, and the record, its logs and its outcome version
// stay as B left them.
func TestStaleFollowerChangesNothing(t *testing.T) {
	e := newEnv(t)
	fa := newFaultStore(e.st)
	const lease = 300 * time.Millisecond
	a := e.manager(func(o *Options) { o.Owner, o.Lease, o.Store = "replica-a", lease, fa })
	res, err := a.Submit(t.Context(), SubmitRequest{Task: "contested"})
	if err != nil {
		t.Fatal(err)
	}
	e.gw.waitStarted(t, res.JobID)
	fa.pause() // A stops writing (and renewing) from here on
	b := e.manager(func(o *Options) { o.Owner, o.Lease = "replica-b", lease })
	e.gw.waitStarted(t, res.JobID) // B claimed the expired lease
	e.gw.end(res.JobID, Outcome{Status: OutcomeOK, Text: "by b"})
	s := await(t, b, res.JobID)
	if s.Summary != "by b" {
		t.Fatalf("B's outcome: %+v", s)
	}
	before, err := e.st.GetTask(t.Context(), "main", res.JobID)
	if err != nil {
		t.Fatal(err)
	}
	logsBefore, err := e.st.Logs(t.Context(), res.JobID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	// A's follower saw the same run end and is blocked writing its own
	// outcome; wake it and wait until it gives the task up.
	l := a.getLive(res.JobID)
	if l == nil {
		t.Fatal("A stopped following before it was woken")
	}
	fa.resume()
	select {
	case <-l.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("A kept following a task it lost")
	}
	after, err := e.st.GetTask(t.Context(), "main", res.JobID)
	if err != nil {
		t.Fatal(err)
	}
	logsAfter, err := e.st.Logs(t.Context(), res.JobID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Fatalf("the woken replica changed the task (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(logsBefore, logsAfter); diff != "" {
		t.Fatalf("the woken replica changed the log (-before +after):\n%s", diff)
	}
	if after.Owner != "replica-b" || after.OutcomeVersion != 1 {
		t.Fatalf("owner %q outcome version %d", after.Owner, after.OutcomeVersion)
	}
}

// logSignal is a slog handler that reports each record's message.
type logSignal struct {
	msgs chan string
}

func newLogSignal() *logSignal { return &logSignal{msgs: make(chan string, 1<<12)} }

func (h *logSignal) Enabled(context.Context, slog.Level) bool { return true }
func (h *logSignal) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logSignal) WithGroup(string) slog.Handler            { return h }
func (h *logSignal) Handle(_ context.Context, r slog.Record) error {
	select {
	case h.msgs <- r.Message:
	default:
	}
	return nil
}

// await waits for a log message with the prefix.
func (h *logSignal) await(t *testing.T, prefix string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case m := <-h.msgs:
			if strings.HasPrefix(m, prefix) {
				return
			}
		case <-timeout:
			t.Fatalf("no log message %q", prefix)
		}
	}
}

// TestOutcomeSurvivesPostgresOutage is the reproduction on a real
// database: PostgreSQL (a throwaway cluster of this test) stops just as
// the run ends and comes back seconds later; the task completes with the
// run's text and its session is free, and a client asking meanwhile is
// told only that the store is unavailable.
func TestOutcomeSurvivesPostgresOutage(t *testing.T) {
	cluster := storetest.StartPostgres(t)
	st, err := postgres.Open(t.Context(), postgres.Options{URL: cluster.URL()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	e := newEnv(t)
	logs := newLogSignal()
	m := e.manager(func(o *Options) {
		o.Store, o.Logger = st, slog.New(logs)
		o.RetryMin, o.RetryMax = 10*time.Millisecond, 200*time.Millisecond
	})
	res, err := m.Submit(t.Context(), SubmitRequest{Task: "x SLOW 4", SessionKey: "agent:main:pg-blip"})
	if err != nil {
		t.Fatal(err)
	}
	e.gw.waitStarted(t, res.JobID)
	cluster.Stop(t)
	e.gw.end(res.JobID, Outcome{Status: OutcomeOK, Text: "written after the outage"})
	logs.await(t, "writing the task outcome failed; retrying")
	_, err = m.Check(t.Context(), CheckRequest{JobID: res.JobID, Mode: CheckPoll})
	if !errors.Is(err, ErrStoreUnavailable) || strings.Contains(err.Error(), "user=") || strings.Contains(err.Error(), "127.0.0.1") {
		t.Fatalf("check_task during the outage = %v, want only that the store is unavailable", err)
	}
	cluster.Start(t)
	s := await(t, m, res.JobID)
	if s.Status != "completed" || s.Summary != "written after the outage" {
		t.Fatalf("after the outage: %s %q %s", s.Status, s.Summary, s.TerminalReason)
	}
	if _, err := m.Submit(t.Context(), SubmitRequest{Task: "next", SessionKey: "agent:main:pg-blip"}); err != nil {
		t.Fatalf("the session is not free after the outage: %v", err)
	}
}
