package cli

import (
	"io"
	"net"
	"os"
	"strconv"
	"syscall"
)

// pollableStdin returns a reader of stdin whose reads wait in the runtime's
// poller when stdin is a pipe or a socket (as MCP clients that start
// `clawconnect mcp` pass it: a pipe, or a socket pair from Node's
// child_process). A read of a blocking descriptor holds a thread in the
// kernel: each message that wakes it has to win a processor back, the
// runtime takes the processor from a thread blocked in a system call, and
// every such take set the runtime's monitor polling every 20 µs while the
// process worked (about 70 sleeps of the monitor per run_task + check_task).
//
// A pipe is opened a second time through /proc, non-blocking: a file
// description of its own, so stdin's flags stay as they were for anyone
// sharing it. A socket cannot be opened again; it is read through a
// duplicate, whose description (shared with stdin) the runtime makes
// non-blocking, and close makes it blocking again. Anything else (a
// terminal, a file) is returned as it is. close also ends a read waiting
// on the returned reader.
func pollableStdin(in io.Reader) (r io.Reader, close func()) {
	f, ok := in.(*os.File)
	if !ok {
		return in, func() {}
	}
	fi, err := f.Stat()
	if err != nil {
		return in, func() {}
	}
	fd := f.Fd()
	switch {
	case fi.Mode()&os.ModeNamedPipe != 0:
		p, err := os.OpenFile("/proc/self/fd/"+strconv.FormatUint(uint64(fd), 10), os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			return in, func() {}
		}
		return p, func() { _ = p.Close() }
	case fi.Mode()&os.ModeSocket != 0:
		c, err := net.FileConn(f)
		if err != nil {
			return in, func() {}
		}
		return c, func() {
			_ = c.Close()
			_ = syscall.SetNonblock(int(fd), false)
		}
	}
	return in, func() {}
}
