package sqlstore

import "testing"

func pending(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestTaskWatch(t *testing.T) {
	var w taskWatch
	t1, stop1 := w.watch("t1")
	t1b, stop1b := w.watch("t1")
	t2, stop2 := w.watch("t2")
	defer stop2()

	w.changed("t1")
	w.changed("t1") // coalesces with the first
	if !pending(t1) || !pending(t1b) {
		t.Fatal("a change of t1 did not reach both of its watchers")
	}
	if pending(t1) || pending(t2) {
		t.Fatal("two changes left two signals, or reached t2")
	}
	w.changed("") // changes may have been missed: wake everyone
	if !pending(t1) || !pending(t1b) || !pending(t2) {
		t.Fatal("a wake-all missed a watcher")
	}

	stop1()
	stop1() // idempotent
	w.changed("t1")
	if pending(t1) || !pending(t1b) {
		t.Fatal("a stopped watch was woken, or the other watch of t1 was dropped")
	}
	stop1b()
	if _, ok := w.subs["t1"]; ok {
		t.Fatal("the last stop of t1 left its entry behind")
	}
}

func TestRebind(t *testing.T) {
	q := `SELECT a FROM t WHERE x = ? AND y IN (?, ?)`
	if got := rebind(q, false); got != q {
		t.Errorf("rebind without dollar = %q", got)
	}
	for _, tt := range []struct{ in, want string }{
		{q, `SELECT a FROM t WHERE x = $1 AND y IN ($2, $3)`},
		{`SELECT '?' || ? FROM "q?" WHERE note = 'it''s ?' AND y = ?`, `SELECT '?' || $1 FROM "q?" WHERE note = 'it''s ?' AND y = $2`},
		{`SELECT 1`, `SELECT 1`},
	} {
		if got := rebind(tt.in, true); got != tt.want {
			t.Errorf("rebind(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
