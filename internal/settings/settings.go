// Package settings declares every environment variable ClawConnect reads,
// once each (name, default, one-line doc, parser), and reads them all from
// one getenv into Values, which internal/cli turns into the options of the
// packages it wires.
package settings

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/netip"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Values holds the effective value of every setting. Load fills it from an
// environment, Defaults from none; the zero Values is not a valid
// configuration (its durations are zero).
type Values struct {
	// Home is the state directory: CLAWCONNECT_HOME, else
	// $HOME/.clawconnect.
	Home string
	// UserHome is $HOME, the base of the default Home.
	UserHome string
	// TMUX is the caller's $TMUX: the tmux server it names is searched too.
	TMUX string

	// OpenClawURL, OpenClawPassword, OpenClawAgentID and AgentAlias are the
	// single-agent configuration used when there is no agents.json.
	OpenClawURL, OpenClawPassword, OpenClawAgentID, AgentAlias string
	// GatewayToken is the gateway token of the gateway and exec commands.
	GatewayToken string
	// GatewayHeaders is the JSON object of extra WebSocket upgrade headers,
	// checked to be one (gateway.ParseHeaders reads it); "" means none.
	GatewayHeaders string
	// DatabaseURL is a postgres:// URL of a shared store; "" means the
	// SQLite file under Home.
	DatabaseURL string
	// RuntimeModules lists the agent-session runtime modules to load.
	RuntimeModules string
	// CallTimeout bounds each call into an agent-session runtime.
	CallTimeout time.Duration

	// UserTokens, TokensFile and PublicPass are the HTTP credentials of
	// serve.
	UserTokens, TokensFile, PublicPass string
	// SharedTaskView lets every HTTP credential see every task.
	SharedTaskView bool
	// AppForAll shows the task center (the MCP App) to every client, also
	// one that does not declare MCP Apps.
	AppForAll bool
	// AllowedOrigins are the browser origins serve accepts besides its own.
	AllowedOrigins []string
	// TrustedProxies are the reverse proxies whose X-Forwarded-For and
	// X-Forwarded-Proto serve believes.
	TrustedProxies []netip.Prefix
	// OAuthIssuer turns on serve's OAuth mode: the issuer identifier of
	// the authorization server whose access tokens are accepted.
	OAuthIssuer string
	// OAuthResource is the canonical URL of /mcp as clients reach it.
	OAuthResource string
	// OAuthAudiences are accepted aud values besides OAuthResource.
	OAuthAudiences []string
	// OAuthScopes are the scopes every token must carry.
	OAuthScopes []string
	// OAuthUserClaim and OAuthGroupsClaim name the claims of the user and
	// of their groups; OAuthAllowedGroups, when set, admits only those.
	OAuthUserClaim, OAuthGroupsClaim string
	OAuthAllowedGroups               []string
	// OAuthIntrospect sends opaque tokens to the issuer's introspection
	// endpoint.
	OAuthIntrospect bool
	// OAuthClientID and OAuthClientSecret are serve's own client at the
	// issuer: the dashboard's sign-in, and introspection.
	OAuthClientID, OAuthClientSecret string
	// OAuthClockSkew is the tolerance on a token's exp and nbf.
	OAuthClockSkew time.Duration
	// OAuthStaticTokens keeps the personal tokens and PUBLIC_MCP_PASS
	// working beside access tokens.
	OAuthStaticTokens bool
	// PassParam is whether ?pass= is accepted: nil means the default, on
	// without OAuth and off with it.
	PassParam *bool
	// InsecureCookie lets serve send the dashboard's session cookie
	// without Secure over plain HTTP beyond loopback.
	InsecureCookie bool

	// The timings of the task service.
	ChatTimeout, RecoveryTimeout, RecoveryIdleTimeout, RecoveryInterval time.Duration
	CheckWait, CheckMaxWait, PollDebounce                               time.Duration
	ReconcileQuiet, ReconcileSampleInterval                             time.Duration
	LazyRecheckSpacing, LazyRecheckInterval, Lease, Retention           time.Duration
	// LogEntryTextMax caps the text of each task log entry, in characters.
	LogEntryTextMax int

	// LogLevel is the level of the stderr log.
	LogLevel slog.Level
	// ClaudeBin and CodexBin are the CLIs of exec; "" means found on PATH.
	ClaudeBin, CodexBin string
	// ExecPassEnv are extra variable names exec passes to a CLI runtime
	// when the embedder gave no full environment.
	ExecPassEnv []string

	// TmuxSockets are extra tmux server sockets searched for agent panes.
	TmuxSockets []string
	// TmuxDefaultServer includes tmux's default server in the search.
	TmuxDefaultServer bool
	// TerminalInactivity and TerminalHard stall a terminal Turn;
	// TerminalRecheck is each monitor's slow safety re-check.
	TerminalInactivity, TerminalHard, TerminalRecheck time.Duration
	// TerminalTools adds the terminal tools to the MCP servers.
	TerminalTools bool
	// TerminalUnproven lets terminal Turns go to agent versions without
	// recorded goldens (marked unproven).
	TerminalUnproven bool
	// TerminalAutoApproveFile is the auto-approve rules file; "" for none.
	TerminalAutoApproveFile string
	// MCPTerminalHost makes an mcp with the terminal tools a monitor host.
	MCPTerminalHost bool
	// TerminalHost names this machine in terminal ids on a shared
	// PostgreSQL store; "" means its host name.
	TerminalHost string
	// TerminalHostLease is a terminal monitor host's lease: how long a
	// host that stops renewing keeps its Turns (on several machines, the
	// bound before they stall host_lost).
	TerminalHostLease time.Duration

	// BuildSHA is the build reported by get_connection_info.
	BuildSHA string
}

