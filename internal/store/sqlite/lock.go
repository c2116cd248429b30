package sqlite

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
)

// LockSuffix names the advisory lock file beside the database (path +
// LockSuffix) that orders writers across processes.
//
// SQLite's own wait for its write lock is a busy handler that sleeps and
// retries in growing steps (up to 100 ms each), so when writers of several
// processes collide, each one that missed the lock sleeps past the moment
// it was released, and the file is idle between writes while everybody
// sleeps (10 processes: ~60 tasks/s, round trip median ~100 ms). Every write
// transaction of a process therefore first takes an exclusive flock(2) on
// this file and holds it until its COMMIT or ROLLBACK returns: a waiter
// blocks in the kernel and wakes when the holder releases, when SQLite's
// lock is free too. The flock only orders the writers that use it; SQLite's
// lock (BEGIN IMMEDIATE under busy_timeout) still guards the data, so a
// writer that does not take the flock (an older build, the sqlite3 shell)
// is safe beside it, and a store whose lock file cannot be opened works
// without it.
const LockSuffix = "-lock"

// errLockWait is a write that waited the busy timeout for the lock file.
var errLockWait = fmt.Errorf("another process held the store's write lock file for longer than the busy timeout; nothing was written, retry: %w", store.ErrBusy)

// writeLock is the lock file of one opened store. One holder per store at a
// time: the writer pool has one connection, and sem keeps a waiter that
// gave up from sharing the file's lock with the next one.
type writeLock struct {
	f       *os.File
	fd      int
	timeout time.Duration
	sem     chan struct{}
}

// openWriteLock opens (creating, 0600) the lock file of the database at
// path; nil when it cannot (the store then relies on SQLite's wait alone).
func openWriteLock(path string, timeout time.Duration) *writeLock {
	f, err := os.OpenFile(path+LockSuffix, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil
	}
	return &writeLock{f: f, fd: int(f.Fd()), timeout: timeout, sem: make(chan struct{}, 1)}
}

func (l *writeLock) close() error {
	if l == nil {
		return nil
	}
	return l.f.Close()
}

// acquire takes the lock, waiting at most l.timeout (then an error that
// isBusy recognizes) or until ctx ends. The returned release is idempotent.
func (l *writeLock) acquire(ctx context.Context) (release func(), err error) {
	if l == nil {
		return func() {}, nil
	}
	var timer *time.Timer
	deadline := func() <-chan time.Time {
		if timer == nil {
			timer = time.NewTimer(l.timeout)
		}
		return timer.C
	}
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	select {
	case l.sem <- struct{}{}:
	default:
		select {
		case l.sem <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline():
			return nil, errLockWait
		}
	}
	fd := l.fd
	err = flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		return l.releaser(fd), nil
	}
	if !errors.Is(err, syscall.EWOULDBLOCK) {
		<-l.sem
		return func() {}, nil // no usable lock file: SQLite's wait alone
	}
	// Another process writes: block in the kernel until it releases. The
	// blocking call cannot be interrupted, so it runs in a goroutine that
	// ends when the holder releases (or exits); a caller that stops
	// waiting leaves it to drop the lock at once.
	got := make(chan error, 1)
	go func() { got <- flock(fd, syscall.LOCK_EX) }()
	select {
	case err := <-got:
		if err != nil {
			<-l.sem
			return func() {}, nil
		}
		return l.releaser(fd), nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-deadline():
		err = errLockWait
	}
	go func() {
		if <-got == nil {
			_ = flock(fd, syscall.LOCK_UN)
		}
		<-l.sem
	}()
	return nil, err
}

func (l *writeLock) releaser(fd int) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			_ = flock(fd, syscall.LOCK_UN)
			<-l.sem
		})
	}
}

// flock is flock(2), retried when a signal interrupts it.
func flock(fd, how int) error {
	for {
		err := syscall.Flock(fd, how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// lockedConnector opens the writer's connections: each write transaction
// and each statement run outside one holds the lock file while it runs.
type lockedConnector struct {
	drv  driver.Driver
	dsn  string
	lock *writeLock
}

func (c *lockedConnector) Connect(context.Context) (driver.Conn, error) {
	cn, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return &lockedConn{inner: cn, lock: c.lock}, nil
}

func (c *lockedConnector) Driver() driver.Driver { return c.drv }

// innerConn is what modernc's connection implements and database/sql uses.
type innerConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
}

// lockedConn is a writer connection; inTx is set while one of its
// transactions holds the lock (database/sql uses a connection from one
// goroutine at a time).
type lockedConn struct {
	inner driver.Conn
	lock  *writeLock
	inTx  bool
	// txStmts are BEGIN IMMEDIATE, COMMIT and ROLLBACK, prepared on the
	// connection's first transaction and kept: modernc's own transactions
	// compile each of them anew every time.
	txStmts *txStmts
}

type txStmts struct{ begin, commit, rollback innerStmt }

func (t *txStmts) close() {
	for _, s := range []innerStmt{t.begin, t.commit, t.rollback} {
		if s != nil {
			_ = s.Close()
		}
	}
}

func (c *lockedConn) conn() innerConn { return c.inner.(innerConn) }

func (c *lockedConn) Prepare(q string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), q)
}

func (c *lockedConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	s, err := c.conn().PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	return &lockedStmt{inner: s, c: c}, nil
}

func (c *lockedConn) Close() error {
	if t := c.txStmts; t != nil {
		t.close()
	}
	return c.inner.Close()
}

