package terminal

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// nobody is the uid the tests that run as root connect as.
const nobody = 65534

// logBuffer is a slog destination safe for the socket's goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startSocket serves a fake-pane service on home/terminal.sock with o
// until the test ends, and returns the socket's path and the host's log.
func startSocket(t *testing.T, home string, o socketOptions) (string, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	r := newRig(t, newFakeAgent(AgentCodex, 400))
	svc := NewService(Options{Store: r.st, Terminals: r.ft, Agents: map[string]Agent{AgentCodex: fakeReader{r.ft}},
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	path := filepath.Join(home, SocketName)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveSocket(ctx, path, svc, o) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Lstat(path); err == nil {
			return path, logs
		}
		if time.Now().After(deadline) {
			t.Fatal("the socket never appeared")
		}
		select {
		case err := <-done:
			t.Fatalf("serve stopped: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// asUser runs f on an OS thread whose effective (and so file-system) uid is
// uid; the thread is discarded afterwards. Linux keeps credentials per
// thread, so the rest of the process stays root.
func asUser(t *testing.T, uid int, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESUID, ^uintptr(0), uintptr(uid), ^uintptr(0)); e != 0 {
			t.Errorf("setresuid: %v", e)
			return
		}
		f()
	}()
	<-done
}

// rawDial connects to the unix socket path from the calling thread.
func rawDial(path string) (int, error) {
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := syscall.Connect(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
		syscall.Close(fd)
		return -1, err
	}
	return fd, nil
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to act as another user")
	}
}

// TestSocketRefusesAnotherUsersConnection serves the socket for a uid this
// process does not run as: its own connection is then "another user's",
// closed before any request is read, with a log line naming both uids.
// Served for its own uid, the same call works.
func TestSocketRefusesAnotherUsersConnection(t *testing.T) {
	other := os.Geteuid() + 1
	path, logs := startSocket(t, t.TempDir(), socketOptions{uid: other, idle: time.Minute})
	c, err := Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.List(t.Context()); err == nil {
		t.Fatal("another user's connection was served")
	}
	want := "peer_uid=" + strconv.Itoa(os.Geteuid()) + " uid=" + strconv.Itoa(other)
	if l := logs.String(); !strings.Contains(l, "refused a connection from another user") || !strings.Contains(l, want) {
		t.Fatalf("log %q lacks the refusal with %q", l, want)
	}

	own, _ := startSocket(t, t.TempDir(), socketOptions{uid: os.Geteuid(), idle: time.Minute})
	c, err = Dial(own)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.List(t.Context()); err != nil {
		t.Fatalf("own connection: %v", err)
	}
}

// TestSocketRefusesNobody connects as user nobody (a thread of this test,
// run as root) to a socket whose mode an operator loosened: the peer check
// still refuses it.
func TestSocketRefusesNobody(t *testing.T) {
	needRoot(t)
	home := t.TempDir()
	path, logs := startSocket(t, home, socketOptions{uid: os.Geteuid(), idle: time.Minute})
	for _, p := range []string{filepath.Dir(home), home} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	var got []byte
	var dialErr, readErr error
	asUser(t, nobody, func() {
		fd, err := rawDial(path)
		if err != nil {
			dialErr = err
			return
		}
		defer syscall.Close(fd)
		_ = syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &syscall.Timeval{Sec: 10})
		req := "POST /v1/list HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
		if _, err := syscall.Write(fd, []byte(req)); err != nil {
			readErr = err // closed before the request was written: refused too
			return
		}
		buf := make([]byte, 4096)
		n, err := syscall.Read(fd, buf)
		got, readErr = buf[:max(n, 0)], err
	})
	if dialErr != nil {
		t.Fatalf("nobody could not connect to a 0666 socket (%v): the test proves nothing", dialErr)
	}
	if len(got) > 0 || (readErr != nil && !errors.Is(readErr, syscall.ECONNRESET) && !errors.Is(readErr, syscall.EPIPE)) {
		t.Fatalf("nobody read %q (err %v), want the connection closed unanswered", got, readErr)
	}
	if want := "peer_uid=" + strconv.Itoa(nobody); !strings.Contains(logs.String(), want) {
		t.Fatalf("log %q lacks %q", logs.String(), want)
	}
}

// TestSocketIsNeverReachableByOthers serves the socket in a 0755 home
// under umask 000, and stops at the moment the socket is bound: user
// nobody cannot connect to it then, and once published it is 0600 with
// nothing left behind.
func TestSocketIsNeverReachableByOthers(t *testing.T) {
	needRoot(t)
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })
	home := t.TempDir()
	for _, p := range []string{filepath.Dir(home), home} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dialed := make(chan error, 1)
	path, _ := startSocket(t, home, socketOptions{uid: os.Geteuid(), idle: time.Minute, bound: func(private string) {
		asUser(t, nobody, func() {
			fd, err := rawDial(private)
			if err == nil {
				syscall.Close(fd)
			}
			dialed <- err
		})
	}})
	var dialErr error
	select {
	case dialErr = <-dialed:
	default:
		t.Fatal("the bound hook was not called")
	}
	if !errors.Is(dialErr, syscall.EACCES) {
		t.Fatalf("nobody connecting to the socket just bound: %v, want permission denied", dialErr)
	}
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("published socket: %v, %v; want a 0600 socket", fi.Mode(), err)
	}
	entries, _ := os.ReadDir(home)
	if len(entries) != 1 {
		t.Fatalf("home holds %v, want only %s", entries, SocketName)
	}
}

// TestSocketClosesAnIdleConnection keeps a connection open after one
// request: the host closes it once it has been idle for the timeout.
func TestSocketClosesAnIdleConnection(t *testing.T) {
	path, _ := startSocket(t, t.TempDir(), socketOptions{uid: os.Geteuid(), idle: 50 * time.Millisecond})
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "POST /v1/list HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("first response: %d, close %v", resp.StatusCode, resp.Close)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("idle connection: %v, want closed by the host", err)
	}
}
