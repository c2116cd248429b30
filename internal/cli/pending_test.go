package cli

import (
	"context"
	"errors"
	"testing"

	"github.com/clawconnect/clawconnect/server"
	"github.com/clawconnect/clawconnect/server/servertest"
)

func TestPendingTasks(t *testing.T) {
	t.Run("open error reaches every call", func(t *testing.T) {
		boom := errors.New("open bridge: disk on fire")
		p := newPending(t.Context(), func(context.Context) (*backend, error) { return nil, boom })
		defer p.close()
		if _, err := p.Run(t.Context(), server.RunRequest{Agent: "a", Task: "x"}); !errors.Is(err, boom) {
			t.Errorf("Run err = %v", err)
		}
		if _, err := p.ListSessions(t.Context()); !errors.Is(err, boom) {
			t.Errorf("ListSessions err = %v", err)
		}
	})
	t.Run("calls wait for the backend", func(t *testing.T) {
		release := make(chan struct{})
		fake := servertest.New()
		fake.Instant = true
		closed := make(chan struct{})
		p := newPending(t.Context(), func(context.Context) (*backend, error) {
			<-release
			return &backend{tasks: fake, close: func() { close(closed) }}, nil
		})
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := p.ListTasks(ctx, ""); !errors.Is(err, context.Canceled) {
			t.Errorf("ListTasks before open with a cancelled ctx = %v", err)
		}
		close(release)
		res, err := p.Run(t.Context(), server.RunRequest{Agent: "a", Task: "x"})
		if err != nil || res.JobID == "" {
			t.Fatalf("Run = %+v, %v", res, err)
		}
		if snap, err := p.Check(t.Context(), server.CheckRequest{JobID: res.JobID, Mode: server.ModeWait, Wait: 1}, nil); err != nil || !snap.IsTerminal {
			t.Errorf("Check = %+v, %v", snap, err)
		}
		p.close()
		p.close()
		<-closed
	})
	t.Run("nothing opens before Start", func(t *testing.T) {
		opened := make(chan struct{})
		p := newPending(t.Context(), func(context.Context) (*backend, error) {
			close(opened)
			return &backend{tasks: servertest.New(), close: func() {}}, nil
		})
		defer p.close()
		select {
		case <-opened:
			t.Fatal("the backend opened before Start")
		default:
		}
		p.Start()
		p.Start()
		<-opened
		if _, err := p.ListSessions(t.Context()); err != nil {
			t.Errorf("ListSessions after Start = %v", err)
		}
	})
	t.Run("close before start never opens", func(t *testing.T) {
		p := newPending(t.Context(), func(context.Context) (*backend, error) {
			t.Error("opened after close")
			return nil, errors.New("unreachable")
		})
		p.close()
		p.Start()
		if _, err := p.ListTasks(t.Context(), ""); !errors.Is(err, errPendingClosed) {
			t.Errorf("ListTasks after close = %v, want errPendingClosed", err)
		}
		p.close()
	})
}
