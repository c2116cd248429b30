package storetest

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/store"
)

func testListSessions(t *testing.T, s store.Store) {
	ctx := t.Context()
	var want []string
	for i := range 7 {
		key := fmt.Sprintf("s%d", i)
		task := Task("t"+key, "main", key, int64(100+i))
		if err := s.CreateTask(ctx, task); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			finish(t, s, task, store.StatusCompleted, int64(200+i))
		}
		want = append([]string{key}, want...)
	}
	if err := s.CreateTask(ctx, Task("other", "other-agent", "sX", 500)); err != nil {
		t.Fatal(err)
	}
	var got []string
	cursor := ""
	pages := 0
	for {
		rows, next, err := s.ListSessions(ctx, "main", store.Page{Limit: 3, Before: cursor})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, r := range rows {
			if r.Task == nil || r.Task.ID != "t"+r.Session.SessionKey {
				t.Fatalf("row %s has latest task %+v", r.Session.SessionKey, r.Task)
			}
			got = append(got, r.Session.SessionKey)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if diff := cmp.Diff(want, got); diff != "" || pages != 3 {
		t.Fatalf("sessions over %d pages (-want +got):\n%s", pages, diff)
	}
	if _, _, err := s.ListSessions(ctx, "main", store.Page{Before: "garbage"}); err == nil {
		t.Fatal("a malformed cursor was accepted")
	}
}

func testSessionTasks(t *testing.T, s store.Store) {
	ctx := t.Context()
	var want []string
	for i := range 5 {
		task := Task(fmt.Sprintf("t%d", i), "main", "k", int64(10+i))
		if err := s.CreateTask(ctx, task); err != nil {
			t.Fatal(err)
		}
		finish(t, s, task, store.StatusCompleted, int64(10+i))
		want = append([]string{task.ID}, want...)
	}
	var got []string
	cursor := ""
	for {
		tasks, next, err := s.SessionTasks(ctx, "main", "k", store.Page{Limit: 2, Before: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range tasks {
			got = append(got, task.ID)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("session tasks (-want +got):\n%s", diff)
	}
}

func ids(ts []*store.Task) []string {
	out := []string{}
	for _, t := range ts {
		out = append(out, t.ID)
	}
	return out
}

// testListByPrincipal: a principal's page holds its own sessions however
// many newer sessions another principal has (filtered in the query, not
// after the page).
func testListByPrincipal(t *testing.T, s store.Store) {
	ctx := t.Context()
	newTask := func(id, principal string, at int64) {
		task := Task(id, "main", "agent:main:"+id, at)
		task.Principal = principal
		if err := s.CreateTask(ctx, task); err != nil {
			t.Fatal(err)
		}
	}
	newTask("bob-1", "user:bob", 1)
	for i := range 5 {
		newTask(fmt.Sprintf("alice-%d", i), "user:alice", int64(10+i))
	}
	bob := "user:bob"
	rows, _, err := s.ListSessions(ctx, "main", store.Page{Limit: 3, Principal: &bob})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Session.SessionKey != "agent:main:bob-1" {
		t.Fatalf("bob's page = %+v, want his one session", rows)
	}
	all, _, err := s.ListSessions(ctx, "main", store.Page{Limit: 3})
	if err != nil || len(all) != 3 || all[0].Session.SessionKey != "agent:main:alice-4" {
		t.Fatalf("unfiltered page = %+v, %v; want alice's three newest", all, err)
	}
}
