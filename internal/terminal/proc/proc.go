// Package proc reads processes from Linux /proc directly, without spawning
// ps or lsof: a process's parent, start time, argv, cwd and executable, a
// complete snapshot of all processes with their ancestry, the files a
// process holds open, and incarnation fencing (pid + start time), so that
// a recycled pid is never taken for the process that had it before.
//
// A snapshot is complete or an error: an empty or partial table is never
// returned, so callers may read "not in the table" as "not running".
package proc

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// ErrNoProcess means the process does not exist (or is a zombie, whose
// argv, cwd and files are gone).
var ErrNoProcess = errors.New("proc: no such process")

// ErrMalformed reports /proc content that does not parse; the caller gets
// no partial result.
var ErrMalformed = errors.New("proc: malformed /proc entry")

// DefaultRoot is where FS reads by default.
const DefaultRoot = "/proc"

// Process is what Read returns about one process.
type Process struct {
	PID  int
	PPID int
	// State is the one-letter state of /proc/<pid>/stat (R, S, D, Z, …).
	State byte
	// StartTicks is the start time in clock ticks after boot (field 22 of
	// /proc/<pid>/stat): with PID it fences one incarnation.
	StartTicks uint64
	// Comm is the kernel's short command name (up to 15 bytes).
	Comm string
	// Argv is /proc/<pid>/cmdline split on NUL; empty for kernel threads.
	Argv []string
	// Cwd and Exe are the targets of /proc/<pid>/cwd and /exe. Snapshot
	// leaves them empty (Read fills them); they are empty too when the
	// caller may not read them (another user's process).
	Cwd string
	Exe string
}

// Incarnation is the process's fence, "pid:<pid>:start:<ticks>".
func (p Process) Incarnation() string { return Incarnation(p.PID, p.StartTicks) }

// Incarnation formats the fence of one process incarnation:
// "pid:<pid>:start:<ticks>".
func Incarnation(pid int, startTicks uint64) string {
	return "pid:" + strconv.Itoa(pid) + ":start:" + strconv.FormatUint(startTicks, 10)
}

// ParseIncarnation parses what Incarnation formats.
func ParseIncarnation(s string) (pid int, startTicks uint64, err error) {
	rest, ok := strings.CutPrefix(s, "pid:")
	p, t, ok2 := strings.Cut(rest, ":start:")
	if !ok || !ok2 {
		return 0, 0, fmt.Errorf("parse incarnation %q: want pid:<pid>:start:<ticks>", s)
	}
	if pid, err = strconv.Atoi(p); err != nil || pid <= 0 || strings.HasPrefix(p, "+") {
		return 0, 0, fmt.Errorf("parse incarnation %q: pid is not a positive integer", s)
	}
	if startTicks, err = strconv.ParseUint(t, 10, 64); err != nil {
		return 0, 0, fmt.Errorf("parse incarnation %q: start ticks are not an integer", s)
	}
	return pid, startTicks, nil
}

// FS reads a /proc tree. The zero value reads DefaultRoot; tests point
// Root at a fake tree. It holds no state and is safe for concurrent use.
type FS struct {
	// Root is the /proc mount; default DefaultRoot.
	Root string
}

func (f FS) root() string {
	if f.Root == "" {
		return DefaultRoot
	}
	return f.Root
}

func (f FS) path(pid int, name string) string {
	return f.root() + "/" + strconv.Itoa(pid) + "/" + name
}

// ReadStat reads only /proc/<pid>/stat (pid, ppid, state, start ticks,
// comm): the cheapest read, for walking ancestry. A missing process is
// ErrNoProcess; a zombie is returned with State 'Z'.
func (f FS) ReadStat(pid int) (Process, error) { return f.readStat(pid) }

// Read reads one process from the default /proc.
func Read(pid int) (Process, error) { return FS{}.Read(pid) }

// Read reads one process: stat, cmdline, cwd and exe. A missing or
// zombie process is ErrNoProcess. Cwd and Exe are left empty when the
// caller lacks permission to read them.
func (f FS) Read(pid int) (Process, error) {
	p, err := f.readStat(pid)
	if err != nil {
		return Process{}, err
	}
	if p.State == 'Z' || p.State == 'X' {
		return Process{}, fmt.Errorf("read process %d: %w (zombie)", pid, ErrNoProcess)
	}
	if p.Argv, err = f.readArgv(pid); err != nil {
		return Process{}, err
	}
	if p.Cwd, err = f.link(pid, "cwd"); err != nil {
		return Process{}, err
	}
	if p.Exe, err = f.link(pid, "exe"); err != nil {
		return Process{}, err
	}
	// The pid may have been recycled while we read; the start time fences it.
	again, err := f.readStat(pid)
	if err != nil {
		return Process{}, err
	}
	if again.StartTicks != p.StartTicks {
		return Process{}, fmt.Errorf("read process %d: %w (it exited while being read)", pid, ErrNoProcess)
	}
	return p, nil
}

