package executor

import (
	"context"
	"testing"
	"testing/synctest"
)

// slowHealth answers Health only when its context ends.
type slowHealth struct{ stubAdapter }

func (slowHealth) Health(ctx context.Context) Health {
	<-ctx.Done()
	return Health{OK: true, Message: "too late"}
}

func TestCheckHealth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		got := CheckHealth(t.Context(), slowHealth{})
		if got.OK || got.Message != "health check timed out" {
			t.Errorf("CheckHealth(slow) = %+v, want a timeout verdict", got)
		}
		synctest.Wait() // the abandoned Health call has returned
	})
	if got := CheckHealth(t.Context(), stubAdapter{id: "x"}); !got.OK {
		t.Errorf("CheckHealth(fast) = %+v", got)
	}
}

func TestStartOptionsPrompt(t *testing.T) {
	if got := (StartOptions{Message: "m"}).Prompt(); got != "m" {
		t.Errorf("Prompt = %q", got)
	}
	if got := (StartOptions{Message: "m", Context: "c"}).Prompt(); got != "c\n\nm" {
		t.Errorf("Prompt = %q", got)
	}
}
