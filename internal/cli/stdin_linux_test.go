package cli

import (
	"errors"
	"io"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestPollableStdinWaitsInThePoller: a blocking pipe as stdin is read
// through a second, non-blocking open of it, whose reads wait in the
// runtime's poller (it takes deadlines, which a blocking file refuses),
// while stdin's own flags stay blocking.
func TestPollableStdinWaitsInThePoller(t *testing.T) {
	t.Parallel()
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC); err != nil { // blocking, as a client passes it
		t.Fatal(err)
	}
	stdin, w := os.NewFile(uintptr(fds[0]), "stdin"), os.NewFile(uintptr(fds[1]), "client")
	t.Cleanup(func() { _ = stdin.Close(); _ = w.Close() })
	if err := stdin.SetReadDeadline(time.Now()); !errors.Is(err, os.ErrNoDeadline) {
		t.Fatalf("the blocking pipe took a deadline (%v): the test proves nothing", err)
	}
	in, closeIn := pollableStdin(stdin)
	t.Cleanup(closeIn)
	f, ok := in.(*os.File)
	if !ok || f == stdin {
		t.Fatalf("pollableStdin returned %T %v, want a second file", in, in)
	}
	if err := f.SetReadDeadline(time.Now().Add(-time.Second)); err != nil {
		t.Fatalf("the second file takes no deadline (%v): its reads hold a thread", err)
	}
	if _, err := f.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline = %v, want ErrDeadlineExceeded", err)
	}
	if err := f.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 3)
	if _, err := io.ReadFull(f, got); err != nil || string(got) != "{}\n" {
		t.Fatalf("read %q, %v; want the client's line", got, err)
	}
	flags, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fds[0]), syscall.F_GETFL, 0)
	if errno != 0 || flags&syscall.O_NONBLOCK != 0 {
		t.Fatalf("stdin's flags %#x (%v): it must stay blocking for whoever shares it", flags, errno)
	}
	// A socket (a Node client's socket pair) is read through the poller
	// too, and left blocking once closed.
	sp, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	sock, client := os.NewFile(uintptr(sp[0]), "stdin"), os.NewFile(uintptr(sp[1]), "client")
	t.Cleanup(func() { _ = sock.Close(); _ = client.Close() })
	sin, closeSock := pollableStdin(sock)
	dl, ok := sin.(interface{ SetReadDeadline(time.Time) error })
	if !ok {
		t.Fatalf("a socket stdin came back as %T, want a connection of the poller", sin)
	}
	if err := dl.SetReadDeadline(time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := sin.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("socket read past the deadline = %v, want ErrDeadlineExceeded", err)
	}
	closeSock()
	flags, _, errno = syscall.Syscall(syscall.SYS_FCNTL, uintptr(sp[0]), syscall.F_GETFL, 0)
	if errno != 0 || flags&syscall.O_NONBLOCK != 0 {
		t.Fatalf("socket stdin's flags %#x (%v) once closed: want blocking again", flags, errno)
	}
	// A file that is neither is served as it is.
	reg, err := os.CreateTemp(t.TempDir(), "in")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	if got, done := pollableStdin(reg); got != io.Reader(reg) {
		t.Fatalf("a regular file came back as %v", got)
	} else {
		done()
	}
}
