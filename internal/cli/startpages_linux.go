package cli

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// releaseStartPages unmaps from this process the pages of the binary's
// read-only segments (code, read-only data, the function tables), so that
// only those it goes on using are faulted back in.
//
// Starting touches far more of the binary than a running mcp uses: the
// runtime walks its whole itab and function tables, 170 package inits run
// once, and opening the store runs SQLite's integrity check and migrations;
// the kernel maps each touched page with its neighbours (64 KiB at a
// time). Measured on an idle mcp with the store open: 19.5 MiB of the
// binary resident, 2 MiB of it still in use. The pages are clean and shared
// with the page cache (and every other clawconnect process), so nothing is
// written or lost: a page used again is mapped again from the cache (a
// minor fault). Writable segments (the binary's variables) are left alone.
func releaseStartPages() {
	exe, err := os.Executable()
	if err != nil {
		return
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// address perms offset dev inode path
		fs := strings.Fields(sc.Text())
		if len(fs) != 6 || fs[5] != exe || len(fs[1]) < 4 || fs[1][1] != '-' || fs[1][3] != 'p' {
			continue
		}
		lo, hi, ok := strings.Cut(fs[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if !ok || err1 != nil || err2 != nil || end <= start {
			continue
		}
		_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, uintptr(start), uintptr(end-start), syscall.MADV_DONTNEED)
	}
}