// Setting is one declared environment variable.
type Setting struct {
	// Name is the variable's name.
	Name string
	// Default is the default as the README shows it ("–" for none).
	Default string
	// Doc is the one-line meaning shown in the README.
	Doc string
	// Example is a valid value other than the default.
	Example string
	// Secret marks a credential: its value never reaches a log, an error
	// or doctor's output.
	Secret bool
	// Ambient marks a variable set by the system rather than for
	// ClawConnect (HOME, TMUX): read through the registry, not listed in
	// the README's table.
	Ambient bool
	// apply sets the setting's field from raw; "" sets the default.
	apply func(v *Values, raw string) error
}

// Error is a setting whose value cannot be used.
type Error struct {
	// Name is the variable.
	Name string
	// Value is the value as given, or "(redacted)" for a secret.
	Value string
	// Problem says what is wrong; Fix what to do.
	Problem, Fix string
}

// Error names the variable, what is wrong and what to do.
func (e *Error) Error() string {
	return fmt.Sprintf("%s=%s: %s; %s", e.Name, e.Value, e.Problem, e.Fix)
}

// problem is a parser's complaint before Load names the variable.
type problem struct{ what, fix string }

func (p *problem) Error() string { return p.what }

// All returns every declared setting in the order of the README table.
func All() []Setting { return slices.Clone(table) }

// Lookup returns the declared setting name.
func Lookup(name string) (Setting, bool) {
	i := slices.IndexFunc(table, func(s Setting) bool { return s.Name == name })
	if i < 0 {
		return Setting{}, false
	}
	return table[i], true
}

// Defaults returns the values of an empty environment.
func Defaults() Values {
	v, _ := Load(nil)
	return v
}

// Load reads every setting through getenv (nil means an empty
// environment). A value that cannot be used leaves that setting at its
// default and is reported in the error, which joins one *Error per bad
// variable; the Values returned are otherwise complete, so a caller may
// still use them (doctor does) after reporting.
func Load(getenv func(string) string) (Values, error) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	var v Values
	var errs []error
	for _, s := range table {
		raw := strings.TrimSpace(getenv(s.Name))
		err := s.apply(&v, raw)
		if err == nil {
			continue
		}
		_ = s.apply(&v, "")
		shown := strconv.Quote(raw)
		if s.Secret {
			shown = "(redacted)"
		}
		var p *problem
		if errors.As(err, &p) {
			errs = append(errs, &Error{Name: s.Name, Value: shown, Problem: p.what, Fix: p.fix})
		} else {
			errs = append(errs, &Error{Name: s.Name, Value: shown, Problem: err.Error(), Fix: "correct it or unset it"})
		}
	}
	if v.Home == "" {
		v.Home = filepath.Join(v.UserHome, ".clawconnect")
	}
	if len(errs) > 0 {
		return v, fmt.Errorf("load settings: %w", errors.Join(errs...))
	}
	return v, nil
}

// Problems returns the *Error of each bad variable reported in err (an
// error of Load); nil for nil or any other error.
func Problems(err error) []*Error {
	var out []*Error
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case nil:
		case *Error:
			out = append(out, e)
		case interface{ Unwrap() []error }:
			for _, c := range e.Unwrap() {
				walk(c)
			}
		case interface{ Unwrap() error }:
			walk(e.Unwrap())
		}
	}
	walk(err)
	return out
}

// Entry is one variable set in an environment, for display.
type Entry struct {
	// Name is the variable.
	Name string
	// Value is its value, or "(redacted)" for a secret.
	Value string
}

