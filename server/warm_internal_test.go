package server

import (
	"bytes"
	"runtime"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// goroutineID is the id the runtime prints for the calling goroutine.
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	id, _, _ := bytes.Cut(bytes.TrimPrefix(buf, []byte("goroutine ")), []byte(" "))
	return string(id)
}

// on runs job on p and returns the id of the goroutine it ran on, once
// it has returned and the goroutine is idle again.
func runOn(p *warmPool) string {
	ids := make(chan string, 1)
	p.Go(func() { ids <- goroutineID() })
	p.Wait()
	synctest.Wait() // the goroutine is back waiting for a job
	return <-ids
}

func TestWarmPoolKeptGoroutineRunsTheNextJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newWarmPool(time.Minute)
		defer p.Close()
		first := runOn(p)
		time.Sleep(59 * time.Second)
		if next := runOn(p); next != first {
			t.Errorf("the second job ran on goroutine %s, want the kept %s", next, first)
		}
	})
}

func TestWarmPoolIdleGoroutineEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newWarmPool(time.Minute)
		defer p.Close()
		first := runOn(p)
		time.Sleep(time.Minute)
		synctest.Wait()
		if next := runOn(p); next == first {
			t.Errorf("the job after a minute idle ran on the kept goroutine %s, want a new one", first)
		}
	})
}

func TestWarmPoolJobsAtOnceEachRunAndWaitWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newWarmPool(time.Minute)
		defer p.Close()
		release := make(chan struct{})
		var ran atomic.Int32
		for range 20 {
			p.Go(func() { <-release; ran.Add(1) }) // all twenty busy at once
		}
		synctest.Wait()
		if n := ran.Load(); n != 0 {
			t.Fatalf("%d jobs returned before their release", n)
		}
		close(release)
		p.Wait()
		if n := ran.Load(); n != 20 {
			t.Errorf("Wait returned after %d of 20 jobs", n)
		}
	})
}

func TestWarmPoolKeepsAFewAfterABurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newWarmPool(time.Minute)
		defer p.Close()
		release := make(chan struct{})
		for range 20 {
			p.Go(func() { <-release })
		}
		synctest.Wait()
		close(release)
		p.Wait()
		synctest.Wait() // each goroutine either waits for a job or has ended
		if n := p.waiting.Load(); n != maxIdleKept {
			t.Errorf("%d goroutines kept after a burst of 20 calls, want %d", n, maxIdleKept)
		}
	})
}

func TestWarmPoolCloseEndsTheKeptGoroutines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newWarmPool(time.Hour)
		release := make(chan struct{})
		for range 3 {
			p.Go(func() { <-release })
		}
		close(release)
		p.Wait()
		start := time.Now()
		p.Close()
		// In the bubble, a Close that waited for the idle hour to end the
		// goroutines would return an hour later.
		if d := time.Since(start); d != 0 {
			t.Fatalf("Close returned after %v: it waited for the idle time, not for the goroutines to end", d)
		}
		ran := false
		p.Go(func() { ran = true }) // after Close: runs, and its goroutine ends
		p.Wait()
		if !ran {
			t.Error("a job passed after Close did not run")
		}
	})
}
