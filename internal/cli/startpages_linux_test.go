package cli

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// rssFileKiB is this process's resident file-backed memory.
func rssFileKiB(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	t.Skip("no RssFile in /proc/self/status")
	return 0
}

// TestReleaseStartPages: the binary's read-only pages this process
// touched are no longer resident after releaseStartPages, and the process
// goes on running (they are mapped again from the page cache on use).
func TestReleaseStartPages(t *testing.T) {
	before := rssFileKiB(t)
	releaseStartPages()
	after := rssFileKiB(t)
	t.Logf("RssFile %d KiB -> %d KiB", before, after)
	if after >= before/2 {
		t.Fatalf("RssFile %d KiB before, %d KiB after releasing the start pages; want under half", before, after)
	}
}
