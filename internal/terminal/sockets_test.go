package terminal

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	"github.com/clawconnect/clawconnect/termapi"
)

// followingTerminals are fake panes that record the sockets they were
// told to follow.
type followingTerminals struct {
	*fakeTerminals
	mu      sync.Mutex
	sockets []string
}

func (f *followingTerminals) FollowSockets(paths ...string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, p := range paths {
		if !slices.Contains(f.sockets, p) {
			f.sockets = append(f.sockets, p)
			n++
		}
	}
	return n
}

func (f *followingTerminals) followed() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.sockets...)
}

// listenUnix makes a unix socket at path, closed when the test ends.
func listenUnix(t *testing.T, path string) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
}

func TestCheckSocket(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "tmux-sock")
	listenUnix(t, sock)
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(sock, link); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other-sock")
	listenUnix(t, other)
	otherUID := os.Geteuid() + 1
	if err := os.Chown(other, otherUID, -1); err != nil {
		t.Logf("cannot give a socket to another user here (%v); that case is skipped", err)
		other = ""
	}
	tests := []struct {
		name, path, want string
		absent           bool
	}{
		{name: "socket", path: sock},
		{name: "symlink resolves to its socket", path: link},
		{name: "empty", path: "", want: "empty"},
		{name: "relative", path: "tmux-1000/default", want: "not an absolute path"},
		{name: "dot-dot", path: dir + "/../" + filepath.Base(dir) + "/tmux-sock", want: "not in clean form"},
		{name: "trailing slash", path: sock + "/", want: "not in clean form"},
		{name: "NUL", path: sock + "\x00x", want: "NUL byte"},
		{name: "regular file", path: file, want: "is not a socket (it is a regular file)"},
		{name: "directory", path: dir, want: "is not a socket (it is a directory)"},
		{name: "missing", path: filepath.Join(dir, "gone"), absent: true},
		{name: "another user's", path: other, want: "belongs to uid"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "another user's" && other == "" {
				t.Skip("no other user's socket")
			}
			got, err := CheckSocket(tc.path)
			switch {
			case tc.absent:
				if !errors.Is(err, errNoSocket) || errors.Is(err, termapi.ErrBadInput) {
					t.Fatalf("CheckSocket(%q) = %v, want errNoSocket", tc.path, err)
				}
			case tc.want != "":
				if !errors.Is(err, termapi.ErrBadInput) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("CheckSocket(%q) = %v, want ErrBadInput saying %q", tc.path, err, tc.want)
				}
			case err != nil:
				t.Fatalf("CheckSocket(%q): %v", tc.path, err)
			case got != sock:
				t.Fatalf("CheckSocket(%q) = %q, want %q", tc.path, got, sock)
			}
		})
	}
}

// FuzzCheckSocket: any path is either refused with a reason or resolved
// to an absolute clean path; it never panics.
func FuzzCheckSocket(f *testing.F) {
	for _, s := range []string{"", "/tmp/tmux-0/default", "rel", "/a/../b", "/a//b", "/\x00", "/proc/self/fd/0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		got, err := CheckSocket(path)
		if err != nil {
			if !errors.Is(err, termapi.ErrBadInput) && !errors.Is(err, errNoSocket) {
				t.Fatalf("CheckSocket(%q) = %v: neither bad input nor absent", path, err)
			}
			return
		}
		if !filepath.IsAbs(got) || filepath.Clean(got) != got {
			t.Fatalf("CheckSocket(%q) = %q, not absolute and clean", path, got)
		}
	})
}

// TestRecordedPaneSocketIsFollowed: the server named by a pane key in the
// store is followed by a host that was never told about it.
func TestRecordedPaneSocketIsFollowed(t *testing.T) {
	r := newRig(t)
	ft := &followingTerminals{fakeTerminals: r.ft}
	svc := NewService(Options{Store: r.st, Terminals: ft, Agents: map[string]agents.Agent{termapi.AgentCodex: fakeReader{r.ft}}})
	sock := filepath.Join(t.TempDir(), "private")
	listenUnix(t, sock)
	svc.followKey(sock + "\t%3")
	svc.followKey("work:0.0\t4242") // a legacy key names no socket
	svc.followKey("/nonexistent/sock\t%1")
	if got := ft.followed(); !slices.Equal(got, []string{sock}) {
		t.Fatalf("followed %q, want %q", got, sock)
	}
}
