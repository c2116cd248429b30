package server

// Goroutines kept between calls. A fresh goroutine starts with a small
// stack and grows it by copying, doubling each time, and a call that
// descends into the store (SQLite's calls are deep) copied its stack five
// or six times: 7 % of ten mcp processes' CPU. A kept goroutine's next call
// finds its stack grown (the collector halves an idle goroutine's stack at
// most once per cycle).

import (
	"sync"
	"sync/atomic"
	"time"
)

// warmPool runs each job on an idle kept goroutine, or on a new one when
// none is idle. At most maxIdleKept goroutines wait for a job, each for the
// pool's idle time, so neither a burst of calls nor a quiet process keeps
// more. Use newWarmPool.
type warmPool struct {
	jobs    chan func() // unbuffered: a send succeeds only when a goroutine waits
	quit    chan struct{}
	once    sync.Once
	idle    time.Duration
	waiting atomic.Int32   // goroutines waiting for a job
	jobWG   sync.WaitGroup // the jobs not yet returned
	alive   sync.WaitGroup // the pool's goroutines
}

// maxIdleKept bounds the goroutines kept waiting: a client's calls overlap
// a few at a time, and each kept stack holds tens of KiB.
const maxIdleKept = 8

// newWarmPool returns a pool whose goroutines end after idle without a job.
func newWarmPool(idle time.Duration) *warmPool {
	return &warmPool{jobs: make(chan func()), quit: make(chan struct{}), idle: idle}
}

// Go runs job on a goroutine of the pool and returns at once.
func (p *warmPool) Go(job func()) {
	p.jobWG.Add(1)
	select {
	case p.jobs <- job:
	default:
		p.alive.Add(1)
		go p.keep(job)
	}
}

// Wait waits for every job passed to Go to return.
func (p *warmPool) Wait() { p.jobWG.Wait() }

// Close ends the pool's goroutines, each once its job has returned, and
// waits for them; a job may still be passed to Go after, and then runs on
// a goroutine that ends with it. Close must not be called from a job.
func (p *warmPool) Close() {
	p.once.Do(func() { close(p.quit) })
	p.alive.Wait()
}

// keep runs job, then waits for the next one until the idle time passes
// or the pool closes, unless maxIdleKept goroutines wait already.
func (p *warmPool) keep(job func()) {
	defer p.alive.Done()
	t := time.NewTimer(p.idle)
	defer t.Stop()
	for {
		job()
		p.jobWG.Done()
		if p.waiting.Add(1) > maxIdleKept {
			p.waiting.Add(-1)
			return
		}
		t.Reset(p.idle)
		select {
		case job = <-p.jobs:
			p.waiting.Add(-1)
		case <-t.C:
			p.waiting.Add(-1)
			return
		case <-p.quit:
			p.waiting.Add(-1)
			return
		}
	}
}
