package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/clawconnect/clawconnect/gateway"
	"github.com/clawconnect/clawconnect/internal/config"
	"github.com/clawconnect/clawconnect/internal/settings"
	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/postgres"
	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	"github.com/clawconnect/clawconnect/internal/terminal/outbox"
	"github.com/clawconnect/clawconnect/taskapi"
)

// loadReasons is the slog handler doctor gives the module loader: it keeps
// why modules failed (errors) and what they said on stderr, so the verdict
// can say why instead of only that nothing registered.
type loadReasons struct {
	mu      sync.Mutex
	errs    []string
	stderr  []string
	dropped int
}

func (h *loadReasons) Enabled(context.Context, slog.Level) bool { return true }
func (h *loadReasons) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *loadReasons) WithGroup(string) slog.Handler            { return h }

// Handle keeps load errors and up to five stderr lines.
func (h *loadReasons) Handle(_ context.Context, r slog.Record) error {
	msg := strings.TrimPrefix(r.Message, "[agent-session] ")
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case r.Level >= slog.LevelError:
		h.errs = append(h.errs, msg)
	case r.Level == slog.LevelInfo && !strings.HasPrefix(r.Message, "[agent-session]"):
		if len(h.stderr) < 5 {
			h.stderr = append(h.stderr, truncate(msg, 200))
		} else {
			h.dropped++
		}
	}
	return nil
}

func (h *loadReasons) failed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.errs) > 0
}

// String lists the errors, then the stderr lines.
func (h *loadReasons) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	parts := append([]string(nil), h.errs...)
	if len(parts) == 0 {
		parts = append(parts, "no module described a usable runtime")
	}
	if len(h.stderr) > 0 {
		more := ""
		if h.dropped > 0 {
			more = fmt.Sprintf(" (and %d more)", h.dropped)
		}
		parts = append(parts, "stderr: "+strings.Join(h.stderr, " | ")+more)
	}
	return strings.Join(parts, "; ")
}

// verdict is one doctor finding.
type verdict struct {
	ok     bool
	area   string
	detail string
	fix    string
}

