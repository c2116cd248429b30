package sqlstore

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"sync"
)

// pool runs queries on a *sql.DB with every query text prepared once and
// reused on each connection. modernc's SQLite otherwise compiles the text
// anew on every call, which cost more than the keyed lookup it then ran;
// pgx caches statements itself, so preparing costs PostgreSQL nothing.
// Queries are written with ? placeholders and rebound for the dialect. Every
// query text is a constant or one of a few fixed shapes, so the cache stays
// small.
type pool struct {
	runner
	db     *sql.DB
	dollar bool
	stmts  sync.Map // ?-query text -> *sql.Stmt
}

func newPool(db *sql.DB, dollar bool) *pool {
	p := &pool{db: db, dollar: dollar}
	p.runner = runner{p.stmt}
	return p
}

// stmt returns q prepared, preparing it on first use.
func (p *pool) stmt(ctx context.Context, q string) (*sql.Stmt, error) {
	if s, ok := p.stmts.Load(q); ok {
		return s.(*sql.Stmt), nil
	}
	s, err := p.db.PrepareContext(ctx, p.rebind(q))
	if err != nil {
		return nil, err
	}
	if prev, loaded := p.stmts.LoadOrStore(q, s); loaded {
		_ = s.Close()
		return prev.(*sql.Stmt), nil
	}
	return s, nil
}

// rebind turns q's ? placeholders into $1, $2, … where the dialect needs it;
// a ? inside a quoted literal or identifier is text, not a placeholder.
func (p *pool) rebind(q string) string { return rebind(q, p.dollar) }

func rebind(q string, dollar bool) string {
	if !dollar || !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	n := 0
	var quote rune // the quote of the literal or identifier q is inside, or 0
	for _, c := range q {
		switch {
		case quote != 0:
			if c == quote { // a doubled quote reopens the literal at once
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '?':
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// close closes the prepared statements (before the pool itself).
func (p *pool) close() {
	p.stmts.Range(func(_, s any) bool {
		_ = s.(*sql.Stmt).Close()
		return true
	})
}

// txn is a transaction on the writer pool that reuses the pool's prepared
// statements.
type txn struct {
	runner
	tx *sql.Tx
	p  *pool
	// missed are the queries this transaction prepared for itself.
	missed []string
	// announced is set once the transaction wrote a change row; unheard
	// are the ids whose rows it skipped because nobody listened (see
	// DB.afterCommit).
	announced bool
	unheard   []string
}

func newTxn(tx *sql.Tx, p *pool) *txn {
	t := &txn{tx: tx, p: p}
	t.runner = runner{t.stmt}
	return t
}

// stmt returns q prepared on the transaction's connection.
func (t *txn) stmt(ctx context.Context, q string) (*sql.Stmt, error) {
	if s, ok := t.p.stmts.Load(q); ok {
		return t.tx.StmtContext(ctx, s.(*sql.Stmt)), nil
	}
	// Preparing on the pool takes a free connection, and the transaction
	// may hold the only one (SQLite's writer): prepare on the transaction
	// now, and on the pool once it has ended.
	t.missed = append(t.missed, q)
	return t.tx.PrepareContext(ctx, t.p.rebind(q))
}

// ended prepares on the pool the queries the transaction prepared alone,
// once the transaction has released its connection.
func (t *txn) ended(ctx context.Context) {
	for _, q := range t.missed {
		_, _ = t.p.stmt(ctx, q)
	}
}

// runner runs queries through prepare, which yields each one prepared.
type runner struct {
	prepare func(ctx context.Context, q string) (*sql.Stmt, error)
}

// QueryRowContext runs q for one row.
func (r runner) QueryRowContext(ctx context.Context, q string, args ...any) scanner {
	s, err := r.prepare(ctx, q)
	if err != nil {
		return errRow{err}
	}
	return s.QueryRowContext(ctx, args...)
}

// QueryContext runs q.
func (r runner) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	s, err := r.prepare(ctx, q)
	if err != nil {
		return nil, err
	}
	return s.QueryContext(ctx, args...)
}

// ExecContext runs q.
func (r runner) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	s, err := r.prepare(ctx, q)
	if err != nil {
		return nil, err
	}
	return s.ExecContext(ctx, args...)
}

// errRow is a row whose query could not be prepared.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