// Set lists the declared variables getenv sets (non-empty), in table
// order, secrets redacted: what doctor shows as the effective settings
// besides the defaults.
func Set(getenv func(string) string) []Entry {
	if getenv == nil {
		return nil
	}
	var out []Entry
	for _, s := range table {
		raw := strings.TrimSpace(getenv(s.Name))
		if raw == "" || s.Ambient {
			continue
		}
		if s.Secret {
			raw = "(redacted)"
		}
		out = append(out, Entry{Name: s.Name, Value: raw})
	}
	return out
}

// MarkdownTable renders the README's table of variables (every
// non-ambient setting, one row each).
func MarkdownTable() string {
	var b strings.Builder
	b.WriteString("| Variable | Default | Meaning |\n|---|---|---|\n")
	for _, s := range table {
		if s.Ambient {
			continue
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", s.Name, s.Default, s.Doc)
	}
	return b.String()
}

// The constructors below declare one setting each: the default is given
// once, as the typed value the field gets when the variable is unset.

// maxDuration bounds a duration setting: ten years.
const maxDuration = 10 * 365 * 24 * time.Hour

func millis(name string, def time.Duration, field func(*Values) *time.Duration, doc string) Setting {
	return Setting{Name: name, Default: showMillis(def), Doc: doc, Example: strconv.FormatInt(def.Milliseconds()+1000, 10),
		apply: func(v *Values, raw string) error {
			if raw == "" {
				*field(v) = def
				return nil
			}
			f, err := strconv.ParseFloat(raw, 64)
			if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
				return &problem{"not a number of milliseconds", "give a whole number of milliseconds, e.g. " + strconv.FormatInt(def.Milliseconds(), 10) + " (the default), or unset it"}
			}
			d := time.Duration(f * float64(time.Millisecond))
			if f <= 0 || d < time.Millisecond || f*float64(time.Millisecond) > float64(maxDuration) {
				return &problem{"out of range", fmt.Sprintf("give between 1 and %d milliseconds; unset it for the default %d", maxDuration.Milliseconds(), def.Milliseconds())}
			}
			*field(v) = d
			return nil
		}}
}

// showMillis is a default in milliseconds with the unit a reader thinks in.
// It runs for the table at every start, so it concatenates rather than
// formats: fmt.Sprintf made it ~0.03 ms of each (perf, 60 starts of mcp).
func showMillis(d time.Duration) string {
	ms := strconv.FormatInt(d.Milliseconds(), 10)
	in := func(unit time.Duration, name string) string {
		return ms + " (" + strconv.FormatInt(int64(d/unit), 10) + " " + name + ")"
	}
	switch {
	case d >= 24*time.Hour && d%(24*time.Hour) == 0:
		return in(24*time.Hour, "days")
	case d >= time.Hour && d%time.Hour == 0:
		return in(time.Hour, "h")
	case d >= time.Minute && d%time.Minute == 0:
		return in(time.Minute, "min")
	}
	return ms
}

func integer(name string, def, lo, hi int, field func(*Values) *int, doc string) Setting {
	return Setting{Name: name, Default: strconv.Itoa(def), Doc: doc, Example: strconv.Itoa(def + 1),
		apply: func(v *Values, raw string) error {
			if raw == "" {
				*field(v) = def
				return nil
			}
			n, err := strconv.Atoi(raw)
			if err != nil || n < lo || n > hi {
				return &problem{"not a whole number in range", fmt.Sprintf("give a whole number between %d and %d, or unset it for %d", lo, hi, def)}
			}
			*field(v) = n
			return nil
		}}
}

func boolean(name string, def bool, field func(*Values) *bool, doc string) Setting {
	show, example := "off", "1"
	if def {
		show, example = "on", "off"
	}
	return Setting{Name: name, Default: show, Doc: doc, Example: example,
		apply: func(v *Values, raw string) error {
			switch strings.ToLower(raw) {
			case "":
				*field(v) = def
			case "1", "on", "true", "yes":
				*field(v) = true
			case "0", "off", "false", "no":
				*field(v) = false
			default:
				return &problem{"not a switch", "give 1, on, true or yes to turn it on, 0, off, false or no to turn it off"}
			}
			return nil
		}}
}

// text declares a free-form string; check (optional) validates a set value.
func text(name, def, show, example string, field func(*Values) *string, check func(string) error, doc string) Setting {
	return Setting{Name: name, Default: show, Doc: doc, Example: example,
		apply: func(v *Values, raw string) error {
			if raw == "" {
				*field(v) = def
				return nil
			}
			if check != nil {
				if err := check(raw); err != nil {
					return err
				}
			}
			*field(v) = raw
			return nil
		}}
}

// atLeast refuses a duration setting below lo.
func atLeast(s Setting, lo time.Duration, field func(*Values) *time.Duration) Setting {
	apply := s.apply
	s.apply = func(v *Values, raw string) error {
		if err := apply(v, raw); err != nil {
			return err
		}
		if *field(v) < lo {
			return &problem{"below the minimum", fmt.Sprintf("give at least %d milliseconds, or unset it for the default", lo.Milliseconds())}
		}
		return nil
	}
	return s
}

