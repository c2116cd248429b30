package agents

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/clawconnect/clawconnect/internal/terminal/redact"
)

var threadIDPattern = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
})

// ValidThreadID reports whether id has the shape of a native thread id (a
// UUID, as both agents name their threads and session files).
func ValidThreadID(id string) bool { return threadIDPattern().MatchString(id) }

// ThreadTitle is a NativeThread's title made from s: redacted, on one line,
// at most 200 characters.
func ThreadTitle(s string) string {
	s = strings.Join(strings.Fields(redact.Redact(s)), " ")
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return s
}

// SortThreads orders ts as ThreadControl.Threads returns them: the most
// recently updated first, then by id.
func SortThreads(ts []NativeThread) {
	sort.SliceStable(ts, func(i, j int) bool {
		if ts[i].UpdatedAt != ts[j].UpdatedAt {
			return ts[i].UpdatedAt > ts[j].UpdatedAt
		}
		return ts[i].ID < ts[j].ID
	})
}

// maxListedFile bounds how much of one session file a thread listing reads.
const maxListedFile = 8 << 20

// ScanListed calls line with each line of a session file a thread listing
// found, until line returns false or 8 MiB were read. It opens the file
// not through a symlink and without blocking, so a file swapped for a link
// or a FIFO after the directory was read is refused rather than followed
// or waited on.
func ScanListed(path string, line func([]byte) bool) error {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return fmt.Errorf("open %s: not a regular file", path)
	}
	sc := bufio.NewScanner(&limitedReader{f: f, n: maxListedFile})
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		if !line(sc.Bytes()) {
			return nil
		}
	}
	return sc.Err()
}

type limitedReader struct {
	f *os.File
	n int64
}

func (l *limitedReader) Read(b []byte) (int, error) {
	if l.n <= 0 {
		return 0, fmt.Errorf("session file larger than %d bytes", maxListedFile)
	}
	if int64(len(b)) > l.n {
		b = b[:l.n]
	}
	n, err := l.f.Read(b)
	l.n -= int64(n)
	return n, err
}
