package native

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"syscall"
)

// MaxLine is the longest line an incremental scan (ScanFrom) holds: a
// longer one stops the scan with CodeScanLimit rather than be buffered.
// Both agents write their records as one line each; a multi-megabyte line
// is an enormous paste or tool output, and 8 MiB keeps the memory of one
// scan small however large the file grows.
const MaxLine = 8 << 20

// Cursor is how far an incremental scan of one session file got: the
// file's identity, the complete-line boundary read up to, and what was
// found. A scan resumed from a Cursor reads only the bytes appended since,
// so asking the same question again costs what was written meanwhile, not
// the size of the file. The zero Cursor means "from the anchor": the
// readers' resumable scans (codex.TurnStartedSince,
// claude.PromptSince) start it there. A Cursor is a plain value; it is
// not safe to resume one Cursor from two goroutines at once.
type Cursor struct {
	// Dev and Ino identify the file once it was opened.
	Dev uint64
	Ino uint64
	// Start is where the scanned range begins (the anchor's offset); Limit
	// bounds the bytes after it that a scan reads (0 means no bound).
	Start int64
	Limit int64
	// Offset is the end of the last complete line read.
	Offset int64
	// Found reports that a line matched. It is final: a later scan
	// returns at once.
	Found bool
	// Err is a failure that reading on cannot mend (a replaced or
	// truncated file, a malformed line, a limit): it is final too.
	Err *ScanError
}

// Done reports whether the cursor's answer is final.
func (c Cursor) Done() bool { return c.Found || c.Err != nil }

// ScanFrom resumes c over the file at path (opened with OpenOwned and
// forbidden): it reads the complete lines between c.Offset and the file's
// current end, one at a time, and calls match with each non-blank line
// (without its '\n') and the offset just after it. It stops at the first
// line match reports true (Found) or fails on. A line that is not one JSON
// object ({…}) fails with CodeInvalidJSONL; bytes after the last '\n' are
// a record being written and are left for the next scan. A file that is
// not the cursor's (another device/inode once pinned; a zero cursor pins
// the file it finds), is shorter than c.Offset, or holds more than c.Limit
// bytes after c.Start fails with CodeIdentityMismatch, CodeTruncated or
// CodeScanLimit. Those failures, and a *ScanError from match, are final
// (c.Err); a file that cannot be opened or read now is returned as an error
// with the cursor unchanged, to be tried again.
//
// Memory is one buffered line at a time (at most MaxLine bytes), whatever
// the file's size.
func ScanFrom(path string, forbidden fs.FileMode, c Cursor, match func(line []byte, end int64) (bool, error)) (Cursor, error) {
	if c.Found {
		return c, nil
	}
	if c.Err != nil {
		return c, c.Err
	}
	f, err := OpenOwned(path, forbidden)
	if err != nil {
		return c, Failf(CodeUnreadable, path, "%v", err)
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return c, Failf(CodeUnreadable, path, "%v", err)
	}
	final := func(e *ScanError) (Cursor, error) {
		c.Err = e
		return c, e
	}
	if (c.Dev != 0 || c.Ino != 0) && (uint64(st.Dev) != c.Dev || st.Ino != c.Ino) {
		return final(Failf(CodeIdentityMismatch, path, "the file at the path is device/inode %d/%d, the anchor's is %d/%d (replaced)", st.Dev, st.Ino, c.Dev, c.Ino))
	}
	c.Dev, c.Ino = uint64(st.Dev), st.Ino
	if st.Size < c.Offset {
		return final(Failf(CodeTruncated, path, "the file is %d bytes, shorter than the %d already read", st.Size, c.Offset))
	}
	if c.Limit > 0 && st.Size-c.Start > c.Limit {
		return final(Failf(CodeScanLimit, path, "%d bytes after the anchor, more than the %d a scan reads", st.Size-c.Start, c.Limit))
	}
	r := bufio.NewReaderSize(io.NewSectionReader(f, c.Offset, st.Size-c.Offset), 64<<10)
	var long []byte // a line longer than the reader's buffer, assembled
	for {
		chunk, err := r.ReadSlice('\n')
		line := chunk
		if errors.Is(err, bufio.ErrBufferFull) || len(long) > 0 {
			if len(long)+len(chunk) > MaxLine {
				return final(Failf(CodeScanLimit, path, "the line starting at byte %d is longer than the %d bytes a scan holds", c.Offset, MaxLine))
			}
			long = append(long, chunk...)
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			line = long
		}
		if err == io.EOF {
			return c, nil // nothing, or a record being written, after the last '\n'
		}
		if err != nil {
			return c, Failf(CodeUnreadable, path, "%v", err)
		}
		end := c.Offset + int64(len(line))
		t := bytes.TrimSpace(line)
		switch {
		case len(t) == 0:
		case t[0] != '{' || t[len(t)-1] != '}':
			return final(Failf(CodeInvalidJSONL, path, "line ending at byte %d is not a JSON object", end))
		default:
			ok, err := match(line[:len(line)-1], end)
			var se *ScanError
			if errors.As(err, &se) {
				return final(se)
			}
			if err != nil {
				return c, err
			}
			if ok {
				c.Offset, c.Found = end, true
				return c, nil
			}
		}
		c.Offset, long = end, long[:0]
	}
}