// checkHostName accepts a terminal host name as terminal ids carry it.
func checkHostName(h string) error {
	if len(h) > 253 {
		return &problem{"longer than 253 characters", "give a shorter host name, or unset it for the machine's own"}
	}
	for i, c := range h {
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '-' && c != '_') {
			return &problem{fmt.Sprintf("%q at byte %d is not allowed in a host name", c, i),
				"use letters, digits, '.', '-' and '_', starting with a letter or digit"}
		}
	}
	return nil
}

func secret(s Setting) Setting { s.Secret = true; return s }

func ambient(s Setting) Setting { s.Ambient = true; return s }

// list declares a list split at commas (and at spaces when spaces is set).
func list(name, example string, spaces bool, field func(*Values) *[]string, doc string) Setting {
	return Setting{Name: name, Default: "–", Doc: doc, Example: example,
		apply: func(v *Values, raw string) error {
			*field(v) = strings.FieldsFunc(raw, func(r rune) bool { return r == ',' || (spaces && r == ' ') })
			for i, e := range *field(v) {
				(*field(v))[i] = strings.TrimSpace(e)
			}
			*field(v) = slices.DeleteFunc(*field(v), func(e string) bool { return e == "" })
			if len(*field(v)) == 0 {
				*field(v) = nil
			}
			return nil
		}}
}

// httpURL checks an absolute http(s) URL without query or fragment; what
// names the setting's meaning in the fix.
func httpURL(example string) func(string) error {
	return func(raw string) error {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") || u.RawQuery != "" || u.Fragment != "" {
			return &problem{"not an absolute http(s) URL without query or fragment", "give the full URL, e.g. " + example}
		}
		return nil
	}
}

// passParam parses CLAWCONNECT_PASS_PARAM: unset is the default (nil).
func passParam(v *Values, raw string) error {
	switch strings.ToLower(raw) {
	case "":
		v.PassParam = nil
	case "1", "on", "true", "yes":
		on := true
		v.PassParam = &on
	case "0", "off", "false", "no":
		off := false
		v.PassParam = &off
	default:
		return &problem{"not a switch", "give 1, on, true or yes to accept ?pass=, 0, off, false or no to refuse it, or unset it for the default"}
	}
	return nil
}

func absolutePath(raw string) error {
	if !filepath.IsAbs(raw) {
		return &problem{"not an absolute path", "give an absolute directory, e.g. /srv/clawconnect (a relative one would change with the working directory)"}
	}
	return nil
}

func gatewayURL(raw string) error {
	u := raw
	if !strings.Contains(u, "://") {
		u = "ws://" + u
	}
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		return &problem{"not a URL with a host", "give the gateway's WebSocket URL, e.g. ws://127.0.0.1:18789"}
	}
	switch strings.ToLower(p.Scheme) {
	case "ws", "wss", "http", "https":
		return nil
	}
	return &problem{"unsupported scheme " + strconv.Quote(p.Scheme), "give a ws://, wss://, http:// or https:// URL, e.g. ws://127.0.0.1:18789"}
}

func postgresURL(raw string) error {
	if !strings.HasPrefix(raw, "postgres://") && !strings.HasPrefix(raw, "postgresql://") {
		return &problem{"not a postgres:// or postgresql:// URL", "give the database's postgres:// URL (e.g. postgres://clawconnect@db.example/clawconnect), or unset it to use the embedded SQLite store"}
	}
	if _, err := url.Parse(raw); err != nil {
		return &problem{"not a valid URL", "check its escaping (percent-encode special characters in the password)"}
	}
	return nil
}

func jsonObject(raw string) error {
	var m map[string]any
	if err := json.Unmarshal([]byte(raw), &m); err != nil || m == nil {
		return &problem{"not a JSON object", `give a JSON object of header names to string values, e.g. {"cf-access-client-id":"..."}`}
	}
	return nil
}

