package executor

import (
	"sync"
	"testing"
)

func TestRunHandleLateBinding(t *testing.T) {
	h := NewRunHandle("codex", "k")
	if _, ok := h.RunID(); ok {
		t.Fatal("a new handle has a run id")
	}
	if got := h.RunIDOr("k"); got != "k" {
		t.Errorf("RunIDOr = %q, want fallback", got)
	}
	var wg sync.WaitGroup
	wins := make(chan string, 8)
	for _, id := range []string{"a", "b", "c", "d"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if h.BindRunIDOnce(id) {
				wins <- id
			}
			_, _ = h.RunID()
		}()
	}
	wg.Wait()
	close(wins)
	var won []string
	for id := range wins {
		won = append(won, id)
	}
	if got, _ := h.RunID(); len(won) != 1 || got != won[0] {
		t.Errorf("BindRunIDOnce winners %v, bound %q", won, got)
	}
	h.BindRunID("z")
	if got, _ := h.RunID(); got != "z" {
		t.Errorf("after rebind RunID = %q, want z", got)
	}
}
