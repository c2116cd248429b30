package cli

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// binaryPages returns the address ranges of this binary's read-only
// mappings and their resident KiB (from /proc/self/smaps).
func binaryPages(t *testing.T) (ranges [][2]uint64, rssKiB int) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	ours := false
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) == 6 && strings.Contains(fs[0], "-") {
			ours = fs[5] == exe && fs[1][1] == '-'
			if ours {
				lo, hi, _ := strings.Cut(fs[0], "-")
				a, _ := strconv.ParseUint(lo, 16, 64)
				b, _ := strconv.ParseUint(hi, 16, 64)
				ranges = append(ranges, [2]uint64{a, b})
			}
			continue
		}
		if len(fs) == 1 || (len(fs) >= 5 && strings.Contains(fs[0], "-")) {
			ours = false // a mapping of another file
			continue
		}
		if ours && fs[0] == "Rss:" {
			n, _ := strconv.Atoi(fs[1])
			rssKiB += n
		}
	}
	return ranges, rssKiB
}

// TestReleaseStartPages: once every page of the binary's read-only
// mappings is resident, releaseStartPages leaves few of them so, and the
// process goes on running (they are mapped again from the page cache on
// use).
func TestReleaseStartPages(t *testing.T) {
	ranges, _ := binaryPages(t)
	if len(ranges) == 0 {
		t.Skip("no read-only mapping of the binary found")
	}
	mem, err := os.Open("/proc/self/mem")
	if err != nil {
		t.Skipf("no /proc/self/mem: %v", err)
	}
	defer mem.Close()
	buf := make([]byte, 1<<20)
	for _, r := range ranges { // reading them through /proc maps them all
		for off := r[0]; off < r[1]; off += uint64(len(buf)) {
			_, _ = mem.ReadAt(buf[:min(uint64(len(buf)), r[1]-off)], int64(off))
		}
	}
	_, before := binaryPages(t)
	releaseStartPages()
	_, after := binaryPages(t)
	t.Logf("binary's read-only pages resident: %d KiB -> %d KiB", before, after)
	if after > before/4 {
		t.Fatalf("%d KiB of the binary resident before, %d KiB after releasing the start pages; want under a quarter", before, after)
	}
}
