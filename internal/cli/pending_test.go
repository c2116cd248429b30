package cli

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/clawconnect/clawconnect/server"
	"github.com/clawconnect/clawconnect/server/servertest"
)

func TestPendingTasks(t *testing.T) {
	t.Run("open error reaches every call, without its detail, and the next call retries", func(t *testing.T) {
		boom := errors.New("open bridge: failed to connect to `user=postgres database=clawconnect`: 127.0.0.1:35739")
		fails := 2
		p := newPending(t.Context(), func(context.Context) (*backend, error) {
			if fails > 0 { // calls are sequential here: no race
				fails--
				return nil, boom
			}
			return &backend{tasks: servertest.New(), close: func() {}}, nil
		})
		defer p.close()
		_, err := p.Run(t.Context(), server.RunRequest{Agent: "a", Task: "x"})
		if !errors.Is(err, boom) || !errors.Is(err, errServiceUnavailable) || strings.Contains(err.Error(), "user=") || strings.Contains(err.Error(), "127.0.0.1") {
			t.Errorf("Run err = %v, want the service unavailable without the database's detail", err)
		}
		if _, err := p.ListSessions(t.Context(), nil); !errors.Is(err, boom) {
			t.Errorf("ListSessions err = %v", err)
		}
		if _, err := p.ListSessions(t.Context(), nil); err != nil {
			t.Errorf("ListSessions once the store is back = %v", err)
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
		if _, err := p.ListTasks(ctx, "", nil); !errors.Is(err, context.Canceled) {
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
		if _, err := p.ListSessions(t.Context(), nil); err != nil {
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
		if _, err := p.ListTasks(t.Context(), "", nil); !errors.Is(err, errPendingClosed) {
			t.Errorf("ListTasks after close = %v, want errPendingClosed", err)
		}
		p.close()
	})
}
