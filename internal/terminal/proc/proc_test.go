package proc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/testbed/poll"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func requireLinux(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("reads Linux /proc")
	}
}

// stat builds a /proc/<pid>/stat line with the given comm, state, ppid
// and start ticks (field 22).
func stat(pid int, comm string, state byte, ppid int, start uint64) string {
	// Fields 3..: state ppid pgrp session tty tpgid flags minflt cminflt
	// majflt cmajflt utime stime cutime cstime priority nice threads
	// itrealvalue starttime vsize ...
	return fmt.Sprintf("%d (%s) %c %d %d %d 34816 %d 4194560 100 0 0 0 1 2 0 0 20 0 1 0 %d 1000 10 18446744073709551615 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n",
		pid, comm, state, ppid, pid, pid, pid, start)
}

func TestParseStat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want Process
		err  bool
	}{
		{name: "plain", in: stat(42, "codex", 'S', 7, 123456), want: Process{PID: 42, PPID: 7, State: 'S', StartTicks: 123456, Comm: "codex"}},
		{name: "comm with spaces and parentheses", in: stat(42, "a) b (c) 1 2", 'R', 1, 99), want: Process{PID: 42, PPID: 1, State: 'R', StartTicks: 99, Comm: "a) b (c) 1 2"}},
		{name: "empty comm", in: stat(42, "", 'Z', 0, 5), want: Process{PID: 42, PPID: 0, State: 'Z', StartTicks: 5}},
		{name: "no comm", in: "42 codex S 1 2 3", err: true},
		{name: "no closing parenthesis", in: "42 (codex S 1 2 3", err: true},
		{name: "too few fields", in: "42 (codex) S 1 2 3 4 5", err: true},
		{name: "pid not a number", in: strings.Replace(stat(42, "x", 'S', 1, 1), "42", "4x", 1), err: true},
		{name: "start not a number", in: strings.Replace(stat(42, "x", 'S', 1, 777), " 777 ", " -7 ", 1), err: true},
		{name: "state two letters", in: strings.Replace(stat(42, "x", 'S', 1, 1), ") S ", ") SS ", 1), err: true},
		{name: "empty", in: "", err: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseStat([]byte(tc.in))
			if tc.err {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("ParseStat(%q) = %+v, %v; want ErrMalformed", tc.in, got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte(stat(42, "codex", 'S', 7, 123456)))
	f.Add([]byte(stat(1, "a) b (c", 'R', 0, 0)))
	f.Add([]byte("1 () S"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParseStat(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if p.PID <= 0 || p.PPID < 0 {
			t.Fatalf("accepted %+v", p)
		}
		// The comm is whatever sits between the first '(' and the last ')'.
		if !strings.Contains(string(b), "("+p.Comm+")") {
			t.Fatalf("comm %q not found in %q", p.Comm, b)
		}
	})
}

func TestParseCmdline(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"codex\x00", []string{"codex"}},
		{"node\x00/x/codex\x00resume\x00", []string{"node", "/x/codex", "resume"}},
		{"node\x00\x00last\x00", []string{"node", "", "last"}},
		{"rewritten title with spaces", []string{"rewritten title with spaces"}},
	} {
		if diff := cmp.Diff(tc.want, ParseCmdline([]byte(tc.in))); diff != "" {
			t.Errorf("ParseCmdline(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}

func TestIncarnation(t *testing.T) {
	t.Parallel()
	s := Incarnation(4242, 987654321)
	if s != "pid:4242:start:987654321" {
		t.Fatalf("Incarnation = %q", s)
	}
	pid, ticks, err := ParseIncarnation(s)
	if err != nil || pid != 4242 || ticks != 987654321 {
		t.Errorf("ParseIncarnation(%q) = %d, %d, %v", s, pid, ticks, err)
	}
	for _, bad := range []string{"", "pid:1", "pid:0:start:1", "pid:-1:start:1", "pid:+1:start:1", "pid:1:start:x", "pid:1:start:-1", "codex-pid:1:birth:x"} {
		if _, _, err := ParseIncarnation(bad); err == nil {
			t.Errorf("ParseIncarnation(%q) accepted", bad)
		}
	}
}

// startChild starts `sleep` in dir and returns it; Cleanup kills and
// reaps it.
func startChild(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	// Start returns once the exec has begun; the kernel sets the new
	// image's argv a moment later, so /proc/PID/cmdline can still be
	// empty. A sleeping child has finished its exec.
	waitState(t, cmd.Process.Pid, 'S')
	return cmd
}

func TestReadSelfAndChild(t *testing.T) {
	requireLinux(t)
	t.Parallel()
	self, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	wd, _ := os.Getwd()
	if self.PPID != os.Getppid() || self.Exe != exe || self.Cwd != wd || !slices.Equal(self.Argv, os.Args) || self.StartTicks == 0 {
		t.Errorf("Read(self) = %+v; want ppid %d, exe %s, cwd %s, argv %q", self, os.Getppid(), exe, wd, os.Args)
	}
	if got := self.Incarnation(); got != Incarnation(self.PID, self.StartTicks) {
		t.Errorf("Incarnation() = %q", got)
	}

	dir, _ := filepath.EvalSymlinks(t.TempDir())
	child := startChild(t, dir)
	p, err := Read(child.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if p.PPID != os.Getpid() || p.Cwd != dir || !slices.Equal(p.Argv, []string{"sleep", "600"}) || filepath.Base(p.Exe) != "sleep" {
		t.Errorf("Read(child) = %+v", p)
	}
	if alive, err := Alive(p.PID, p.StartTicks); !alive || err != nil {
		t.Errorf("Alive(child) = %v, %v", alive, err)
	}
	if alive, err := Alive(p.PID, p.StartTicks+1); alive || err != nil {
		t.Errorf("Alive(child, other ticks) = %v, %v; want false", alive, err)
	}

	// Killed but not reaped: a zombie is no process.
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	waitState(t, p.PID, 'Z')
	if _, err := Read(p.PID); !errors.Is(err, ErrNoProcess) {
		t.Errorf("Read(zombie): %v, want ErrNoProcess", err)
	}
	if alive, err := Alive(p.PID, p.StartTicks); alive || err != nil {
		t.Errorf("Alive(zombie) = %v, %v; want false", alive, err)
	}
	_ = child.Wait()
	if _, err := Read(p.PID); !errors.Is(err, ErrNoProcess) {
		t.Errorf("Read(reaped): %v, want ErrNoProcess", err)
	}
	if alive, err := Alive(p.PID, p.StartTicks); alive || err != nil {
		t.Errorf("Alive(reaped) = %v, %v; want false", alive, err)
	}
}

// waitState waits (bounded) until pid's state is s.
func waitState(t *testing.T, pid int, s byte) {
	t.Helper()
	var p Process
	var err error
	if !poll.Within(10*time.Second, func() bool { p, err = FS{}.ReadStat(pid); return err == nil && p.State == s }) {
		t.Fatalf("process %d never reached state %c (last %+v, %v)", pid, s, p, err)
	}
}

func TestSnapshotAncestry(t *testing.T) {
	requireLinux(t)
	t.Parallel()
	dir := t.TempDir()
	// sh -> sleep: a grandchild of the test.
	sh := exec.Command("sh", "-c", "sleep 600 & wait")
	sh.Dir = dir
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-sh.Process.Pid, syscall.SIGKILL)
		_ = sh.Process.Kill()
		_ = sh.Wait()
	})
	var tab *Table
	var grandchild int
	var err error
	started := poll.Within(10*time.Second, func() bool {
		if tab, err = Snapshot(); err != nil {
			return true
		}
		if c := tab.Children(sh.Process.Pid); len(c) == 1 {
			if g, _ := tab.Get(c[0]); len(g.Argv) > 0 && g.Argv[0] == "sleep" { // exec'd
				grandchild = c[0]
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatal(err)
	}
	if !started {
		t.Fatal("sh never started its child")
	}
	t.Cleanup(func() { _ = syscall.Kill(grandchild, syscall.SIGKILL) })
	if tab.Len() < 3 {
		t.Errorf("Len() = %d", tab.Len())
	}
	self, ok := tab.Get(os.Getpid())
	if !ok || !slices.Equal(self.Argv, os.Args) || self.Cwd != "" {
		t.Errorf("Get(self) = %+v, %v; want argv and no cwd", self, ok)
	}
	g, _ := tab.Get(grandchild)
	if !slices.Equal(g.Argv, []string{"sleep", "600"}) {
		t.Errorf("grandchild argv %q", g.Argv)
	}
	anc := tab.Ancestors(grandchild)
	if len(anc) < 2 || anc[0] != sh.Process.Pid || anc[1] != os.Getpid() {
		t.Errorf("Ancestors(grandchild) = %v; want [%d %d …]", anc, sh.Process.Pid, os.Getpid())
	}
	if !tab.IsDescendant(grandchild, os.Getpid()) || !tab.IsDescendant(grandchild, grandchild) || tab.IsDescendant(os.Getpid(), grandchild) {
		t.Error("IsDescendant is wrong")
	}
	if d := tab.Descendants(os.Getpid()); !slices.Contains(d, sh.Process.Pid) || !slices.Contains(d, grandchild) ||
		slices.Index(d, sh.Process.Pid) > slices.Index(d, grandchild) {
		t.Errorf("Descendants(self) = %v", d)
	}
	if !slices.IsSorted(tab.PIDs()) || len(tab.PIDs()) != tab.Len() {
		t.Error("PIDs() not sorted or incomplete")
	}
}

// fakeProc lays out a /proc tree: files maps "pid/name" to content.
func fakeProc(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestSnapshotFakeTree(t *testing.T) {
	t.Parallel()
	good := map[string]string{
		"1/stat":     stat(1, "init", 'S', 0, 1),
		"1/cmdline":  "/sbin/init\x00",
		"10/stat":    stat(10, "tmux: server", 'S', 1, 50),
		"10/cmdline": "tmux\x00",
		"11/stat":    stat(11, "bash", 'S', 10, 60),
		"11/cmdline": "-bash\x00",
		"12/stat":    stat(12, "node", 'S', 11, 70),
		"12/cmdline": "node\x00/x/bin/codex\x00",
		"13/stat":    stat(13, "codex", 'S', 12, 71),
		"13/cmdline": "/x/vendor/bin/codex\x00",
		"self/stat":  "ignored",
		"uptime":     "1 2",
		"99/cmdline": "vanished before its stat was read", // no stat: gone
	}
	tab, err := FS{Root: fakeProc(t, good)}.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{1, 10, 11, 12, 13}, tab.PIDs()); diff != "" {
		t.Errorf("PIDs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{12, 11, 10, 1}, tab.Ancestors(13)); diff != "" {
		t.Errorf("Ancestors(13) (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{11, 12, 13}, tab.Descendants(10)); diff != "" {
		t.Errorf("Descendants(10) (-want +got):\n%s", diff)
	}
	p, _ := tab.Get(12)
	if diff := cmp.Diff(Process{PID: 12, PPID: 11, State: 'S', StartTicks: 70, Comm: "node", Argv: []string{"node", "/x/bin/codex"}}, p); diff != "" {
		t.Errorf("Get(12) (-want +got):\n%s", diff)
	}

	// Argv only under pane processes: ancestry stays complete.
	under, err := FS{Root: fakeProc(t, good)}.SnapshotUnder([]int{11, 404})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{1, 10, 11, 12, 13}, under.PIDs()); diff != "" {
		t.Errorf("SnapshotUnder PIDs (-want +got):\n%s", diff)
	}
	for pid, want := range map[int][]string{1: nil, 10: nil, 11: {"-bash"}, 12: {"node", "/x/bin/codex"}, 13: {"/x/vendor/bin/codex"}} {
		if p, _ := under.Get(pid); !slices.Equal(p.Argv, want) || (want == nil) != (p.Argv == nil) {
			t.Errorf("SnapshotUnder Get(%d).Argv = %q, want %q", pid, p.Argv, want)
		}
	}
	if diff := cmp.Diff([]int{12, 11, 10, 1}, under.Ancestors(13)); diff != "" {
		t.Errorf("SnapshotUnder Ancestors(13) (-want +got):\n%s", diff)
	}

	bad := map[string]map[string]string{
		"malformed stat":      {"1/stat": "1 init S 0", "1/cmdline": ""},
		"stat of another pid": {"1/stat": stat(2, "x", 'S', 0, 1), "1/cmdline": ""},
		"no process at all":   {"uptime": "1"},
	}
	for name, files := range bad {
		if tab, err := (FS{Root: fakeProc(t, files)}).Snapshot(); err == nil {
			t.Errorf("%s: Snapshot = %d processes, want an error", name, tab.Len())
		}
	}
	if _, err := (FS{Root: filepath.Join(t.TempDir(), "none")}).Snapshot(); err == nil {
		t.Error("Snapshot of a missing root succeeded")
	}
}

func TestNewTable(t *testing.T) {
	t.Parallel()
	tab, err := NewTable([]Process{{PID: 1}, {PID: 5, PPID: 1}, {PID: 6, PPID: 5}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{5, 1}, tab.Ancestors(6)); diff != "" {
		t.Errorf("Ancestors (-want +got):\n%s", diff)
	}
	if _, err := NewTable([]Process{{PID: 1}, {PID: 1}}); err == nil {
		t.Error("NewTable accepted a duplicate pid")
	}
	// A cycle (impossible in a real snapshot) ends the walk.
	cyc, _ := NewTable([]Process{{PID: 2, PPID: 3}, {PID: 3, PPID: 2}})
	if diff := cmp.Diff([]int{3}, cyc.Ancestors(2)); diff != "" {
		t.Errorf("Ancestors in a cycle (-want +got):\n%s", diff)
	}
}

func TestOpenFiles(t *testing.T) {
	requireLinux(t)
	t.Parallel()
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	kept := filepath.Join(dir, "rollout.jsonl")
	if err := os.WriteFile(kept, []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	f1, err := os.Open(kept)
	if err != nil {
		t.Fatal(err)
	}
	defer f1.Close()
	gone := filepath.Join(dir, "gone.jsonl")
	f2, err := os.Create(gone)
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Close()
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()

	files, err := OpenFiles(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	byFD := map[int]OpenFile{}
	for _, f := range files {
		byFD[f.FD] = f
	}
	if !slices.IsSortedFunc(files, func(a, b OpenFile) int { return a.FD - b.FD }) {
		t.Error("not sorted by fd")
	}
	var st syscall.Stat_t
	if err := syscall.Stat(kept, &st); err != nil {
		t.Fatal(err)
	}
	want := OpenFile{FD: int(f1.Fd()), Path: kept, Dev: uint64(st.Dev), Ino: st.Ino, Regular: true, Size: 5}
	if diff := cmp.Diff(want, byFD[int(f1.Fd())]); diff != "" {
		t.Errorf("open file (-want +got):\n%s", diff)
	}
	if g := byFD[int(f2.Fd())]; g.Path != gone || !g.Deleted || !g.Regular {
		t.Errorf("deleted file = %+v", g)
	}
	if p := byFD[int(r.Fd())]; p.Regular || !strings.HasPrefix(p.Path, "pipe:[") {
		t.Errorf("pipe = %+v", p)
	}
	if _, err := OpenFiles(1 << 30); !errors.Is(err, ErrNoProcess) {
		t.Errorf("OpenFiles(no such pid): %v, want ErrNoProcess", err)
	}
}

func TestReadFakeTreeMissingLinks(t *testing.T) {
	t.Parallel()
	root := fakeProc(t, map[string]string{"7/stat": stat(7, "x", 'S', 1, 3), "7/cmdline": "x\x00"})
	if _, err := (FS{Root: root}).Read(7); !errors.Is(err, ErrNoProcess) {
		t.Errorf("Read without cwd link: %v, want ErrNoProcess", err)
	}
	if err := os.Symlink("/srv/work", filepath.Join(root, "7", "cwd")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/usr/bin/codex (deleted)", filepath.Join(root, "7", "exe")); err != nil {
		t.Fatal(err)
	}
	p, err := FS{Root: root}.Read(7)
	if err != nil {
		t.Fatal(err)
	}
	if p.Cwd != "/srv/work" || p.Exe != "/usr/bin/codex" {
		t.Errorf("Read = %+v", p)
	}
	if _, err := (FS{Root: root}).Read(8); !errors.Is(err, ErrNoProcess) {
		t.Errorf("Read(missing): %v, want ErrNoProcess", err)
	}
}
