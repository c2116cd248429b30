// Package postgres is the shared store for several replicas: the same schema
// as the SQLite store in its own PostgreSQL schema (default "clawconnect"),
// reached through pgx. Running tasks are owned through leases (see
// store.Store.ClaimTasks), so any replica can take over a dead one's tasks.
package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/clawconnect/clawconnect/internal/store/sqlstore"
)

// DefaultSchema is the schema the store lives in.
const DefaultSchema = "clawconnect"

// Options configures Open.
type Options struct {
	// URL is a postgres:// or postgresql:// connection URL; required.
	URL string
	// Schema is the schema to use; "" means DefaultSchema. It is created if
	// missing.
	Schema string
	// MaxConns bounds the pool; 0 means 8.
	MaxConns int
}

// IsURL reports whether s is a PostgreSQL connection URL.
func IsURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// validSchema reports whether name is a plain lower-case identifier of at
// most 63 bytes (^[a-z_][a-z0-9_]{0,62}$), safe to put into SQL unquoted. It
// is hand-written: a package-level regexp cost every process start ~1 ms.
func validSchema(name string) bool {
	if name == "" || len(name) > 63 || ('0' <= name[0] && name[0] <= '9') {
		return false
	}
	for _, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// Open connects, creates the schema if needed, migrates it, and returns the
// store. It refuses a schema that holds foreign tables or a newer schema
// version (store.ErrIncompatible).
func Open(ctx context.Context, o Options) (*sqlstore.DB, error) {
	schema := o.Schema
	if schema == "" {
		schema = DefaultSchema
	}
	if !validSchema(schema) {
		return nil, fmt.Errorf("open postgres store: invalid schema name %q", schema)
	}
	if !IsURL(o.URL) {
		return nil, errors.New("open postgres store: the URL must start with postgres:// or postgresql://")
	}
	cfg, err := pgx.ParseConfig(o.URL)
	if err != nil {
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	cfg.RuntimeParams["search_path"] = schema
	db := stdlib.OpenDB(*cfg)
	n := o.MaxConns
	if n <= 0 {
		n = 8
	}
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	fail := func(err error) (*sqlstore.DB, error) {
		_ = db.Close()
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	if err := createSchema(ctx, db, schema); err != nil {
		return fail(err)
	}
	err = sqlstore.Migrate(ctx, db, sqlstore.MigrateOptions{
		Lock:   migrationLock,
		Dollar: true,
		Tables: func(ctx context.Context, tx *sql.Tx) ([]string, error) {
			rows, err := tx.QueryContext(ctx, `SELECT table_name FROM information_schema.tables
				WHERE table_schema = current_schema() ORDER BY table_name`)
			if err != nil {
				return nil, err
			}
			defer rows.Close()
			var out []string
			for rows.Next() {
				var t string
				if err := rows.Scan(&t); err != nil {
					return nil, err
				}
				out = append(out, t)
			}
			return out, rows.Err()
		},
	})
	if err != nil {
		return fail(err)
	}
	d := sqlstore.Dialect{
		Name: "postgres", Dollar: true, ForUpdate: " FOR UPDATE", SkipLocked: " FOR UPDATE SKIP LOCKED",
		RelaxedCommit: "SET LOCAL synchronous_commit = off", AfterBulk: "ANALYZE",
		IsUniqueViolation: func(err error) bool {
			var pe *pgconn.PgError
			return errors.As(err, &pe) && pe.Code == "23505"
		},
		// The schema name is validated above (validSchema), so it is safe
		// inside the literal.
		Notify: `SELECT pg_notify('` + changeChannel + `', '` + schema + `/' || CAST(? AS TEXT))`,
		Listen: listener(cfg.Copy(), schema),
	}
	return sqlstore.New(db, db, d, nil), nil
}

// migrationLock serializes the replicas that create or migrate a schema
// at the same moment.
const migrationLock = `SELECT pg_advisory_xact_lock(4242017)`

// createSchema creates schema unless it exists. CREATE SCHEMA IF NOT
// EXISTS alone is not safe against a replica creating it at the same
// moment: the loser fails on the catalog's unique index. Holding the
// migration lock makes the second one see the first's schema.
func createSchema(ctx context.Context, db *sql.DB, schema string) error {
	// A role without CREATE on the database can still use a schema an
	// administrator made for it; CREATE SCHEMA IF NOT EXISTS checks that
	// privilege before it looks.
	var exists bool
	if err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, migrationLock); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `CREATE SCHEMA IF NOT EXISTS `+schema); err != nil {
		if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "42501" { // insufficient_privilege
			return fmt.Errorf("%w; the role may not create the schema %s: have an administrator run CREATE SCHEMA %s AUTHORIZATION <role>", err, schema, schema)
		}
		return err
	}
	return tx.Commit()
}

// changeChannel is the notification channel every schema announces task
// changes on; a payload is "<schema>/<task id>".
const changeChannel = "clawconnect_tasks"

// listener returns the store's change listener: a connection of its own
// that LISTENs on changeChannel and passes on the ids announced for schema.
func listener(cfg *pgx.ConnConfig, schema string) func(ctx context.Context, changed func(id string), _ func() bool, _ <-chan struct{}) error {
	prefix := schema + "/"
	return func(ctx context.Context, changed func(id string), _ func() bool, _ <-chan struct{}) error {
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			return fmt.Errorf("listen for task changes: %w", err)
		}
		defer func() { _ = conn.Close(context.Background()) }()
		if _, err := conn.Exec(ctx, "LISTEN "+changeChannel); err != nil {
			return fmt.Errorf("listen for task changes: %w", err)
		}
		changed("") // changes made before LISTEN took effect were not heard
		for {
			n, err := conn.WaitForNotification(ctx)
			if err != nil {
				return fmt.Errorf("listen for task changes: %w", err)
			}
			if id, ok := strings.CutPrefix(n.Payload, prefix); ok {
				changed(id)
			}
		}
	}
}
