package owner

import (
	"context"
	"slices"
	"testing"

	"github.com/clawconnect/clawconnect/internal/store"
)

type fakeRegistry struct {
	procs    []store.Process
	released []string
}

func (f *fakeRegistry) Processes(context.Context) ([]store.Process, error) {
	return slices.Clone(f.procs), nil
}
func (f *fakeRegistry) ReleaseLeases(_ context.Context, owner string, _ []string) (int, error) {
	f.released = append(f.released, owner)
	return 1, nil
}
func (f *fakeRegistry) RemoveProcess(_ context.Context, id string) error {
	f.procs = slices.DeleteFunc(f.procs, func(p store.Process) bool { return p.ID == id })
	return nil
}

// TestReapDead: a provably dead process of this host and a long-silent
// one of another host are reaped; this process and a beating process of
// another host are not.
func TestReapDead(t *testing.T) {
	t.Parallel()
	pid := exitedPID(t)
	self := Self()
	reg := &fakeRegistry{procs: []store.Process{
		self.Process("serve", 100),
		{ID: "dead-here", Host: self.Host, PID: pid, Start: self.Start, HeartbeatAt: 100},
		{ID: "silent-elsewhere", Host: "elsewhere/pid:[1]", PID: 7, Start: "b:1", HeartbeatAt: 10},
		{ID: "beating-elsewhere", Host: "elsewhere/pid:[1]", PID: 8, Start: "b:2", HeartbeatAt: 100},
	}}
	if _, n := self.ReapDead(t.Context(), reg, 50, nil); n != 2 {
		t.Fatalf("reaped %d, want 2", n)
	}
	if !slices.Equal(reg.released, []string{"dead-here", "silent-elsewhere"}) {
		t.Fatalf("released %v", reg.released)
	}
	var left []string
	for _, p := range reg.procs {
		left = append(left, p.ID)
	}
	if !slices.Equal(left, []string{self.ID, "beating-elsewhere"}) {
		t.Fatalf("registry left %v", left)
	}
}
