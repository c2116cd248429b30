package owner

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/clawconnect/clawconnect/internal/store"
)

func TestSelf(t *testing.T) {
	t.Parallel()
	a, b := Self(), Self()
	if a.ID == b.ID {
		t.Fatalf("two calls named the same owner %q", a.ID)
	}
	if a.PID != int64(os.Getpid()) || !strings.Contains(a.ID, "/") {
		t.Fatalf("identity %+v", a)
	}
	if runtime.GOOS == "linux" && (a.Host == "" || a.Start == "" || a.Start != b.Start) {
		t.Fatalf("no stable start identity on linux: %+v %+v", a, b)
	}
}

func TestDead(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("proving a process dead needs /proc")
	}
	self := Self()
	exited := exec.Command(os.Args[0], "-test.run=^$")
	if err := exited.Run(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		p    store.Process
		dead bool
	}{
		{"this process", self.Process("serve", 1), false},
		{"pid gone", store.Process{ID: "x", Host: self.Host, PID: int64(exited.Process.Pid), Start: self.Start}, true},
		{"pid reused by a later process", store.Process{ID: "x", Host: self.Host, PID: self.PID, Start: "another-boot:1"}, true},
		{"another host", store.Process{ID: "x", Host: "elsewhere/pid:[1]", PID: int64(exited.Process.Pid), Start: "b:1"}, false},
		{"no start identity", store.Process{ID: "x", Host: self.Host, PID: int64(exited.Process.Pid)}, false},
	}
	for _, tc := range tests {
		if got := self.Dead(tc.p); got != tc.dead {
			t.Errorf("%s: Dead = %v, want %v", tc.name, got, tc.dead)
		}
	}
}