// link reads a /proc/<pid>/ symlink; permission errors give "", a missing
// process ErrNoProcess.
func (f FS) link(pid int, name string) (string, error) {
	s, err := os.Readlink(f.path(pid, name))
	switch {
	case err == nil:
		return strings.TrimSuffix(s, " (deleted)"), nil
	case errors.Is(err, fs.ErrPermission):
		return "", nil
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ESRCH):
		return "", fmt.Errorf("read process %d %s: %w", pid, name, ErrNoProcess)
	default:
		return "", fmt.Errorf("read process %d %s: %w", pid, name, err)
	}
}

func (f FS) readStat(pid int) (Process, error) {
	var buf [512]byte
	b, err := readSmall(f.path(pid, "stat"), buf[:0])
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			return Process{}, fmt.Errorf("read process %d: %w", pid, ErrNoProcess)
		}
		return Process{}, fmt.Errorf("read process %d: %w", pid, err)
	}
	p, err := ParseStat(b)
	if err != nil {
		return Process{}, fmt.Errorf("read process %d: %w", pid, err)
	}
	if p.PID != pid {
		return Process{}, fmt.Errorf("read process %d: %w: stat names pid %d", pid, ErrMalformed, p.PID)
	}
	return p, nil
}

func (f FS) readArgv(pid int) ([]string, error) {
	var buf [1024]byte
	b, err := readSmall(f.path(pid, "cmdline"), buf[:0])
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			return nil, fmt.Errorf("read process %d cmdline: %w", pid, ErrNoProcess)
		}
		return nil, fmt.Errorf("read process %d cmdline: %w", pid, err)
	}
	return ParseCmdline(b), nil
}

