package fswatch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func woke(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not wake", what)
	}
}

func quiet(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("%s woke on another file's change", what)
	default:
	}
}

func write(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestWatchFansOutByFile: subscribers of files in one directory share one
// watch of it, each wakes only on its own files, a directory subscriber
// on any change inside, and the instance closes with the last of them.
func TestWatchFansOutByFile(t *testing.T) {
	dir := t.TempDir()
	a, b, c := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")
	w := New(Options{})
	left := make(chan struct{}, 4)
	w.released = func() { left <- struct{}{} }
	ctxA, stopA := context.WithCancel(t.Context())
	chA, err := w.Watch(ctxA, []string{a})
	if err != nil {
		t.Fatal(err)
	}
	ctxB, stopB := context.WithCancel(t.Context())
	chB, err := w.Watch(ctxB, []string{b})
	if err != nil {
		t.Fatal(err)
	}
	ctxC, stopC := context.WithCancel(t.Context())
	chC, err := w.Watch(ctxC, []string{c})
	if err != nil {
		t.Fatal(err)
	}
	ctxD, stopD := context.WithCancel(t.Context())
	chD, err := w.Watch(ctxD, []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st != (Stats{Instances: 1, Dirs: 1}) {
		t.Fatalf("stats = %+v, want one instance watching one directory", st)
	}
	write(t, a)
	woke(t, chA, "a's subscriber")
	write(t, c) // events are fanned out in order: once c's wakes, a's was handled
	woke(t, chC, "c's subscriber")
	quiet(t, chB, "b's subscriber")
	woke(t, chD, "the directory's subscriber")
	for _, stop := range []context.CancelFunc{stopA, stopB, stopC, stopD} {
		stop()
	}
	for range 4 {
		woke(t, left, "a subscription's release")
	}
	if st := w.Stats(); st != (Stats{}) {
		t.Fatalf("stats after every subscriber left = %+v, want none", st)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestWatchLimitIsLoggedOnce: an exhausted inotify limit is ErrLimit,
// names the sysctl to raise, and is logged once however many followers
// hit it.
func TestWatchLimitIsLoggedOnce(t *testing.T) {
	var logs bytes.Buffer
	w := New(Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	for range 3 {
		err := w.limit(fmt.Errorf("watch files: %w", syscall.EMFILE))
		if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), InstancesSysctl) {
			t.Fatalf("err = %v, want ErrLimit naming %s", err, InstancesSysctl)
		}
	}
	if err := w.limit(fmt.Errorf("watch /x: %w", syscall.ENOSPC)); !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), WatchesSysctl) {
		t.Fatalf("err = %v, want ErrLimit naming %s", err, WatchesSysctl)
	}
	if err := w.limit(errors.New("watch /x: no such file")); errors.Is(err, ErrLimit) {
		t.Fatalf("a missing file is not a limit: %v", err)
	}
	if n := strings.Count(logs.String(), "limit="+InstancesSysctl); n != 1 {
		t.Fatalf("the instances limit was logged %d times, want once:\n%s", n, logs.String())
	}
	if n := strings.Count(logs.String(), "limit="+WatchesSysctl); n != 1 {
		t.Fatalf("the watches limit was logged %d times, want once:\n%s", n, logs.String())
	}
}

// TestProcessUsageCountsInstances: /proc shows each instance and watch.
func TestProcessUsageCountsInstances(t *testing.T) {
	before, err := ProcessUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	w := New(Options{})
	defer w.Close()
	d1, d2 := t.TempDir(), t.TempDir()
	if _, err := w.Watch(t.Context(), []string{filepath.Join(d1, "f"), filepath.Join(d2, "g"), filepath.Join(d2, "h")}); err != nil {
		t.Fatal(err)
	}
	after, err := ProcessUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if got := (Usage{after.Instances - before.Instances, after.Watches - before.Watches}); got != (Usage{1, 2}) {
		t.Fatalf("usage grew by %+v, want one instance with two watches", got)
	}
}

// TestWatchDirectoryRemovedAndMadeAgain: a watched directory that is
// removed wakes its subscribers, and a later Watch of a file in the
// directory made again hears that file (the kernel dropped the old watch).
func TestWatchDirectoryRemovedAndMadeAgain(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sessions")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	w := New(Options{})
	defer w.Close()
	old, err := w.Watch(t.Context(), []string{filepath.Join(dir, "a")})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	woke(t, old, "the subscriber of a removed directory")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	ch, err := w.Watch(t.Context(), []string{filepath.Join(dir, "b")})
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "b"))
	woke(t, ch, "the subscriber of the directory made again")
}
