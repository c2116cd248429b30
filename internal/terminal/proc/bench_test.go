package proc

import (
	"os"
	"testing"
)

// BenchmarkSnapshot reads every process of this machine; the parts show
// what one process costs: its stat, its cmdline.
func BenchmarkSnapshot(b *testing.B) {
	requireLinuxB(b)
	tab, err := Snapshot()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("snapshot", func(b *testing.B) {
		b.ReportMetric(float64(tab.Len()), "procs")
		for b.Loop() {
			if _, err := Snapshot(); err != nil {
				b.Fatal(err)
			}
		}
	})
	pid := os.Getpid()
	b.Run("stat", func(b *testing.B) {
		for b.Loop() {
			if _, err := (FS{}).ReadStat(pid); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cmdline", func(b *testing.B) {
		for b.Loop() {
			if _, err := (FS{}).readArgv(pid); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("readdir", func(b *testing.B) {
		for b.Loop() {
			if _, err := os.ReadDir("/proc"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("read", func(b *testing.B) {
		for b.Loop() {
			if _, err := Read(pid); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func requireLinuxB(b *testing.B) {
	b.Helper()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		b.Skip("reads Linux /proc")
	}
}
