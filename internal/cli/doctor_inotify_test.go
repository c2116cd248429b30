package cli

import (
	"strings"
	"testing"

	"github.com/clawconnect/clawconnect/internal/terminal/fswatch"
)

func TestInotifyVerdict(t *testing.T) {
	t.Parallel()
	lim := fswatch.Usage{Instances: 128, Watches: 8192}
	for _, tc := range []struct {
		name string
		used fswatch.Usage
		ok   bool
		fix  string
	}{
		{"plenty", fswatch.Usage{Instances: 3, Watches: 100}, true, ""},
		// Nearly out is a warning that names the sysctl in its detail.
		{"instances nearly out", fswatch.Usage{Instances: 120, Watches: 100}, true, ""},
		{"instances out", fswatch.Usage{Instances: 128, Watches: 100}, false, "sysctl -w fs.inotify.max_user_instances=512"},
		{"watches out", fswatch.Usage{Instances: 3, Watches: 8192}, false, "sysctl -w fs.inotify.max_user_watches=32768"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := inotifyVerdict(tc.used, lim)
			if v.ok != tc.ok || !strings.Contains(v.fix, tc.fix) || !strings.Contains(v.detail, "inotify: ") {
				t.Fatalf("verdict = %+v, want ok %v with a fix naming %q", v, tc.ok, tc.fix)
			}
			if warned := strings.HasPrefix(v.detail, "warning: "); warned != (tc.name == "instances nearly out") || warned && !strings.Contains(v.detail, "sysctl -w fs.inotify.max_user_instances=512") {
				t.Fatalf("detail = %q", v.detail)
			}
		})
	}
}
