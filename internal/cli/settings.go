package cli

import (
	"fmt"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/clawconnect/clawconnect/internal/config"
	"github.com/clawconnect/clawconnect/internal/settings"
	"github.com/clawconnect/clawconnect/server"
)

// settingsOf returns the effective settings of env (internal/settings).
// A bad value is left at its default here: Run refuses to start a command
// while any value is bad (checkSettings), except help, version and doctor,
// so no command runs on one.
func settingsOf(env Env) settings.Values {
	v, _ := loadSettings(env)
	return v
}

// loadedSettings is the one reading of the settings of a Run: mcp asked
// for them five times before it answered initialize (the check, the log
// level, the agents, the terminal tools, the server's options).
type loadedSettings struct {
	once sync.Once
	v    settings.Values
	err  error
}

// loadSettings is settings.Load over env's Getenv, read once per Run.
// The Values it returns share their slices: callers only read them.
func loadSettings(env Env) (settings.Values, error) {
	l := env.settings
	if l == nil {
		return settings.Load(getenv(env))
	}
	l.once.Do(func() { l.v, l.err = settings.Load(getenv(env)) })
	return l.v, l.err
}

// skipsSettingsCheck marks the commands that run whatever the settings:
// they print help or the version, or report the settings (doctor).
const skipsSettingsCheck = "clawconnect/skip-settings-check"

// checkSettings is the root's PersistentPreRunE: every bad setting, named
// with what is wrong and what to do, fails the command with ExitConfig
// before it does anything.
func checkSettings(env Env) func(cmd *cobra.Command, _ []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		if cmd.Annotations[skipsSettingsCheck] != "" || !cmd.HasParent() {
			return nil // the root alone prints its help
		}
		if _, err := loadSettings(env); err != nil {
			return &ExitError{Code: ExitConfig, Err: fmt.Errorf("%w\n(clawconnect doctor lists the settings in effect)", err)}
		}
		return nil
	}
}

// skipSettingsCheck marks cmd as running whatever the settings.
func skipSettingsCheck(cmd *cobra.Command) *cobra.Command {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[skipsSettingsCheck] = "1"
	return cmd
}

// serverOptions is the part of server.Options the settings set, shared by
// the stdio (mcp) and HTTP (serve) servers.
func serverOptions(sv settings.Values) server.Options {
	t := config.TimeoutsFrom(sv)
	return server.Options{
		CheckWait: t.CheckWait, CheckMaxWait: t.CheckMaxWait, AllowedOrigins: sv.AllowedOrigins, SharedTaskView: sv.SharedTaskView,
		TrustedProxies: sv.TrustedProxies, TaskRetention: sv.Retention, AppForAll: sv.AppForAll,
		Version: version(), Build: sv.BuildSHA,
	}
}

// settingsVerdicts is doctor's report on the settings: one failed verdict
// per bad variable, else the variables set (secrets redacted).
func settingsVerdicts(env Env, err error) []verdict {
	if bad := settings.Problems(err); len(bad) > 0 {
		vs := make([]verdict, 0, len(bad))
		for _, e := range bad {
			vs = append(vs, verdict{area: "settings", detail: e.Name + "=" + e.Value + ": " + e.Problem, fix: capitalize(e.Fix) + "."})
		}
		return vs
	}
	set := settings.Set(getenv(env))
	if len(set) == 0 {
		return []verdict{{ok: true, area: "settings", detail: "every setting at its default (see the README's Configuration)"}}
	}
	parts := make([]string, len(set))
	for i, e := range set {
		parts[i] = e.Name + "=" + e.Value
	}
	return []verdict{{ok: true, area: "settings", detail: fmt.Sprintf("%d set, the rest default: %s", len(set), strings.Join(parts, ", "))}}
}

// capitalize upper-cases the first letter of an ASCII sentence.
func capitalize(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