func newDoctorCmd(env Env) *cobra.Command {
	var (
		timeout time.Duration
		asJSON  bool
	)
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the configuration, the store, the gateways and the runtimes",
		Long: `Check everything the task bridge needs and print one verdict per check, with
the fix when something is wrong: the settings, the agent configuration, the
task store, that every agent's OpenClaw Gateway answers (a real handshake), the
registered agent-session runtimes and the HTTP authentication of "clawconnect
serve"; which process follows each open terminal Turn, failing when open Turns
have no live monitor host. With --json: {"ok": bool, "failed": n, "checks": [{"ok": bool,
"area": "settings|config|store|gateway …|runtimes|processes|terminal|http auth",
"detail": "...", "fix": "..."}]}, credentials redacted as in the text.

Exit codes: 0 every check passed, 1 at least one failed.`,
		Example: `  clawconnect doctor
  clawconnect doctor --json
  clawconnect doctor --timeout 15s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			vs := runDoctor(cmd.Context(), env, timeout)
			var failed int
			if asJSON {
				var err error
				if failed, err = printVerdictsJSON(env.Stdout, vs); err != nil {
					return err
				}
			} else {
				failed = printVerdicts(env.Stdout, vs)
			}
			if failed > 0 {
				return &ExitError{Code: ExitFailure, Err: fmt.Errorf("doctor: %d check(s) failed", failed)}
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Second, "how long each gateway may take to answer")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the verdicts as JSON")
	return cmd
}

func runDoctor(ctx context.Context, env Env, timeout time.Duration) []verdict {
	sv, serr := loadSettings(env)
	vs := settingsVerdicts(env, serr)
	reg, err := config.LoadRegistry(sv)
	switch {
	case errors.Is(err, config.ErrIncompleteEnv):
		vs = append(vs, verdict{area: "config", detail: "no agent configuration (" + config.AgentsPath(sv.Home) + " is missing): " + err.Error(), fix: configHint})
	case errors.Is(err, config.ErrNoConfig):
		vs = append(vs, verdict{area: "config", detail: "no agent configuration (" + config.AgentsPath(sv.Home) + " is missing and OPENCLAW_URL/OPENCLAW_PASSWORD are unset)", fix: configHint})
	case err != nil:
		vs = append(vs, verdict{area: "config", detail: err.Error(), fix: agentsFileFix(config.AgentsPath(sv.Home))})
	default:
		src := "the environment (OPENCLAW_URL)"
		if reg.Path != "" {
			src = reg.Path
		}
		vs = append(vs, verdict{ok: true, area: "config", detail: fmt.Sprintf("%d agent(s) from %s, default %s", len(reg.Agents), src, reg.Default)})
		for _, w := range reg.Warnings {
			vs = append(vs, verdict{ok: true, area: "config", detail: "warning: " + w})
		}
	}
	vs = append(vs, checkStore(ctx, sv)...)
	vs = append(vs, checkInotify()...)
	if reg != nil {
		for _, a := range reg.Agents {
			vs = append(vs, checkGateway(ctx, sv, a, timeout))
		}
	}
	why := &loadReasons{}
	_, names, stop := loadRuntimes(ctx, env, slog.New(why))
	stop()
	switch {
	case len(names) == 0 && sv.RuntimeModules != "":
		vs = append(vs, verdict{area: "runtimes", detail: runtimeModulesVar + " is set but no module registered a runtime: " + why.String(),
			fix: "Each entry must be an executable that answers the runtime-module protocol (describe); run it by hand and read its stderr."})
	case len(names) == 0:
		vs = append(vs, verdict{ok: true, area: "runtimes", detail: "no agent-session runtime registered (optional; set CLAWCONNECT_AGENT_SESSION_RUNTIME_MODULES to attach tasks to managed sessions)"})
	default:
		vs = append(vs, verdict{ok: true, area: "runtimes", detail: "registered: " + strings.Join(names, ", ")})
		if why.failed() {
			vs = append(vs, verdict{area: "runtimes", detail: "some modules failed: " + why.String(),
				fix: "Fix or remove the failing entries of " + runtimeModulesVar + "."})
		}
	}
	authn, err := config.NewAuthenticator(config.AuthFrom(sv))
	switch {
	case err != nil:
		vs = append(vs, verdict{area: "http auth", detail: err.Error(), fix: "Replace that token with a longer random one; serve refuses to start until then."})
	case authn.Required():
		vs = append(vs, verdict{ok: true, area: "http auth", detail: "serve requires a token (MCP_USER_TOKENS / MCP_USER_TOKENS_FILE / PUBLIC_MCP_PASS)"})
	case oauthFrom(sv).On:
		vs = append(vs, verdict{ok: true, area: "http auth", detail: "serve requires an access token of CLAWCONNECT_OAUTH_ISSUER (OAuth mode)"})
	default:
		vs = append(vs, verdict{ok: true, area: "http auth", detail: "serve is open (loopback only unless --allow-unauthenticated-remote); set MCP_USER_TOKENS to expose it"})
	}
	return append(vs, checkOAuth(ctx, sv)...)
}

// checkStore opens the store (as every process does, beside the others)
// and lists the live processes that share it and what each follows.
func checkStore(ctx context.Context, sv settings.Values) []verdict {
	var db store.Store
	var what string
	if u := sv.DatabaseURL; u != "" {
		p, err := postgres.Open(ctx, postgres.Options{URL: u})
		if err != nil {
			return []verdict{{area: "store", detail: err.Error(), fix: "Check that PostgreSQL runs and that CLAWCONNECT_DATABASE_URL's user may create tables."}}
		}
		db, what = p, "PostgreSQL reachable and migrated"
	} else {
		path := filepath.Join(sv.Home, sqlite.FileName)
		// The full integrity check first, read-only: it never writes the
		// file, whichever processes have it open.
		cctx, cancel := context.WithTimeout(ctx, doctorIntegrityTimeout)
		ierr := sqlite.CheckIntegrity(cctx, path)
		cancel()
		note := "integrity ok"
		switch {
		case errors.Is(ierr, sqlite.ErrCorrupt):
			return []verdict{{area: "store", detail: ierr.Error(), fix: "Stop clawconnect and recover the file as described; until then nothing is written to it."}}
		case errors.Is(ierr, sqlite.ErrCheckIncomplete):
			note = fmt.Sprintf("integrity check did not finish within %s", doctorIntegrityTimeout)
		case ierr != nil:
			note = "integrity not checked: " + ierr.Error()
		}
		s, err := sqlite.Open(ctx, sqlite.Options{Path: path})
		switch {
		case errors.Is(err, sqlite.ErrCorrupt):
			return []verdict{{area: "store", detail: err.Error(), fix: "Recover the file as described; until then nothing is written to it."}}
		case errors.Is(err, store.ErrIncompatible):
			return []verdict{{area: "store", detail: err.Error(), fix: "Move " + path + " aside (a newer build or another program wrote it), or set CLAWCONNECT_HOME to another directory."}}
		case errors.Is(err, store.ErrBusy):
			return []verdict{{area: "store", detail: err.Error(), fix: "Another clawconnect process kept the store's write lock; retry, and if it persists look for a hung process (ps aux | grep clawconnect)."}}
		case err != nil:
			return []verdict{{area: "store", detail: err.Error(), fix: "Make " + filepath.Dir(path) + " writable, or set CLAWCONNECT_HOME to a writable directory."}}
		}
		db, what = s, "SQLite at "+path+" (shared by every clawconnect process on this machine); "+note
	}
	defer db.Close()
	vs := []verdict{{ok: true, area: "store", detail: what}}
	vs = append(vs, listProcesses(ctx, db, time.Now())...)
	vs = append(vs, checkTerminalWork(ctx, db, hostLive(ctx, db), time.Now())...)
	return append(vs, listTerminalHosts(ctx, db, time.Now())...)
}

// processLister is the part of the store doctor reads.
type processLister interface {
	Processes(ctx context.Context) ([]store.Process, error)
	Close() error
}

// staleAfter is how old a heartbeat may be before doctor calls the process
// gone: two default leases (processes beat once per third of theirs).
const staleAfter = 60 * time.Second

// listProcesses is one verdict per process registered in the store: its
// role, pid and host, since when it runs, and the running tasks it follows.
func listProcesses(ctx context.Context, db processLister, now time.Time) []verdict {
	ps, err := db.Processes(ctx)
	if err != nil {
		return []verdict{{area: "processes", detail: err.Error(), fix: "The store answered but its process registry did not; retry."}}
	}
	if len(ps) == 0 {
		return []verdict{{ok: true, area: "processes", detail: "no clawconnect process follows tasks right now (serve and mcp register while they run)"}}
	}
	var vs []verdict
	for _, p := range ps {
		host, _, _ := strings.Cut(p.Host, "/")
		if host == "" {
			host, _, _ = strings.Cut(p.ID, "/")
		}
		age := now.Sub(time.UnixMilli(p.HeartbeatAt)).Round(time.Second)
		follows := "follows no running task"
		if n := len(p.Tasks); n > 0 {
			shown := p.Tasks[:min(n, 5)]
			follows = fmt.Sprintf("follows %d running task(s): %s", n, strings.Join(shown, ", "))
			if n > len(shown) {
				follows += ", …"
			}
		}
		detail := fmt.Sprintf("%s pid %d on %s, up since %s, last heartbeat %s ago; %s",
			p.Role, p.PID, host, time.UnixMilli(p.StartedAt).UTC().Format(time.RFC3339), age, follows)
		v := verdict{ok: true, area: "process", detail: detail}
		if age > staleAfter {
			v.detail += " (stale: it stopped beating; its tasks pass to another process when its leases expire)"
		}
		vs = append(vs, v)
	}
	return vs
}

// doctorIntegrityTimeout bounds doctor's full integrity check of the store.
const doctorIntegrityTimeout = time.Minute

func checkGateway(ctx context.Context, sv settings.Values, a taskapi.Agent, timeout time.Duration) verdict {
	area := "gateway " + a.ID
	opts := gateway.Options{URL: a.URL, Token: a.Password, Password: a.Password, HandshakeTimeout: timeout}
	opts.Headers, _ = gateway.ParseHeaders(sv.GatewayHeaders) // checked by settings.Load
	if !isLoopbackURL(a.URL) {
		dev, err := gateway.LoadOrCreateDevice(sv.Home)
		if err != nil {
			return verdict{area: area, detail: err.Error(), fix: "Make CLAWCONNECT_HOME writable so clawconnect can keep its device identity."}
		}
		opts.Device = dev
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := gateway.Dial(dctx, opts)
	if err != nil {
		fix := "Start the gateway (openclaw gateway run) and check the agent's url in agents.json or OPENCLAW_URL."
		var ce *gateway.ConnectError
		if errors.As(err, &ce) {
			fix = "The gateway refused the connect: check the agent's password in agents.json or OPENCLAW_PASSWORD."
		}
		return verdict{area: area, detail: a.URL + ": " + err.Error(), fix: fix}
	}
	defer c.Close()
	detail := a.URL + " answered the handshake (OpenClaw agent " + a.OpenClawAgentID + ")"
	if h := c.Hello(); h != nil && h.HasMethod(outbox.CallbackMethod) {
		detail += "; the ClawConnect plugin is loaded (" + outbox.CallbackMethod + ")"
	} else {
		detail += "; warning: the ClawConnect plugin is not loaded (no " + outbox.CallbackMethod +
			"), so terminal Turns cannot report back into OpenClaw sessions: on the gateway host run " +
			"`openclaw plugins install ./plugins/openclaw/plugin` in the ClawConnect repository, then restart the gateway (README: The OpenClaw plugin)"
	}
	return verdict{ok: true, area: area, detail: detail}
}

// isLoopbackURL reports whether a gateway URL points at this machine.
func isLoopbackURL(raw string) bool {
	host := ""
	if u, err := url.Parse(raw); err == nil {
		host = u.Hostname()
	}
	if host == "" {
		host, _, _ = net.SplitHostPort(raw)
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func printVerdicts(w io.Writer, vs []verdict) (failed int) {
	for _, v := range vs {
		mark := "[ok]  "
		if !v.ok {
			mark = "[FAIL]"
			failed++
		}
		// Details quote URLs and errors, which can carry credentials.
		fmt.Fprintf(w, "%s %-16s %s\n", mark, v.area, config.RedactText(v.detail))
		if v.fix != "" {
			fmt.Fprintf(w, "       %-16s fix: %s\n", "", config.RedactText(v.fix))
		}
	}
	return failed
}

// doctorJSON is what doctor --json prints.
type doctorJSON struct {
	OK     bool          `json:"ok"`
	Failed int           `json:"failed"`
	Checks []verdictJSON `json:"checks"`
}

// verdictJSON is one verdict of doctor --json.
type verdictJSON struct {
	OK     bool   `json:"ok"`
	Area   string `json:"area"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// printVerdictsJSON prints vs as doctorJSON (redacted as printVerdicts
// does) and returns how many failed.
func printVerdictsJSON(w io.Writer, vs []verdict) (int, error) {
	out := doctorJSON{Checks: make([]verdictJSON, 0, len(vs))}
	for _, v := range vs {
		if !v.ok {
			out.Failed++
		}
		out.Checks = append(out.Checks, verdictJSON{OK: v.ok, Area: v.area, Detail: config.RedactText(v.detail), Fix: config.RedactText(v.fix)})
	}
	out.OK = out.Failed == 0
	return out.Failed, printJSON(w, out)
}
