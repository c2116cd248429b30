package task

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/clawconnect/clawconnect/internal/store/postgres"
	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	"github.com/clawconnect/clawconnect/internal/store/sqlstore"
)

// benchBackends returns the store constructors to benchmark: SQLite always,
// PostgreSQL when TEST_DATABASE_URL is set (each store in a fresh schema).
func benchBackends(b *testing.B) map[string]func(b *testing.B) *sqlstore.DB {
	out := map[string]func(b *testing.B) *sqlstore.DB{
		"sqlite": func(b *testing.B) *sqlstore.DB {
			s, err := sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(b.TempDir(), "clawconnect.db")})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			return s
		},
	}
	if url := os.Getenv("TEST_DATABASE_URL"); url != "" {
		out["postgres"] = func(b *testing.B) *sqlstore.DB {
			r := make([]byte, 6)
			_, _ = rand.Read(r)
			schema := "ccbench_" + hex.EncodeToString(r)
			s, err := postgres.Open(context.Background(), postgres.Options{URL: url, Schema: schema})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				_ = s.Close()
				if db, err := sql.Open("pgx", url); err == nil {
					_, _ = db.Exec(`DROP SCHEMA ` + schema + ` CASCADE`)
					_ = db.Close()
				}
			})
			return s
		}
	}
	return out
}

func benchManager(b *testing.B, st *sqlstore.DB, gw *fakeGW) *Manager {
	o := fastOptions()
	o.Store, o.Gateway = st, gw
	m, err := New(o)
	if err != nil {
		b.Fatal(err)
	}
	if err := m.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(m.Close)
	return m
}

// BenchmarkGetTask: get_task (summary preset) and a terminal check_task on
// a store holding 10^3 vs 10^6 finished tasks. Cost must stay flat.
func BenchmarkGetTask(b *testing.B) {
	for name, open := range benchBackends(b) {
		for _, n := range []int{1_000, 1_000_000} {
			b.Run(fmt.Sprintf("%s/tasks=%d", name, n), func(b *testing.B) {
				st := open(b)
				if err := st.SeedTasks(context.Background(), "main", "seed-", n, false); err != nil {
					b.Fatal(err)
				}
				m := benchManager(b, st, newFakeGW())
				ctx := context.Background()
				// "recent" cycles over the newest 1000 tasks (what clients
				// poll); "spread" over 1000 tasks evenly spaced through the
				// whole store (the same working set at both sizes, but on
				// pages scattered through a deeper tree); "any" picks
				// uniformly among all n, so at 10^6 nearly every read is of
				// cold pages and nearly every poll dirties a page of its own.
				pick := map[string]func(i int) string{
					"recent": func(i int) string { return fmt.Sprintf("seed-%d", n-(i*7919)%1000) },
					"spread": func(i int) string { return fmt.Sprintf("seed-%d", 1+(i*7919)%1000*(n/1000)) },
					"any":    func(i int) string { return fmt.Sprintf("seed-%d", 1+(i*7919)%n) },
				}
				for _, set := range []string{"recent", "spread", "any"} {
					b.Run("get_task/"+set, func(b *testing.B) {
						b.ReportAllocs()
						i := 0
						for b.Loop() {
							i++
							if _, err := m.GetTask(ctx, pick[set](i), DetailSummary, 0); err != nil {
								b.Fatal(err)
							}
						}
					})
					b.Run("check_task/"+set, func(b *testing.B) {
						b.ReportAllocs()
						i := 0
						for b.Loop() {
							i++
							if _, err := m.Check(ctx, CheckRequest{JobID: pick[set](i)}); err != nil {
								b.Fatal(err)
							}
						}
					})
					// check_task with the write-behind of poll counters
					// (SQLite) charged to the polls: a flush every
					// flushEvery polls, so ns/op includes the writes the
					// background flusher would do.
					b.Run("check_task+flush/"+set, func(b *testing.B) {
						const flushEvery = 256
						b.ReportAllocs()
						i := 0
						for b.Loop() {
							i++
							if _, err := m.Check(ctx, CheckRequest{JobID: pick[set](i)}); err != nil {
								b.Fatal(err)
							}
							if i%flushEvery == 0 {
								if err := st.FlushPolls(ctx); err != nil {
									b.Fatal(err)
								}
							}
						}
						if err := st.FlushPolls(ctx); err != nil {
							b.Fatal(err)
						}
					})
				}
			})
		}
	}
}

// BenchmarkSubmitAndWait: run_task followed by a waiting check_task that
// returns when the task ends, against an instant gateway (tasks/s).
func BenchmarkSubmitAndWait(b *testing.B) {
	for name, open := range benchBackends(b) {
		b.Run(name, func(b *testing.B) {
			gw := newFakeGW()
			gw.instant = func(req RunRequest) Outcome { return Outcome{Status: OutcomeOK, Text: "ok"} }
			m := benchManager(b, open(b), gw)
			ctx := context.Background()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					res, err := m.Submit(ctx, SubmitRequest{Task: "bench"})
					if err != nil {
						b.Fatal(err)
					}
					s, err := m.Check(ctx, CheckRequest{JobID: res.JobID, WaitMs: waitMs(30000)})
					if err != nil || s.Status != "completed" {
						b.Fatalf("%v %+v", err, s)
					}
				}
			})
		})
	}
}

// BenchmarkRehydrate: a fresh manager claims 10^4 running tasks and has
// re-observed every one of them (its run resubmitted under the same key and
// followed again); the runs then stay open until Close.
func BenchmarkRehydrate(b *testing.B) {
	const n = 10_000
	for name, open := range benchBackends(b) {
		b.Run(fmt.Sprintf("%s/running=%d", name, n), func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				st := open(b)
				if err := st.SeedTasks(context.Background(), "main", fmt.Sprintf("r%d-", i), n, true); err != nil {
					b.Fatal(err)
				}
				gw := newFakeGW()
				gw.started = make(chan string, n+1)
				o := fastOptions()
				o.Store, o.Gateway = st, gw
				m, err := New(o)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if err := m.Start(context.Background()); err != nil {
					b.Fatal(err)
				}
				for range n {
					<-gw.started
				}
				b.StopTimer()
				m.Close()
				b.StartTimer()
			}
		})
	}
}