// readSmall reads a whole /proc file into buf (grown as needed) with
// open, read until EOF, close: /proc files report size 0, so the stat
// os.ReadFile makes first buys nothing.
func readSmall(path string, buf []byte) ([]byte, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := syscall.Read(fd, buf[len(buf):cap(buf)])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// ParseStat parses the content of /proc/<pid>/stat into PID, Comm, State,
// PPID and StartTicks. The command name is whatever lies between the
// first "(" and the last ")", so a name holding spaces or parentheses
// does not shift the fields.
func ParseStat(b []byte) (Process, error) {
	open := bytes.IndexByte(b, '(')
	closing := bytes.LastIndexByte(b, ')')
	if open < 1 || closing < open {
		return Process{}, fmt.Errorf("%w: stat has no (comm): %q", ErrMalformed, clip(b))
	}
	var p Process
	var err error
	if p.PID, err = strconv.Atoi(string(bytes.TrimSpace(b[:open]))); err != nil || p.PID <= 0 {
		return Process{}, fmt.Errorf("%w: stat pid: %q", ErrMalformed, clip(b))
	}
	p.Comm = string(b[open+1 : closing])
	// Fields after the comm start with field 3 (state).
	rest := strings.Fields(string(b[closing+1:]))
	if len(rest) < 20 {
		return Process{}, fmt.Errorf("%w: stat has %d fields after comm, want at least 20: %q", ErrMalformed, len(rest), clip(b))
	}
	if len(rest[0]) != 1 {
		return Process{}, fmt.Errorf("%w: stat state %q", ErrMalformed, rest[0])
	}
	p.State = rest[0][0]
	if p.PPID, err = strconv.Atoi(rest[1]); err != nil || p.PPID < 0 {
		return Process{}, fmt.Errorf("%w: stat ppid %q", ErrMalformed, rest[1])
	}
	if p.StartTicks, err = strconv.ParseUint(rest[19], 10, 64); err != nil {
		return Process{}, fmt.Errorf("%w: stat start time %q", ErrMalformed, rest[19])
	}
	return p, nil
}

// ParseCmdline splits /proc/<pid>/cmdline on NUL. A trailing NUL ends the
// last argument; a process that rewrote its command line with spaces
// comes back as one argument.
func ParseCmdline(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	b = bytes.TrimSuffix(b, []byte{0})
	parts := strings.Split(string(b), "\x00")
	return parts
}

// Alive reports whether pid is still the incarnation that started at
// startTicks (and not a zombie). A missing process is (false, nil); an
// error means /proc could not be read, and says nothing about liveness.
func Alive(pid int, startTicks uint64) (bool, error) { return FS{}.Alive(pid, startTicks) }

// Alive is the package-level Alive on f.
func (f FS) Alive(pid int, startTicks uint64) (bool, error) {
	p, err := f.readStat(pid)
	if errors.Is(err, ErrNoProcess) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return p.StartTicks == startTicks && p.State != 'Z' && p.State != 'X', nil
}

// Table is a complete snapshot of the processes (stat and argv; no cwd or
// exe). It is immutable and safe for concurrent reads.
type Table struct {
	procs    map[int]Process
	children map[int][]int
}

// Snapshot reads every process from the default /proc.
func Snapshot() (*Table, error) { return FS{}.Snapshot() }

// Snapshot reads every process under f. Processes that exit while it
// reads are left out (they are gone); any other read or parse failure
// is an error, and so is a table that does not hold the calling process
// (a /proc mounted with hidepid, or not Linux): no partial table is
// returned.
func (f FS) Snapshot() (*Table, error) { return f.snapshot(nil) }

// SnapshotUnder is Snapshot that reads argv only for the processes in
// roots and their descendants; every other process is in the table (so
// ancestry is complete) with a nil Argv. Reading argv is about half the
// cost of a process, so a caller that only classifies the processes of a
// few tmux panes saves that for the rest of the machine.
func (f FS) SnapshotUnder(roots []int) (*Table, error) {
	if roots == nil {
		roots = []int{}
	}
	return f.snapshot(roots)
}

// snapshot reads every process's stat, then argv for all (roots nil) or
// for roots and their descendants.
func (f FS) snapshot(roots []int) (*Table, error) {
	ents, err := os.ReadDir(f.root())
	if err != nil {
		return nil, fmt.Errorf("snapshot processes: %w", err)
	}
	t := &Table{procs: make(map[int]Process, len(ents)), children: map[int][]int{}}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		p, err := f.readStat(pid)
		if err == nil && roots == nil {
			p.Argv, err = f.readArgv(pid)
		}
		if errors.Is(err, ErrNoProcess) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("snapshot processes: %w", err)
		}
		t.procs[pid] = p
	}
	if f.root() == DefaultRoot {
		if _, ok := t.procs[os.Getpid()]; !ok {
			return nil, fmt.Errorf("snapshot processes: %w: the calling process %d is not in %s (hidepid?)", ErrMalformed, os.Getpid(), f.root())
		}
	}
	if len(t.procs) == 0 {
		return nil, fmt.Errorf("snapshot processes: %w: no process under %s", ErrMalformed, f.root())
	}
	t.link()
	if roots == nil {
		return t, nil
	}
	gone := false
	for _, root := range roots {
		if _, ok := t.procs[root]; !ok {
			continue
		}
		for _, pid := range append([]int{root}, t.Descendants(root)...) {
			p := t.procs[pid]
			if p.Argv != nil {
				continue
			}
			argv, err := f.readArgv(pid)
			if errors.Is(err, ErrNoProcess) {
				delete(t.procs, pid) // it exited since its stat was read
				gone = true
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("snapshot processes: %w", err)
			}
			if argv == nil {
				argv = []string{} // read: a kernel thread or an emptied cmdline
			}
			p.Argv = argv
			t.procs[pid] = p
		}
	}
	if gone {
		t.link()
	}
	return t, nil
}

// link rebuilds the children index from the processes.
func (t *Table) link() {
	clear(t.children)
	for pid, p := range t.procs {
		t.children[p.PPID] = append(t.children[p.PPID], pid)
	}
	for _, c := range t.children {
		slices.Sort(c)
	}
}

// NewTable builds a Table from processes (for tests and fakes); a
// duplicate pid is an error.
func NewTable(procs []Process) (*Table, error) {
	t := &Table{procs: make(map[int]Process, len(procs)), children: map[int][]int{}}
	for _, p := range procs {
		if _, dup := t.procs[p.PID]; dup {
			return nil, fmt.Errorf("new process table: pid %d twice", p.PID)
		}
		t.procs[p.PID] = p
	}
	t.link()
	return t, nil
}

// Len is the number of processes in the table.
func (t *Table) Len() int { return len(t.procs) }

