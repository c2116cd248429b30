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

// parentOf is pid's parent pid, or 0 when pid is gone.
func parentOf(pid int) int {
	ppid, _, _ := parseStat(statFields(pid))
	return ppid
}

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

func TestReapMarkedKillsOrphansOutsideTheTree(t *testing.T) {
	t.Parallel()
	// The shell leaves an orphan in a session of its own and exits: the
	// orphan is in neither the shell's process group nor its tree, as a
	// gateway helper started during shutdown is once the gateway died.
	marker := "CLAWCONNECT_REALGATEWAY_DIR=" + t.TempDir()
	sh := exec.Command("sh", "-c", "setsid sleep 300 </dev/null >/dev/null 2>&1 &")
	sh.Env = append(os.Environ(), marker)
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := sh.Run(); err != nil {
		t.Fatal(err)
	}
	var orphans []proc
	poll.Within(30*time.Second, func() bool {
		orphans = marked(marker)
		return len(orphans) == 1 && strings.HasPrefix(cmdline(orphans[0].pid), "sleep")
	})
	if len(orphans) != 1 {
		t.Fatalf("found %d marked processes, want the one sleep", len(orphans))
	}
	if len(descendants(sh.Process.Pid)) != 0 {
		t.Fatal("the orphan is still in the shell's tree; the test proves nothing")
	}
	got := reapMarked(marker, 30*time.Second)
	if len(got) != 1 || got[0].proc != orphans[0] || !strings.HasPrefix(got[0].cmd, "sleep") {
		t.Errorf("reapMarked killed %+v, want the sleep %d", got, orphans[0].pid)
	}
	if !poll.Within(30*time.Second, func() bool { return dead(orphans[0].pid) }) {
		_ = syscall.Kill(orphans[0].pid, syscall.SIGKILL)
		t.Error("the orphan survived reapMarked")
	}
	if left := marked(marker); len(left) != 0 {
		t.Errorf("marked processes left: %v", left)
	}
}
