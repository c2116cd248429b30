package cli

import (
	"bytes"
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
	t.Run("the open starts after the first write, not before", func(t *testing.T) {
		opened := make(chan struct{})
		p := newPending(t.Context(), func(context.Context) (*backend, error) {
			close(opened)
			return &backend{tasks: servertest.New(), close: func() {}}, nil
		})
		defer p.close()
		select {
		case <-opened:
			t.Fatal("the backend opened before anything was written")
		default:
		}
		var out bytes.Buffer
		w := &startAfterWrite{w: &out, start: p.start}
		if _, err := w.Write([]byte("{\"id\":1}\n")); err != nil {
			t.Fatal(err)
		}
		<-opened
		if _, err := w.Write([]byte("{\"id\":2}\n")); err != nil {
			t.Fatal(err)
		}
		if got, want := out.String(), "{\"id\":1}\n{\"id\":2}\n"; got != want {
			t.Errorf("written %q, want %q", got, want)
		}
	})
	t.Run("close before start never opens", func(t *testing.T) {
		p := newPending(t.Context(), func(context.Context) (*backend, error) {
			t.Error("opened after close")
			return nil, errors.New("unreachable")
		})
		p.close()
		p.start()
		if _, err := p.ListTasks(t.Context(), ""); !errors.Is(err, errPendingClosed) {
			t.Errorf("ListTasks after close = %v, want errPendingClosed", err)
		}
		p.close()
	})
}
