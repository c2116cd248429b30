package realgateway

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/testbed/poll"
)

// dead reports whether pid is gone or a zombie.
func dead(pid int) bool {
	f := statFields(pid)
	return f == nil || f[0] == "Z"
}

func TestDescendantsFindsHelpersOutsideTheGroup(t *testing.T) {
	// The shell's child leaves the process group (setsid), as the
	// gateway's spawn broker does.
	sh := exec.Command("sh", "-c", "setsid sleep 300 & wait")
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	var helpers []proc
	poll.Within(30*time.Second, func() bool {
		helpers = helpers[:0]
		for _, p := range descendants(sh.Process.Pid) {
			if cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/cmdline"); strings.HasPrefix(string(cmd), "sleep") {
				helpers = append(helpers, p)
			}
		}
		return len(helpers) > 0
	})
	if len(helpers) != 1 {
		_ = syscall.Kill(-sh.Process.Pid, syscall.SIGKILL)
		_ = sh.Wait()
		t.Fatalf("found %d sleep helpers, want 1", len(helpers))
	}
	_ = syscall.Kill(-sh.Process.Pid, syscall.SIGKILL) // misses the helper
	_ = sh.Wait()
	if dead(helpers[0].pid) {
		t.Fatal("the helper died with the group; the test proves nothing")
	}
	helpers[0].kill()
	if !poll.Within(30*time.Second, func() bool { return dead(helpers[0].pid) }) {
		t.Error("the helper survived kill")
	}
}

func TestProcKillSparesReusedPID(t *testing.T) {
	self := proc{pid: os.Getpid(), start: 1} // same pid, different start time
	self.kill()                              // must not kill the test binary
	if f := statFields(os.Getpid()); f == nil {
		t.Fatal("cannot read our own stat")
	}
}