// Get returns the process with pid, if it was running at the snapshot.
func (t *Table) Get(pid int) (Process, bool) {
	p, ok := t.procs[pid]
	return p, ok
}

// PIDs returns every pid in the table, ascending.
func (t *Table) PIDs() []int {
	out := make([]int, 0, len(t.procs))
	for pid := range t.procs {
		out = append(out, pid)
	}
	slices.Sort(out)
	return out
}

// Ancestors returns pid's parent, grandparent, … up to the first process
// not in the table (pid 1's parent 0 ends it). A cycle, impossible in a
// consistent snapshot, ends the walk.
func (t *Table) Ancestors(pid int) []int {
	var out []int
	seen := map[int]bool{pid: true}
	for {
		p, ok := t.procs[pid]
		if !ok || p.PPID == 0 || seen[p.PPID] {
			return out
		}
		pid = p.PPID
		seen[pid] = true
		out = append(out, pid)
	}
}

// IsDescendant reports whether pid is ancestor itself or one of its
// descendants.
func (t *Table) IsDescendant(pid, ancestor int) bool {
	return pid == ancestor || slices.Contains(t.Ancestors(pid), ancestor)
}

// Children returns pid's direct children, ascending.
func (t *Table) Children(pid int) []int { return slices.Clone(t.children[pid]) }

// Descendants returns every descendant of pid (not pid itself),
// breadth first, children in ascending pid order.
func (t *Table) Descendants(pid int) []int {
	var out []int
	queue := []int{pid}
	seen := map[int]bool{pid: true}
	for len(queue) > 0 {
		next := queue[0]
		queue = queue[1:]
		for _, c := range t.children[next] {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
				queue = append(queue, c)
			}
		}
	}
	return out
}

// OpenFile is one open file descriptor of a process.
type OpenFile struct {
	FD int
	// Path is the descriptor's target as /proc shows it, without the
	// " (deleted)" suffix (see Deleted); non-files look like
	// "pipe:[123]" or "socket:[456]".
	Path string
	// Deleted reports a file that was unlinked while open.
	Deleted bool
	// Dev and Ino identify the open file (from stat through the link).
	Dev uint64
	Ino uint64
	// Regular reports a regular file.
	Regular bool
	// Size is the file's size when it was read (regular files).
	Size int64
}

// OpenFiles lists the open descriptors of pid in the default /proc.
func OpenFiles(pid int) ([]OpenFile, error) { return FS{}.OpenFiles(pid) }

// OpenFiles lists pid's open descriptors in ascending order. Descriptors
// closed while it reads are left out. A missing process is ErrNoProcess;
// a permission failure is an error (never an empty list).
func (f FS) OpenFiles(pid int) ([]OpenFile, error) {
	before, err := f.readStat(pid)
	if err != nil {
		return nil, fmt.Errorf("open files of %d: %w", pid, err)
	}
	dir := f.path(pid, "fd")
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			return nil, fmt.Errorf("open files of %d: %w", pid, ErrNoProcess)
		}
		return nil, fmt.Errorf("open files of %d: %w", pid, err)
	}
	out := make([]OpenFile, 0, len(ents))
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		link := filepath.Join(dir, e.Name())
		target, err := os.Readlink(link)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("open files of %d: fd %d: %w", pid, fd, err)
		}
		of := OpenFile{FD: fd, Path: target}
		if strings.HasPrefix(target, "/") {
			if p, ok := strings.CutSuffix(target, " (deleted)"); ok {
				of.Path, of.Deleted = p, true
			}
		}
		var st syscall.Stat_t
		if err := syscall.Stat(link, &st); err == nil {
			of.Dev, of.Ino = uint64(st.Dev), st.Ino
			of.Regular = st.Mode&syscall.S_IFMT == syscall.S_IFREG
			if of.Regular {
				of.Size = st.Size
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("open files of %d: stat fd %d: %w", pid, fd, err)
		}
		out = append(out, of)
	}
	slices.SortFunc(out, func(a, b OpenFile) int { return a.FD - b.FD })
	// A pid recycled while we read would mix two processes' files.
	after, err := f.readStat(pid)
	if err != nil {
		return nil, fmt.Errorf("open files of %d: %w", pid, err)
	}
	if after.StartTicks != before.StartTicks {
		return nil, fmt.Errorf("open files of %d: %w (it exited while being read)", pid, ErrNoProcess)
	}
	return out, nil
}

func clip(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}
