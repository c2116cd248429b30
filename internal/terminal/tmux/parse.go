package tmux

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// ListFormat is the exact -F format ListPanes gives `tmux list-panes -a`:
// eight tab-separated fields, the pane's path sixth, the canonical server
// socket and the stable pane id last.
const ListFormat = "#{session_name}\t#{window_index}\t#{pane_index}\t#{pane_pid}\t#{pane_current_command}\t#{pane_current_path}\t#{socket_path}\t#{pane_id}"

// ErrMalformedLine reports a list-panes line that ParseLine rejects. The
// line is never guessed at: the pane it describes is left out.
var ErrMalformedLine = errors.New("tmux: malformed list-panes line")

var (
	paneIDRE = lazyRE(`^%[0-9]+$`)
	// The legacy six-field forms, when a runner collapsed the tabs.
	legacySpaceRE      = lazyRE(`^(\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\S+)\s+(.+?)\s*$`)
	legacyUnderscoreRE = lazyRE(`^(.+)_(\d+)_(\d+)_(\d+)_([^_]+)_(.+?)\s*$`)
	// An eight-field line with collapsed tabs ends with a separator, the
	// socket, a separator and a pane id.
	trailingPaneIDRE = lazyRE(`(?:\s|_)%[0-9]+\s*$`)
)

// ParseListPanes parses the output of `list-panes -a -F ListFormat` run
// against socket ("" for the default server). Every line that parses
// becomes a Pane; every rejected line is reported in the joined error
// (wrapping ErrMalformedLine) and left out. Blank lines are ignored.
func ParseListPanes(out []byte, socket string) ([]Pane, error) {
	var panes []Pane
	var errs []error
	for n, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		p, err := ParseLine(line, socket)
		if err != nil {
			errs = append(errs, fmt.Errorf("line %d: %w", n+1, err))
			continue
		}
		panes = append(panes, p)
	}
	return panes, errors.Join(errs...)
}

// ParseLine parses one list-panes line printed with ListFormat for the
// server at socket ("" for the default server), by these rules:
//
//   - With tabs: eight or more fields give session, window, pane, pid and
//     command (fields 0–4), the path (fields 5 to len-3 joined with tabs,
//     so a path may hold tabs), the canonical socket and the pane id.
//     Exactly six fields is the legacy form without socket and pane id.
//     Any other count is rejected.
//   - Without tabs (a runner collapsed them to spaces or underscores): a
//     line ending in a pane id is accepted only when it ends with
//     <sep><socket><sep>%N for exactly the queried socket; otherwise it is
//     rejected. A line not ending in a pane id is read as the legacy six
//     fields, whitespace-separated, then underscore-separated.
//
// Window, pane index and pid must be integers, the pid positive, the
// session non-empty, and a pane id %N. Queried is set to socket.
func ParseLine(line, socket string) (Pane, error) {
	if strings.Contains(line, "\t") {
		f := strings.Split(line, "\t")
		switch {
		case len(f) >= 8:
			path := strings.Join(f[5:len(f)-2], "\t")
			return build(line, socket, f[0], f[1], f[2], f[3], f[4], path, f[len(f)-2], f[len(f)-1])
		case len(f) == 6:
			return build(line, socket, f[0], f[1], f[2], f[3], f[4], f[5], "", "")
		default:
			return Pane{}, fmt.Errorf("%w: %d tab-separated fields, want 8 (or the legacy 6): %q", ErrMalformedLine, len(f), clip(line))
		}
	}
	if trailingPaneIDRE().MatchString(line) {
		return parseCollapsed(line, socket)
	}
	for _, re := range []*regexp.Regexp{legacySpaceRE(), legacyUnderscoreRE()} {
		if m := re.FindStringSubmatch(line); m != nil {
			return build(line, socket, m[1], m[2], m[3], m[4], m[5], m[6], "", "")
		}
	}
	return Pane{}, fmt.Errorf("%w: no tabs and no legacy six-field form: %q", ErrMalformedLine, clip(line))
}

// parseCollapsed reads an eight-field line whose tabs became spaces or
// underscores: it must end with <sep><socket><sep>%N for the exact queried
// socket, and the rest must be the six leading fields.
func parseCollapsed(line, socket string) (Pane, error) {
	if socket == "" {
		return Pane{}, fmt.Errorf("%w: collapsed eight-field line from a server queried without a socket path cannot be checked: %q", ErrMalformedLine, clip(line))
	}
	rest := strings.TrimRight(line, " \t\r")
	cut := strings.LastIndexAny(rest, " _")
	if cut < 0 {
		return Pane{}, fmt.Errorf("%w: %q", ErrMalformedLine, clip(line))
	}
	id := rest[cut+1:]
	sep := rest[cut]
	rest = strings.TrimRight(rest[:cut], string(sep))
	if !strings.HasSuffix(rest, socket) {
		return Pane{}, fmt.Errorf("%w: collapsed line does not end with the queried socket %q and a pane id: %q", ErrMalformedLine, socket, clip(line))
	}
	rest = rest[:len(rest)-len(socket)]
	trimmed := strings.TrimRight(rest, string(sep))
	if trimmed == rest {
		return Pane{}, fmt.Errorf("%w: collapsed line has no separator before the socket %q: %q", ErrMalformedLine, socket, clip(line))
	}
	re := legacySpaceRE()
	if sep == '_' {
		re = legacyUnderscoreRE()
	}
	m := re.FindStringSubmatch(trimmed)
	if m == nil {
		return Pane{}, fmt.Errorf("%w: collapsed line's leading fields do not parse: %q", ErrMalformedLine, clip(line))
	}
	return build(line, socket, m[1], m[2], m[3], m[4], m[5], m[6], socket, id)
}

func build(line, queried, session, window, index, pid, command, path, sock, id string) (Pane, error) {
	p := Pane{Session: session, Command: command, Path: path, Socket: sock, ID: id, Queried: queried}
	if session == "" {
		return Pane{}, fmt.Errorf("%w: empty session name: %q", ErrMalformedLine, clip(line))
	}
	var err error
	if p.Window, err = atoi(window); err != nil {
		return Pane{}, fmt.Errorf("%w: window index %q is not an integer: %q", ErrMalformedLine, window, clip(line))
	}
	if p.Index, err = atoi(index); err != nil {
		return Pane{}, fmt.Errorf("%w: pane index %q is not an integer: %q", ErrMalformedLine, index, clip(line))
	}
	if p.PID, err = atoi(pid); err != nil || p.PID == 0 {
		return Pane{}, fmt.Errorf("%w: pane pid %q is not a positive integer: %q", ErrMalformedLine, pid, clip(line))
	}
	if (sock == "") != (id == "") {
		return Pane{}, fmt.Errorf("%w: socket %q and pane id %q must both be set or both empty: %q", ErrMalformedLine, sock, id, clip(line))
	}
	if id != "" && !paneIDRE().MatchString(id) {
		return Pane{}, fmt.Errorf("%w: pane id %q is not %%N: %q", ErrMalformedLine, id, clip(line))
	}
	return p, nil
}

// atoi accepts only plain decimal digits (no sign, no spaces).
func atoi(s string) (int, error) {
	if s == "" || len(s) > 9 || strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' }) >= 0 {
		return 0, errors.New("not a decimal integer")
	}
	return strconv.Atoi(s)
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// lazyRE returns expr compiled once, at the first call: a package's
// expressions are not compiled when a process that never uses them starts.
func lazyRE(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
