package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
)

// NewTaskFeed checks store.NewTaskFeed across two handles on one database
// (two processes, or two replicas): a task created through writer wakes a
// watcher of new tasks on reader, and a change of an existing task does
// not. Backends call it from their own tests, since only they can open a
// second handle. Announcements reach a reader in order, so once a later
// one was heard, an earlier misrouted one would already be pending.
func NewTaskFeed(t *testing.T, writer, reader store.Store) {
	t.Helper()
	ctx := t.Context()
	created, stopWatch := reader.WatchNewTasks()
	stop := sync.OnceFunc(stopWatch)
	defer stop()
	if created == nil {
		t.Fatal("WatchNewTasks returned a nil channel on a store with a change feed")
	}
	finish := func(t *testing.T, task *store.Task) { t.Helper(); finishHeard(t, writer, reader, task) }
	old := Task("feed-old", "main", "feed-k1", 1)
	if err := writer.CreateTask(ctx, old); err != nil {
		t.Fatal(err)
	}
	// The listener's start (which wakes every watcher once) and the
	// creation above are heard before the marker's outcome.
	marker := Task("feed-marker", "main", "feed-k2", 2)
	if err := writer.CreateTask(ctx, marker); err != nil {
		t.Fatal(err)
	}
	finish(t, marker)
	await(t, created, "a task created after the watch began")
	select {
	case <-created:
	default:
	}

	// An existing task's outcome is not a new task.
	finish(t, old)
	select {
	case <-created:
		t.Fatal("a task's outcome woke the watcher of new tasks")
	default:
	}

	// A new task is.
	fresh := Task("feed-new", "main", "feed-k1", 3)
	if err := writer.CreateTask(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	await(t, created, "a new task")

	// After stop, nothing more is delivered (the channel is left alone).
	stop()
	if err := writer.CreateTask(ctx, Task("feed-after", "main", "feed-k3", 4)); err != nil {
		t.Fatal(err)
	}
	finish(t, fresh)
	select {
	case <-created:
		t.Fatal("a stopped watch was woken")
	default:
	}
}

// await waits (bounded) for a value on ch.
func await(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s was not announced", what)
	}
}

// TerminalWorkFeed checks store.TerminalWorkFeed across two handles on one
// database (two processes, or two hosts): an announcement through one
// wakes the watchers of terminal work on the other, and a task's change
// does not. Backends call it from their own tests.
func TerminalWorkFeed(t *testing.T, writer, reader store.Store) {
	t.Helper()
	ctx := t.Context()
	work, stop := reader.WatchTerminalWork()
	defer stop()
	if work == nil {
		t.Fatal("WatchTerminalWork returned a nil channel on a store with a change feed")
	}
	// A task's outcome, once heard, proves the listener runs and that its
	// start-up wake-up (every watcher once) is already pending: drain it.
	task := Task("work-marker", "main", "work-k1", 1)
	if err := writer.CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	finishHeard(t, writer, reader, task)
	select {
	case <-work:
	default:
	}
	select {
	case <-work:
		t.Fatal("a task's change woke the watcher of terminal work")
	default:
	}
	writer.AnnounceTerminalWork(ctx)
	await(t, work, "terminal work announced by the other handle")
}

// finishHeard writes task's outcome through writer and waits until the
// change feed of the other handle (reader) heard it.
func finishHeard(t *testing.T, writer, reader store.Store, task *store.Task) {
	t.Helper()
	ch, stop := reader.WatchTask(task.ID)
	defer stop()
	task.Status = store.StatusCompleted
	if err := writer.UpdateTask(t.Context(), task); err != nil {
		t.Fatal(err)
	}
	await(t, ch, "the outcome of "+task.ID)
}
