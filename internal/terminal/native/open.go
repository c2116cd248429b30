package native

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// OpenOwned opens a session file read-only for the readers of agents'
// files: it refuses a symbolic link (the file must be the agent's own, not
// a pointer elsewhere), opens without blocking (a FIFO in a session file's
// place is refused rather than waited on for good), and checks that the
// file is a regular file owned by this user with none of the forbidden
// permission bits.
func OpenOwned(path string, forbidden fs.FileMode) (*os.File, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	switch mode := fs.FileMode(st.Mode & 0o777); {
	case st.Mode&syscall.S_IFMT != syscall.S_IFREG:
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file", path)
	case int(st.Uid) != os.Geteuid():
		f.Close()
		return nil, fmt.Errorf("%s is owned by uid %d, not this user (%d)", path, st.Uid, os.Geteuid())
	case mode&forbidden != 0:
		f.Close()
		return nil, fmt.Errorf("%s has mode %o; the agent's files must not carry the permission bits %o", path, mode, mode&forbidden)
	}
	return f, nil
}
