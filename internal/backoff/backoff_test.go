package backoff_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/backoff"
)

func TestDelayDoublesUpToTheCap(t *testing.T) {
	t.Parallel()
	p := backoff.Policy{Min: time.Second, Max: 30 * time.Second}
	var got []time.Duration
	for n := 0; n <= 7; n++ {
		got = append(got, p.Delay(n))
	}
	want := []time.Duration{time.Second, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second,
		16 * time.Second, 30 * time.Second, 30 * time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Delay(0..7) (-want +got):\n%s", diff)
	}
	if d := p.Delay(1000); d != 30*time.Second {
		t.Errorf("Delay(1000) = %v, want the cap (no overflow)", d)
	}
	if d := (backoff.Policy{}).Delay(5); d != 0 {
		t.Errorf("the zero Policy waits %v", d)
	}
	if d := (backoff.Policy{Min: time.Second, Max: time.Second / 2}).Delay(1); d != time.Second/2 {
		t.Errorf("a Max below Min: Delay(1) = %v, want the cap", d)
	}
}

func TestJitterSpreadsOverTheUpperHalf(t *testing.T) {
	t.Parallel()
	d := 10 * time.Second
	var below, above int
	for range 1000 {
		j := backoff.Jitter(d)
		if j < d/2 || j > d {
			t.Fatalf("Jitter(%v) = %v, want within [%v, %v]", d, j, d/2, d)
		}
		if j < 3*d/4 {
			below++
		} else {
			above++
		}
	}
	if below == 0 || above == 0 {
		t.Errorf("1000 draws of Jitter(%v) all fell on one side of %v: not spread", d, 3*d/4)
	}
	for _, tiny := range []time.Duration{0, 1} {
		if got := backoff.Jitter(tiny); got != tiny {
			t.Errorf("Jitter(%v) = %v", tiny, got)
		}
	}
}
