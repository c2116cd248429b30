package realgateway

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
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

// marked lists the live processes whose environment holds marker (a
// "KEY=value" entry), with their start times. The gateway's helpers inherit
// its environment, so this finds those that left both its process group
// and its tree (their parent died and they were re-parented).
func marked(marker string) []proc {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var out []proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !hasEntry(env, marker) {
			continue
		}
		if _, start, ok := parseStat(statFields(pid)); ok {
			out = append(out, proc{pid, start})
		}
	}
	return out
}

// hasEntry reports whether the NUL-separated environ block holds entry.
func hasEntry(environ []byte, entry string) bool {
	for _, kv := range strings.Split(string(environ), "\x00") {
		if kv == entry {
			return true
		}
	}
	return false
}

// cmdline is pid's command line with spaces for NULs, for log lines.
func cmdline(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

// reaped is a process reapMarked killed, with its process group and
// command line when first seen.
type reaped struct {
	proc
	pgid int
	cmd  string
}

// reapMarked SIGKILLs every live process marked with marker until none is
// left (a dead one's environment reads empty) or grace has passed, and
// returns those it killed. It polls: another process's death sends no
// event to a non-parent.
func reapMarked(marker string, grace time.Duration) []reaped {
	var out []reaped
	seen := map[proc]bool{}
	deadline := time.Now().Add(grace)
	for {
		left := marked(marker)
		if len(left) == 0 || time.Now().After(deadline) {
			return out
		}
		for _, p := range left {
			if !seen[p] {
				seen[p] = true
				pgid := 0
				if f := statFields(p.pid); len(f) > 2 {
					pgid, _ = strconv.Atoi(f[2])
				}
				out = append(out, reaped{p, pgid, cmdline(p.pid)})
			}
			p.kill()
		}
		time.Sleep(20 * time.Millisecond)
	}
}
