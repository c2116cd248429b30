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

// exitedPID returns the pid of a process that has exited, or skips where
// nothing can be proven about one.
func exitedPID(t *testing.T) int64 {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("proving a process dead needs /proc")
	}
	exited := exec.Command(os.Args[0], "-test.run=^$")
	if err := exited.Run(); err != nil {
		t.Fatal(err)
	}
	return int64(exited.Process.Pid)
}

func TestDead(t *testing.T) {
	t.Parallel()
	pid := exitedPID(t)
	self := Self()
	tests := []struct {
		name string
		p    store.Process
		dead bool
	}{
		{"this process", self.Process("serve", 1), false},
		{"pid gone", store.Process{ID: "x", Host: self.Host, PID: pid, Start: self.Start}, true},
		{"pid reused by a later process", store.Process{ID: "x", Host: self.Host, PID: self.PID, Start: "another-boot:1"}, true},
		{"another host", store.Process{ID: "x", Host: "elsewhere/pid:[1]", PID: pid, Start: "b:1"}, false},
		{"no start identity", store.Process{ID: "x", Host: self.Host, PID: pid}, false},
	}
	for _, tc := range tests {
		if got := self.Dead(tc.p); got != tc.dead {
			t.Errorf("%s: Dead = %v, want %v", tc.name, got, tc.dead)
		}
	}
}

func TestEncodeDecode(t *testing.T) {
	t.Parallel()
	self := Self()
	got, err := Decode(self.Encode())
	if err != nil || got != self {
		t.Fatalf("Decode(Encode(%+v)) = %+v, %v", self, got, err)
	}
	for _, bad := range []string{"", "pid:12:start:34", "{", `{"id":"x"}`, `{"pid":3}`, `{"id":"x","pid":-1}`} {
		if _, err := Decode(bad); err == nil {
			t.Errorf("Decode(%q) accepted", bad)
		}
	}
}

// FuzzDecode: an owner read from a shared store decodes to an identity
// that encodes back to the same identity, or is an error; never a panic.
func FuzzDecode(f *testing.F) {
	f.Add(Self().Encode())
	f.Add("pid:12:start:34")
	f.Add(`{"id":"h/1/ab","host":"h/pid:[1]","pid":1,"start":"b:2"}`)
	f.Fuzz(func(t *testing.T, s string) {
		id, err := Decode(s)
		if err != nil {
			return
		}
		again, err := Decode(id.Encode())
		if err != nil || again != id {
			t.Fatalf("round trip of %q: %+v, %v", s, again, err)
		}
	})
}
