package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
)

// ErrCorrupt reports a store file that fails SQLite's integrity check, or
// an empty file that replaced a store in use. The file is left untouched
// and nothing is written to it. It also matches store.ErrIncompatible.
var ErrCorrupt = errors.New("store fails its integrity check")

// ErrCheckIncomplete reports an integrity check that did not finish within
// its time bound; the store was neither proven healthy nor corrupt.
var ErrCheckIncomplete = errors.New("integrity check did not finish in time")

// OpenCheckTimeout bounds the integrity check Open runs, so a very large
// store delays start-up by at most this much; a check cut short lets Open
// proceed (doctor runs the full check).
const OpenCheckTimeout = 3 * time.Second

// corruptError is an ErrCorrupt with the evidence and the way out.
type corruptError struct{ msg string }

func (e *corruptError) Error() string { return e.msg }

// Is matches ErrCorrupt and store.ErrIncompatible.
func (e *corruptError) Is(target error) bool {
	return target == ErrCorrupt || target == store.ErrIncompatible
}

// recoverHint says how to get out of a corrupt store.
func recoverHint(path string) string {
	return fmt.Sprintf("the file was left untouched and nothing will be written to it. To recover: stop every "+
		"clawconnect process and copy %[1]s aside; then restore it from a backup, or salvage what is still "+
		"readable into a new file with `sqlite3 %[1]s .recover | sqlite3 %[1]s.new` (or `.dump` where .recover is "+
		"unavailable) and move that into its place, or move the file aside to start with an empty store "+
		"(its tasks are then gone)", path)
}

// CheckIntegrity runs SQLite's quick_check on the store at path through a
// read-only connection, so it never writes the file and works beside a
// process that owns it. A missing or empty file passes (there is nothing
// to check). A check cut short by ctx returns ErrCheckIncomplete; a
// failing one an error matching ErrCorrupt that says how to recover.
func CheckIntegrity(ctx context.Context, path string) error {
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) || (err == nil && st.Size() == 0) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("check integrity: %w", err)
	}
	if err := checkHeader(path); err != nil {
		return err
	}
	dsn := "file:" + strings.ReplaceAll(path, "%", "%25") + "?mode=ro&_pragma=busy_timeout(5000)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return fmt.Errorf("check integrity: %w", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	rows, err := db.QueryContext(ctx, "PRAGMA quick_check(20)")
	if err != nil {
		return integrityErr(ctx, path, err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return integrityErr(ctx, path, err)
		}
		if line != "ok" {
			problems = append(problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		return integrityErr(ctx, path, err)
	}
	if len(problems) > 0 {
		return &corruptError{msg: fmt.Sprintf("the SQLite store %s fails its integrity check (%s); %s",
			path, strings.Join(problems, "; "), recoverHint(path))}
	}
	return nil
}

// integrityErr classifies an error of the check itself: SQLite's own
// verdict that the file is malformed is corruption, a cancelled check is
// incomplete, anything else is a plain failure.
func integrityErr(ctx context.Context, path string, err error) error {
	switch {
	case isNotADB(err):
		return &corruptError{msg: fmt.Sprintf("the SQLite store %s is malformed (%v); %s", path, err, recoverHint(path))}
	case ctx.Err() != nil:
		return fmt.Errorf("check integrity of %s: %w", path, ErrCheckIncomplete)
	}
	return fmt.Errorf("check integrity of %s: %w", path, err)
}

// checkOnOpen is Open's integrity check: bounded by OpenCheckTimeout, and
// only a proven problem refuses the store.
func checkOnOpen(ctx context.Context, path string) error {
	cctx, cancel := context.WithTimeout(ctx, OpenCheckTimeout)
	defer cancel()
	if err := CheckIntegrity(cctx, path); err != nil && !errors.Is(err, ErrCheckIncomplete) {
		return err
	}
	return nil
}

// signalled reports whether the change signal beside path exists, i.e. a
// store was opened here before (every Open creates it, listen.go).
func signalled(path string) bool {
	_, err := os.Stat(path + signalSuffix)
	return err == nil
}

// checkReplaced refuses an empty store file when a non-empty write-ahead
// log, or the change signal that every commit writes, shows that a store was
// in use here: the file was truncated or replaced, and opening it would
// silently start an empty store over the evidence.
func checkReplaced(path string) error {
	st, err := os.Stat(path)
	if err != nil || st.Size() != 0 {
		return nil
	}
	var evidence string
	if wal, err := os.Stat(path + "-wal"); err == nil && wal.Size() > 0 {
		evidence = fmt.Sprintf("its write-ahead log %s-wal holds %d bytes", path, wal.Size())
	} else if signalled(path) {
		evidence = fmt.Sprintf("its change signal %s%s shows a store was opened here before", path, signalSuffix)
	}
	if evidence == "" {
		return nil
	}
	return &corruptError{msg: fmt.Sprintf("the SQLite store %s is an empty file, but %s: it was truncated or replaced. "+
		"It was left untouched. Restore it from a backup; or, if you mean to start with an empty store, stop every "+
		"clawconnect process and remove %[1]s, %[1]s-wal and %[1]s%[3]s", path, evidence, signalSuffix)}
}