// prefixes parses CLAWCONNECT_TRUSTED_PROXIES: addresses and CIDR ranges,
// separated by commas or spaces.
func prefixes(v *Values, raw string) error {
	v.TrustedProxies = nil
	for _, f := range strings.FieldsFunc(raw, func(r rune) bool { return r == ',' || r == ' ' }) {
		p, err := netip.ParsePrefix(f)
		if err != nil {
			a, aerr := netip.ParseAddr(f)
			if aerr != nil {
				return &problem{strconv.Quote(f) + " is not an IP address or CIDR range", "list the proxies' addresses, e.g. 127.0.0.1,10.0.0.0/8 (no host names)"}
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		v.TrustedProxies = append(v.TrustedProxies, p.Masked())
	}
	return nil
}

func logLevel(v *Values, raw string) error {
	switch strings.ToLower(raw) {
	case "", "warn", "warning":
		v.LogLevel = slog.LevelWarn
	case "debug":
		v.LogLevel = slog.LevelDebug
	case "info":
		v.LogLevel = slog.LevelInfo
	case "error":
		v.LogLevel = slog.LevelError
	default:
		return &problem{"not a log level", "give debug, info, warn or error"}
	}
	return nil
}

// table is the registry: every variable ClawConnect reads, in README order.
// It is never modified.
var table = []Setting{
	text("CLAWCONNECT_HOME", "", "`~/.clawconnect`", "/srv/clawconnect", func(v *Values) *string { return &v.Home }, absolutePath,
		"agents.json, the SQLite store `clawconnect.db`, device key, payloads"),
	ambient(text("HOME", "", "–", "/home/other", func(v *Values) *string { return &v.UserHome }, nil, "the user's home, base of the default CLAWCONNECT_HOME")),
	ambient(text("TMUX", "", "–", "/tmp/tmux-1000/default,1,0", func(v *Values) *string { return &v.TMUX }, nil, "set by tmux: the caller's server is searched too")),
	text("OPENCLAW_URL", "", "–", "ws://127.0.0.1:18789", func(v *Values) *string { return &v.OpenClawURL }, gatewayURL,
		"gateway URL of the single-agent configuration used when there is no agents.json (and of the `gateway` and `exec` commands)"),
	secret(text("OPENCLAW_PASSWORD", "", "–", "s3cret", func(v *Values) *string { return &v.OpenClawPassword }, nil,
		"that gateway's password")),
	text("OPENCLAW_AGENT_ID", "main", "`main`", "ops", func(v *Values) *string { return &v.OpenClawAgentID }, nil,
		"the OpenClaw agent of that configuration"),
	text("CLAWCONNECT_AGENT_ALIAS", "", "the agent id", "helper", func(v *Values) *string { return &v.AgentAlias }, nil,
		"alias of that agent"),
	secret(text("OPENCLAW_GATEWAY_TOKEN", "", "–", "tok3n", func(v *Values) *string { return &v.GatewayToken }, nil,
		"gateway token (`gateway` and `exec` commands)")),
	secret(text("CLAWCONNECT_GATEWAY_HEADERS", "", "–", `{"x-extra":"1"}`, func(v *Values) *string { return &v.GatewayHeaders }, jsonObject,
		"JSON object of extra WebSocket upgrade headers")),
	secret(text("CLAWCONNECT_DATABASE_URL", "", "–", "postgres://cc:pw@127.0.0.1:5432/cc", func(v *Values) *string { return &v.DatabaseURL }, postgresURL,
		"a `postgres://` URL: share tasks between several `serve` replicas")),
	text("CLAWCONNECT_AGENT_SESSION_RUNTIME_MODULES", "", "–", "/usr/local/bin/my-runtime", func(v *Values) *string { return &v.RuntimeModules }, nil,
		"runtime modules to load ([protocol](docs/runtime-modules.md))"),
	millis("AGENT_SESSION_CALL_TIMEOUT_MS", 60*time.Second, func(v *Values) *time.Duration { return &v.CallTimeout },
		"deadline of each call into an agent-session runtime"),
	secret(text("MCP_USER_TOKENS", "", "–", "ana:9f3c2b7e41d05a68", func(v *Values) *string { return &v.UserTokens }, nil,
		"personal HTTP tokens of `serve`: `Name:token,...`, each token at least 16 characters")),
	text("MCP_USER_TOKENS_FILE", "", "–", "/etc/clawconnect/tokens.json", func(v *Values) *string { return &v.TokensFile }, nil,
		"a JSON file of personal tokens (at least 16 characters each), re-read when it changes"),
	secret(text("PUBLIC_MCP_PASS", "", "–", "shared-5b1e8c0d7a2f", func(v *Values) *string { return &v.PublicPass }, nil,
		"a shared HTTP password (one identity), at least 16 characters")),
	boolean("CLAWCONNECT_SHARED_TASK_VIEW", false, func(v *Values) *bool { return &v.SharedTaskView },
		"`1`: a team view in which every HTTP credential sees and controls every task and session. Off, a personal token (and the shared `PUBLIC_MCP_PASS`, as one identity) sees only its own; a caller without a credential sees all"),
	boolean("ENABLE_CHATGPT_UI_WIDGET", false, func(v *Values) *bool { return &v.AppForAll },
		"`true`: show the task center (the MCP App `ui://clawconnect/task-center-v1.html`) to every MCP client, also one that does not declare MCP Apps, as ChatGPT's Apps SDK does not. Off, only a client that declares the `io.modelcontextprotocol/ui` extension sees it; every other one sees the tools as without it"),
	list("CLAWCONNECT_ALLOWED_ORIGINS", "http://localhost:5173", false, func(v *Values) *[]string { return &v.AllowedOrigins },
		"browser origins (`http://localhost:5173,...`) that may call `serve`'s `/mcp` besides its own; any other `Origin` gets 403. `*` allows all, only when tokens are required. On a loopback `--addr` their host names are also accepted in `Host` (a local proxy), besides loopback names; any other `Host` gets 403"),
	{Name: "CLAWCONNECT_TRUSTED_PROXIES", Default: "–", Example: "127.0.0.1,10.0.0.0/8", apply: prefixes,
		Doc: "addresses or CIDR ranges of the reverse proxies in front of `serve` whose `X-Forwarded-For` (the client's address, for the sign-in backoff) and `X-Forwarded-Proto: https` (the session cookie gets `Secure`) are believed; others' are ignored"},
	{Name: "CLAWCONNECT_PASS_PARAM", Default: "on; off with `CLAWCONNECT_OAUTH_ISSUER`", Example: "off", apply: passParam,
		Doc: "whether `serve` accepts a credential as `?pass=` in the URL, where proxy and browser logs keep it; `off` takes credentials only from `Authorization: Bearer`"},
	text("CLAWCONNECT_OAUTH_ISSUER", "", "–", "https://login.example.com/realms/team", func(v *Values) *string { return &v.OAuthIssuer }, httpURL("https://login.example.com/realms/team"),
		"OAuth mode: the issuer identifier of the authorization server whose access tokens `serve` accepts on `/mcp` and the dashboard, exactly as its metadata spells it (see [Remote access with your identity provider](#remote-access-with-your-identity-provider))"),
	text("CLAWCONNECT_OAUTH_RESOURCE", "", "–", "https://mcp.example.com/mcp", func(v *Values) *string { return &v.OAuthResource }, httpURL("https://mcp.example.com/mcp"),
		"OAuth mode: the canonical URL of `/mcp` as clients reach it; the audience tokens must carry, and the `resource` of `/.well-known/oauth-protected-resource`"),
	list("CLAWCONNECT_OAUTH_AUDIENCES", "clawconnect", false, func(v *Values) *[]string { return &v.OAuthAudiences },
		"other `aud` values accepted besides `CLAWCONNECT_OAUTH_RESOURCE` (comma-separated), for a provider that names the resource otherwise"),
	list("CLAWCONNECT_OAUTH_SCOPES", "mcp", true, func(v *Values) *[]string { return &v.OAuthScopes },
		"scopes every access token must carry (comma- or space-separated); a token without one is answered 403 `insufficient_scope`"),
	text("CLAWCONNECT_OAUTH_USER_CLAIM", "sub", "`sub`", "email", func(v *Values) *string { return &v.OAuthUserClaim }, nil,
		"the token claim that names the user: each user sees and controls only their own tasks, as with personal tokens (a personal token of the same name is the same user)"),
	text("CLAWCONNECT_OAUTH_GROUPS_CLAIM", "groups", "`groups`", "roles", func(v *Values) *string { return &v.OAuthGroupsClaim }, nil,
		"the token claim that lists the user's groups"),
	list("CLAWCONNECT_OAUTH_ALLOWED_GROUPS", "ops", false, func(v *Values) *[]string { return &v.OAuthAllowedGroups },
		"when set, only users in one of these groups are admitted (comma-separated); others get 403"),
	boolean("CLAWCONNECT_OAUTH_INTROSPECT", false, func(v *Values) *bool { return &v.OAuthIntrospect },
		"`1`: check opaque (non-JWT) access tokens at the issuer's introspection endpoint (RFC 7662) as `CLAWCONNECT_OAUTH_CLIENT_ID`"),
	text("CLAWCONNECT_OAUTH_CLIENT_ID", "", "–", "clawconnect", func(v *Values) *string { return &v.OAuthClientID }, nil,
		"serve's own client at the issuer: the dashboard signs in with it (authorization code with PKCE, redirect URI `<resource origin>/oauth/callback`), and introspection authenticates as it"),
	secret(text("CLAWCONNECT_OAUTH_CLIENT_SECRET", "", "–", "s3cret-client", func(v *Values) *string { return &v.OAuthClientSecret }, nil,
		"that client's secret; unset for a public client")),
	millis("CLAWCONNECT_OAUTH_CLOCK_SKEW_MS", time.Minute, func(v *Values) *time.Duration { return &v.OAuthClockSkew },
		"how far a token's `exp` and `nbf` may be off this machine's clock (at most 300000)"),
	boolean("CLAWCONNECT_OAUTH_STATIC_TOKENS", true, func(v *Values) *bool { return &v.OAuthStaticTokens },
		"`off`: in OAuth mode, refuse the personal tokens and `PUBLIC_MCP_PASS`; on, they keep working beside access tokens"),
	boolean("CLAWCONNECT_INSECURE_COOKIE", false, func(v *Values) *bool { return &v.InsecureCookie },
		"`1`: on a non-loopback `--addr`, send the dashboard's session cookie without `Secure` (only for plain HTTP on a trusted network: browsers keep a `Secure` cookie only over HTTPS)"),
	millis("CLAWCONNECT_TIMEOUT_MS", 30*time.Minute, func(v *Values) *time.Duration { return &v.ChatTimeout }, "live wait window of a run"),
	millis("CLAWCONNECT_RECOVERY_TIMEOUT_MS", 90*time.Minute, func(v *Values) *time.Duration { return &v.RecoveryTimeout }, "hard cap of late transcript recovery"),
	millis("CLAWCONNECT_RECOVERY_IDLE_MS", 300*time.Second, func(v *Values) *time.Duration { return &v.RecoveryIdleTimeout }, "late recovery ends when the transcript stays unchanged this long"),
	millis("CLAWCONNECT_RECOVERY_INTERVAL_MS", 10*time.Second, func(v *Values) *time.Duration { return &v.RecoveryInterval }, "late recovery's transcript poll spacing"),
	millis("CLAWCONNECT_CHECK_WAIT_MS", 45*time.Second, func(v *Values) *time.Duration { return &v.CheckWait }, "`check_task` default wait (floor 1000)"),
	millis("CLAWCONNECT_CHECK_MAX_WAIT_MS", 120*time.Second, func(v *Values) *time.Duration { return &v.CheckMaxWait }, "`check_task` wait ceiling"),
	millis("CLAWCONNECT_RECONCILE_QUIET_MS", 120*time.Second, func(v *Values) *time.Duration { return &v.ReconcileQuiet }, "silence before the quiet watchdog reads the transcript"),
	millis("CLAWCONNECT_RECONCILE_SAMPLE_INTERVAL_MS", 15*time.Second, func(v *Values) *time.Duration { return &v.ReconcileSampleInterval }, "gap between the quiet watchdog's two samples"),
	millis("CLAWCONNECT_LAZY_RECHECK_SPACING_MS", 20*time.Second, func(v *Values) *time.Duration { return &v.LazyRecheckSpacing }, "minimum gap between two lazy re-checks of a task on poll"),
	millis("CLAWCONNECT_LAZY_RECHECK_INTERVAL_MS", 3*time.Second, func(v *Values) *time.Duration { return &v.LazyRecheckInterval }, "gap between a lazy re-check's reads"),
	millis("CLAWCONNECT_COSMETIC_POLL_DEBOUNCE_MS", 400*time.Millisecond, func(v *Values) *time.Duration { return &v.PollDebounce }, "poll-mode debounce of tool chatter"),
	integer("CLAWCONNECT_LOG_ENTRY_TEXT_MAX", 8000, 1, math.MaxInt32-1, func(v *Values) *int { return &v.LogEntryTextMax }, "per-log-entry text cap, in characters"),
	millis("CLAWCONNECT_LEASE_MS", 30*time.Second, func(v *Values) *time.Duration { return &v.Lease }, "lease of a running task (the processes sharing a store)"),
	millis("CLAWCONNECT_RETENTION_MS", 30*24*time.Hour, func(v *Values) *time.Duration { return &v.Retention }, "how long ended tasks are kept"),
	{Name: "CLAWCONNECT_LOG_LEVEL", Default: "`warn`", Doc: "`debug`, `info`, `warn` or `error`; logs go to stderr", Example: "debug", apply: logLevel},
	text("CLAWCONNECT_CLAUDE_BIN", "", "on `PATH`", "/opt/claude/bin/claude", func(v *Values) *string { return &v.ClaudeBin }, nil, "the Claude Code CLI of `exec`"),
	text("CLAWCONNECT_CODEX_BIN", "", "on `PATH`", "/opt/codex/bin/codex", func(v *Values) *string { return &v.CodexBin }, nil, "the Codex CLI of `exec`"),
	list("CLAWCONNECT_EXEC_PASSENV", "MY_PROVIDER_KEY", true, func(v *Values) *[]string { return &v.ExecPassEnv },
		"only for hosts embedding the CLI without a full environment: extra variable names `exec` passes to a CLI runtime (`clawconnect exec` itself passes your environment minus ClawConnect's own secrets)"),
	list("CLAWCONNECT_TMUX_SOCKETS", "/tmp/agents.sock", false, func(v *Values) *[]string { return &v.TmuxSockets },
		"extra tmux server sockets searched for agent panes (comma-separated)"),
	boolean("CLAWCONNECT_TMUX_DEFAULT_SERVER", true, func(v *Values) *bool { return &v.TmuxDefaultServer }, "`off` leaves tmux's default server out of the search"),
	millis("CLAWCONNECT_TERMINAL_INACTIVITY_MS", 60*time.Minute, func(v *Values) *time.Duration { return &v.TerminalInactivity }, "a terminal Turn stalls after this long without session-file activity"),
	millis("CLAWCONNECT_TERMINAL_HARD_MS", 720*time.Minute, func(v *Values) *time.Duration { return &v.TerminalHard }, "a terminal Turn stalls after this long in all"),
	millis("CLAWCONNECT_TERMINAL_RECHECK_MS", 10*time.Second, func(v *Values) *time.Duration { return &v.TerminalRecheck }, "slow safety re-check of each followed Turn"),
	boolean("CLAWCONNECT_TERMINAL_TOOLS", false, func(v *Values) *bool { return &v.TerminalTools },
		"`1` (or the `--terminal-tools` flag of `mcp` and `serve`): also serve the MCP tools `terminal_list`, `terminal_send`, `terminal_status` (waits, with progress notifications, until the Turn ends), `terminal_respond`, `terminal_approve`, `terminal_cancel`. On `serve` every caller allowed on `/mcp` can then type into this machine's agent panes: panes and Sessions have no owner, so any caller may send to a free one (by `terminal_id` or `session_id`). Turns are per caller: a Turn belongs to the token that sent it, and another personal token's `terminal_status`, `terminal_respond`, `terminal_approve` and `terminal_cancel` answer as for a Turn that does not exist, and its `terminal_list` shows the pane busy without the turn id (`CLAWCONNECT_SHARED_TASK_VIEW=1`, and a caller with no credential, reach every Turn). Off, `tools/list` is the nine task-bridge tools"),
	boolean("CLAWCONNECT_TERMINAL_UNPROVEN", false, func(v *Values) *bool { return &v.TerminalUnproven },
		"`1`: send terminal Turns to agent versions whose session files and screens were not recorded as goldens (proven: Codex 0.171.0, Claude Code 2.1.332); such a Turn carries `unproven_version` in `terminal list`, status and its callbacks. Off, a send to one is refused"),
	text("CLAWCONNECT_TERMINAL_AUTO_APPROVE_FILE", "", "–", "/etc/clawconnect/auto-approve.json", func(v *Values) *string { return &v.TerminalAutoApproveFile }, nil,
		"JSON auto-approve rules of terminal Turns, `{\"rules\": [{\"agent\": \"codex\", \"workspace\": \"/abs/root\", \"argv\": [\"make\", \"test\"]}]}` (`agent` `codex` or `claude`): an approval prompt whose agent, Turn workspace and command words are exactly a rule's is approved by the monitor, recorded in the Turn's events and `auto_approvals` (status and later callbacks), with no approval callback. Codex is matched on the command its prompt shows; Claude Code on the one pending Bash call of its transcript, whose input must hold nothing but the command (and a description or timeout), made in the workspace and shown by the dialog. Anything else goes to a person, the approval callback saying why no rule answered (`auto_approve_declined`); a bad file stops the terminal commands with an error naming the line and the rule. Unset: none"),
	boolean("CLAWCONNECT_MCP_TERMINAL_HOST", true, func(v *Values) *bool { return &v.MCPTerminalHost },
		"`off` keeps an `mcp` with the terminal tools from following terminal work (Turns, watches, callbacks) itself; its tools still work, and `serve`, `terminal daemon` or the command that sent a Turn follows it"),
	text("CLAWCONNECT_TERMINAL_HOST", "", "the machine's host name", "laptop", func(v *Values) *string { return &v.TerminalHost }, checkHostName,
		"with the shared PostgreSQL store, this machine's name in terminal ids (`terminal:v3:<host>:…`), `terminal list` and `doctor`: 1 to 253 letters, digits, `.`, `-` and `_`, starting with a letter or digit, and unique among the machines sharing the store"),
	atLeast(millis("CLAWCONNECT_TERMINAL_HOST_LEASE_MS", 30*time.Second, func(v *Values) *time.Duration { return &v.TerminalHostLease },
		"lease of a terminal monitor host, renewed every third of it: a host silent this long loses its Turns to another host, and on several machines its open Turns stall `host_lost` (with their callback) until it returns"),
		3*time.Second, func(v *Values) *time.Duration { return &v.TerminalHostLease }),
	text("CLAWCONNECT_BUILD_SHA", "unknown", "`unknown`", "abc1234", func(v *Values) *string { return &v.BuildSHA }, nil, "build reported by `get_connection_info`"),
}