func (c *lockedConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

// BeginTx begins an IMMEDIATE transaction (the writer's only kind, see
// Open) holding the lock file until it ends.
func (c *lockedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if opts != (driver.TxOptions{}) {
		return nil, errors.New("sqlite writer: transactions take no options")
	}
	release, err := c.lock.acquire(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.begin(ctx); err != nil {
		release()
		return nil, err
	}
	c.inTx = true
	return &lockedTx{c: c, release: release}, nil
}

// begin runs BEGIN IMMEDIATE, preparing the transaction statements first
// if needed. It waits for SQLite's write lock under busy_timeout, or until
// ctx ends.
func (c *lockedConn) begin(ctx context.Context) error {
	if c.txStmts == nil {
		t := &txStmts{}
		for _, p := range []struct {
			q   string
			dst *innerStmt
		}{{"BEGIN IMMEDIATE", &t.begin}, {"COMMIT", &t.commit}, {"ROLLBACK", &t.rollback}} {
			s, err := c.conn().PrepareContext(ctx, p.q)
			if err != nil {
				t.close()
				return err
			}
			*p.dst = s.(innerStmt)
		}
		c.txStmts = t
	}
	if _, err := c.txStmts.begin.ExecContext(ctx, nil); err != nil {
		// The driver reports a context that ended while BEGIN ran as an
		// error even if BEGIN took effect: leave no transaction open.
		c.rollback()
		return err
	}
	return nil
}

// rollback runs ROLLBACK; with no transaction open it does nothing.
func (c *lockedConn) rollback() error {
	_, err := c.txStmts.rollback.ExecContext(context.Background(), nil)
	return err
}

// stmtCtx is the context a statement of c runs under. Inside a
// transaction it is ctx without its cancellation: the statement waits for
// no lock (BEGIN IMMEDIATE took the write lock) and ends in microseconds,
// and database/sql rolls the transaction back once ctx ends, after the
// statement; an interruptible statement costs the driver a goroutine of
// its own, started and ended every time.
func (c *lockedConn) stmtCtx(ctx context.Context) context.Context {
	if c.inTx {
		return context.WithoutCancel(ctx)
	}
	return ctx
}

// around runs fn holding the lock unless a transaction already holds it.
func (c *lockedConn) around(ctx context.Context, fn func() error) error {
	if c.inTx {
		return fn()
	}
	release, err := c.lock.acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	return fn()
}

func (c *lockedConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (r driver.Result, err error) {
	err = c.around(ctx, func() error { r, err = c.conn().ExecContext(c.stmtCtx(ctx), q, args); return err })
	return r, err
}

func (c *lockedConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	return c.query(ctx, func() (driver.Rows, error) { return c.conn().QueryContext(c.stmtCtx(ctx), q, args) })
}

// query runs fn under the lock (unless a transaction holds it) and keeps
// the lock until the rows are closed: a statement writes as it steps.
func (c *lockedConn) query(ctx context.Context, fn func() (driver.Rows, error)) (driver.Rows, error) {
	if c.inTx {
		return fn()
	}
	release, err := c.lock.acquire(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := fn()
	if err != nil {
		release()
		return nil, err
	}
	return &lockedRows{Rows: rows, release: release}, nil
}

func (c *lockedConn) Ping(ctx context.Context) error {
	if p, ok := c.inner.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (c *lockedConn) ResetSession(ctx context.Context) error {
	if r, ok := c.inner.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *lockedConn) IsValid() bool {
	if v, ok := c.inner.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

type lockedTx struct {
	c       *lockedConn
	release func()
}

// Commit runs COMMIT without a context: a driver given one reports a
// context that ended meanwhile as a failure even once the commit took
// effect. In WAL mode, with the write lock held since BEGIN IMMEDIATE, a
// COMMIT appends to the log without waiting for other connections.
func (t *lockedTx) Commit() error {
	defer t.end()
	_, err := t.c.txStmts.commit.ExecContext(context.Background(), nil)
	if err != nil {
		// A COMMIT that failed may leave the transaction open, and
		// database/sql expects the connection clean once Commit returns.
		_ = t.c.rollback()
	}
	return err
}

func (t *lockedTx) Rollback() error {
	defer t.end()
	return t.c.rollback()
}

func (t *lockedTx) end() {
	t.c.inTx = false
	t.release()
}

type innerStmt interface {
	driver.Stmt
	driver.StmtExecContext
	driver.StmtQueryContext
}

type lockedStmt struct {
	inner driver.Stmt
	c     *lockedConn
}

func (s *lockedStmt) stmt() innerStmt { return s.inner.(innerStmt) }

func (s *lockedStmt) Close() error  { return s.inner.Close() }
func (s *lockedStmt) NumInput() int { return s.inner.NumInput() }

func (s *lockedStmt) Exec(args []driver.Value) (driver.Result, error) {
	return nil, errors.New("sqlite: Exec without context is not used")
}

func (s *lockedStmt) Query(args []driver.Value) (driver.Rows, error) {
	return nil, errors.New("sqlite: Query without context is not used")
}

func (s *lockedStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (r driver.Result, err error) {
	err = s.c.around(ctx, func() error { r, err = s.stmt().ExecContext(s.c.stmtCtx(ctx), args); return err })
	return r, err
}

func (s *lockedStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	return s.c.query(ctx, func() (driver.Rows, error) { return s.stmt().QueryContext(s.c.stmtCtx(ctx), args) })
}

// lockedRows releases the lock once closed.
type lockedRows struct {
	driver.Rows
	release func()
}

func (r *lockedRows) Close() error {
	defer r.release()
	return r.Rows.Close()
}
