package fswatch

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Usage is how many inotify instances and watches some processes hold.
type Usage struct {
	Instances, Watches int
}

// ProcessUsage reads process pid's inotify instances and watches from
// /proc (its fd links and fdinfo).
func ProcessUsage(pid int) (Usage, error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	fds, err := os.ReadDir(filepath.Join(dir, "fd"))
	if err != nil {
		return Usage{}, fmt.Errorf("inotify usage of %d: %w", pid, err)
	}
	var u Usage
	for _, fd := range fds {
		if l, err := os.Readlink(filepath.Join(dir, "fd", fd.Name())); err != nil || l != "anon_inode:inotify" {
			continue
		}
		u.Instances++
		b, err := os.ReadFile(filepath.Join(dir, "fdinfo", fd.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "inotify wd:") {
				u.Watches++
			}
		}
	}
	return u, nil
}

// UserUsage sums ProcessUsage over every process of the calling user: the
// kernel's inotify limits are per user. Processes that end while it reads
// are skipped.
func UserUsage() (Usage, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return Usage{}, fmt.Errorf("inotify usage: %w", err)
	}
	uid := uint32(os.Getuid())
	var sum Usage
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		fi, err := os.Stat(filepath.Join("/proc", e.Name()))
		if err != nil {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Uid != uid {
			continue
		}
		u, err := ProcessUsage(pid)
		if err != nil {
			continue
		}
		sum.Instances += u.Instances
		sum.Watches += u.Watches
	}
	return sum, nil
}

// Limits reads the user's inotify limits (InstancesSysctl,
// WatchesSysctl).
func Limits() (Usage, error) {
	read := func(name string) (int, error) {
		b, err := os.ReadFile(filepath.Join("/proc/sys", strings.ReplaceAll(name, ".", "/")))
		if err != nil {
			return 0, fmt.Errorf("read %s: %w", name, err)
		}
		return strconv.Atoi(strings.TrimSpace(string(b)))
	}
	i, err := read(InstancesSysctl)
	if err != nil {
		return Usage{}, err
	}
	w, err := read(WatchesSysctl)
	if err != nil {
		return Usage{}, err
	}
	return Usage{Instances: i, Watches: w}, nil
}
