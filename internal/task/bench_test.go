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
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/clawconnect/clawconnect/internal/store/postgres"
	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	"github.com/clawconnect/clawconnect/internal/store/sqlstore"
	"github.com/clawconnect/clawconnect/taskapi"
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

// BenchmarkGetTask: get_task (summary preset) and a terminal check_task
// against two stores at once, one holding 10^3 finished tasks and one 10^6.
// Each op makes the request once on each store, in alternating order, and
// times each side on its own, so both sizes run under the same machine load
// and their ratio (x-vs-1e3) comes from one run. Cost must stay flat:
// x-vs-1e3 within 1.5.
func BenchmarkGetTask(b *testing.B) {
	sizes := [2]int{1_000, 1_000_000}
	for name, open := range benchBackends(b) {
		b.Run(name, func(b *testing.B) {
			var sts [2]*sqlstore.DB
			var ms [2]*Manager
			for k, n := range sizes {
				sts[k] = open(b)
				if err := sts[k].SeedTasks(context.Background(), "main", "seed-", n, false); err != nil {
					b.Fatal(err)
				}
				ms[k] = benchManager(b, sts[k], newFakeGW())
			}
			ctx := context.Background()
			// "recent" cycles over the newest 1000 tasks (what clients
			// poll); "spread" over 1000 tasks evenly spaced through the
			// whole store (the same working set at both sizes, but on
			// pages scattered through a deeper tree); "any" picks
			// uniformly among all n, so at 10^6 nearly every read is of
			// cold pages and nearly every poll dirties a page of its own.
			pick := map[string]func(n, i int) string{
				"recent": func(n, i int) string { return fmt.Sprintf("seed-%d", n-(i*7919)%1000) },
				"spread": func(n, i int) string { return fmt.Sprintf("seed-%d", 1+(i*7919)%1000*(n/1000)) },
				"any":    func(n, i int) string { return fmt.Sprintf("seed-%d", 1+(i*7919)%n) },
			}
			// check_task+flush charges the write-behind of poll counters
			// (SQLite) to the polls: a flush every flushEvery polls, so the
			// time includes the writes the background flusher would do.
			const flushEvery = 256
			ops := map[string]func(k, i int, id string) error{
				"get_task": func(k, _ int, id string) error {
					_, err := ms[k].GetTask(ctx, id, taskapi.DetailSummary, 0)
					return err
				},
				"check_task": func(k, _ int, id string) error {
					_, err := ms[k].Check(ctx, CheckRequest{JobID: id})
					return err
				},
				"check_task+flush": func(k, i int, id string) error {
					if _, err := ms[k].Check(ctx, CheckRequest{JobID: id}); err != nil {
						return err
					}
					if i%flushEvery == 0 {
						return sts[k].FlushPolls(ctx)
					}
					return nil
				},
			}
			for _, op := range []string{"get_task", "check_task", "check_task+flush"} {
				for _, set := range []string{"recent", "spread", "any"} {
					b.Run(op+"/"+set, func(b *testing.B) {
						b.ReportAllocs()
						var spent [2]time.Duration
						i := 0
						for b.Loop() {
							i++
							for j := range 2 {
								k := (i + j) % 2
								start := time.Now()
								if err := ops[op](k, i, pick[set](sizes[k], i)); err != nil {
									b.Fatal(err)
								}
								spent[k] += time.Since(start)
							}
						}
						b.ReportMetric(float64(spent[0].Nanoseconds())/float64(b.N), "ns/op-1e3")
						b.ReportMetric(float64(spent[1].Nanoseconds())/float64(b.N), "ns/op-1e6")
						b.ReportMetric(float64(spent[1])/float64(spent[0]), "x-vs-1e3")
					})
				}
			}
		})
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
