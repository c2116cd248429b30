package server

// Goroutines kept between calls. A fresh goroutine starts with a small
// stack and grows it by copying, doubling each time, and a call that
// descends into the store (SQLite's calls are deep) copied its stack five
// or six times: 7 % of ten mcp processes' CPU. A kept goroutine's next call
// finds its stack grown (the collector halves an idle goroutine's stack at
// most once per cycle).

import (
	"sync"
	"time"
)

// warmPool runs each job on an idle kept goroutine, or on a new one when
// none is idle. A goroutine left idle for the pool's idle time ends, so a
// quiet process keeps none. Use newWarmPool.
type warmPool struct {
	jobs  chan func() // unbuffered: a send succeeds only when a goroutine waits
	quit  chan struct{}
	once  sync.Once
	idle  time.Duration
	jobWG sync.WaitGroup // the jobs not yet returned
	alive sync.WaitGroup // the pool's goroutines
}

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
// or the pool closes.
func (p *warmPool) keep(job func()) {
	defer p.alive.Done()
	t := time.NewTimer(p.idle)
	defer t.Stop()
	for {
		job()
		p.jobWG.Done()
		t.Reset(p.idle)
		select {
		case job = <-p.jobs:
		case <-t.C:
			return
		case <-p.quit:
			return
		}
	}
}
