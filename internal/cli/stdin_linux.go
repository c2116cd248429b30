package cli

import (
	"io"
	"os"
	"strconv"
	"syscall"
)

// pollableStdin returns stdin opened a second time, non-blocking, when it is
// a pipe (as every MCP client that starts `clawconnect mcp` gives it), so
// that its reads wait in the runtime's poller. A read of a blocking pipe
// holds a thread in the kernel: each message that wakes it has to win a
// processor back, the runtime takes the processor from a thread blocked in
// a system call, and every such take set the runtime's monitor polling
// every 20 µs while the process worked (about 70 sleeps of the monitor
// per run_task + check_task). The second open is a file description of its
// own, so stdin's flags, which the client and anyone sharing it see, stay
// as they were. Anything else (a terminal, a file, a socket) is returned as
// it is. close closes the second file, which also ends a read waiting on it.
func pollableStdin(in io.Reader) (r io.Reader, close func()) {
	f, ok := in.(*os.File)
	if !ok {
		return in, func() {}
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		return in, func() {}
	}
	p, err := os.OpenFile("/proc/self/fd/"+strconv.FormatUint(uint64(f.Fd()), 10), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return in, func() {}
	}
	return p, func() { _ = p.Close() }
}
