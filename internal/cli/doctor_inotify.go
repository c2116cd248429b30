package cli

import (
	"fmt"

	"github.com/clawconnect/clawconnect/internal/terminal/fswatch"
)

// checkInotify says how much of the user's inotify limits the user's
// processes hold (the kernel counts them per user, across processes). A
// terminal host follows every session file through one instance; one that
// finds no instance or watch free leaves its followers on the slow
// re-check, which this check and the host's log say. Nothing is said
// where /proc does not tell.
func checkInotify() []verdict {
	lim, err := fswatch.Limits()
	if err != nil {
		return nil
	}
	used, err := fswatch.UserUsage()
	if err != nil {
		return nil
	}
	return []verdict{inotifyVerdict(used, lim)}
}

// inotifyVerdict warns when either limit is at least nine tenths used and
// fails when one is used up: a host starting now could not watch.
func inotifyVerdict(used, lim fswatch.Usage) verdict {
	v := verdict{ok: true, area: "terminal", detail: fmt.Sprintf("inotify: this user's processes hold %d of %d instances (%s) and %d of %d watches (%s)",
		used.Instances, lim.Instances, fswatch.InstancesSysctl, used.Watches, lim.Watches, fswatch.WatchesSysctl)}
	var name string
	var n, most int
	switch {
	case lim.Instances > 0 && used.Instances*10 >= lim.Instances*9:
		name, n, most = fswatch.InstancesSysctl, used.Instances, lim.Instances
	case lim.Watches > 0 && used.Watches*10 >= lim.Watches*9:
		name, n, most = fswatch.WatchesSysctl, used.Watches, lim.Watches
	default:
		return v
	}
	fix := fmt.Sprintf("Raise it (sudo sysctl -w %s=%d; put it in /etc/sysctl.d to keep it), or stop the processes that hold them: without a free one, terminal hosts notice session-file changes only at their 10 s re-check.", name, 4*most)
	if n < most {
		v.detail = "warning: " + v.detail + "; " + name + " is nearly used up. " + fix
		return v
	}
	v.ok = false
	v.detail += "; " + name + " is used up"
	v.fix = fix
	return v
}
