package realgateway

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// proc identifies a process across PID reuse: its pid and its start time
// (clock ticks since boot, /proc/<pid>/stat field 22).
type proc struct {
	pid   int
	start uint64
}

// statFields returns the fields of /proc/<pid>/stat after the command name
// (field 3 onwards), or nil.
func statFields(pid int) []string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}

// parseStat extracts the parent pid and start time from stat fields.
func parseStat(f []string) (ppid int, start uint64, ok bool) {
	if len(f) < 20 {
		return 0, 0, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	start, err2 := strconv.ParseUint(f[19], 10, 64)
	return ppid, start, err1 == nil && err2 == nil
}

// descendants lists every live descendant of root. The gateway puts some
// helpers (its spawn broker) in process groups of their own, so killing its
// group alone can miss them.
func descendants(root int) []proc {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]proc{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, start, ok := parseStat(statFields(pid)); ok {
			children[ppid] = append(children[ppid], proc{pid, start})
		}
	}
	var out []proc
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
	}
	return out
}

// kill sends SIGKILL to p if it is still the same process.
func (p proc) kill() {
	if _, start, ok := parseStat(statFields(p.pid)); ok && start == p.start {
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
}
