package claude

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrNoLiveSession is returned by ReadLiveSession when the process has no
// registry file: it is not a Claude Code TUI, or it has exited.
var ErrNoLiveSession = errors.New("no live Claude Code session for this pid")

// The registry statuses seen in 2.1.332.
const (
	StatusIdle    = "idle"
	StatusBusy    = "busy"
	StatusWaiting = "waiting"
)

// KindInteractive is LiveSession.Kind of a TUI.
const KindInteractive = "interactive"

// LiveSession is a running Claude Code's registry entry.
type LiveSession struct {
	// PID is the Claude Code process.
	PID int `json:"pid"`
	// SessionID is the session (and transcript) id, a UUID.
	SessionID string `json:"sessionId"`
	// Cwd is the session's working directory.
	Cwd string `json:"cwd"`
	// StartedAtMs is the process start in Unix milliseconds.
	StartedAtMs int64 `json:"startedAt"`
	// Version is the Claude Code version.
	Version string `json:"version,omitempty"`
	// Kind is "interactive" for a TUI.
	Kind string `json:"kind,omitempty"`
	// Entrypoint is "cli" for the TUI.
	Entrypoint string `json:"entrypoint,omitempty"`
	// Tmux is "<session>:@<window id>.%<pane id>" when run in tmux.
	Tmux string `json:"tmux,omitempty"`
	// Status is "idle", "busy" or "waiting" (when present).
	Status string `json:"status,omitempty"`
	// WaitingFor says what a "waiting" session waits for ("permission
	// prompt").
	WaitingFor string `json:"waitingFor,omitempty"`
	// UpdatedAtMs is when the entry was last written (Unix ms; 0 if absent).
	UpdatedAtMs int64 `json:"updatedAt,omitempty"`
}

// StartedAt is StartedAtMs as a time.
func (s LiveSession) StartedAt() time.Time { return time.UnixMilli(s.StartedAtMs) }

// RegistryPath is the registry file of pid under the config directory.
func RegistryPath(configDir string, pid int) string {
	return filepath.Join(configDir, "sessions", strconv.Itoa(pid)+".json")
}

// sessionIDPattern is what a session id may be: one safe file-name part
// (Claude Code writes UUIDs).
var sessionIDPattern = lazyRE(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`)

// ParseLiveSession decodes a registry file and checks that it names a
// session: pid, sessionId and an absolute cwd.
func ParseLiveSession(data []byte) (LiveSession, error) {
	var s LiveSession
	if err := json.Unmarshal(data, &s); err != nil {
		return LiveSession{}, fmt.Errorf("parse claude live session: %w", err)
	}
	switch {
	case s.PID <= 0:
		return LiveSession{}, errors.New("parse claude live session: pid is missing")
	case s.SessionID == "":
		return LiveSession{}, errors.New("parse claude live session: sessionId is missing")
	case !sessionIDPattern().MatchString(s.SessionID):
		// It names the transcript file (TranscriptPath) and the thread.
		return LiveSession{}, fmt.Errorf("parse claude live session: sessionId %.60q is not a session id (letters, digits, '-' and '_')", s.SessionID)
	case !filepath.IsAbs(s.Cwd):
		return LiveSession{}, fmt.Errorf("parse claude live session: cwd %q is not absolute", s.Cwd)
	}
	s.SessionID = strings.ToLower(s.SessionID)
	return s, nil
}

// ReadLiveSession reads the registry entry of pid under configDir. It
// returns an error wrapping ErrNoLiveSession when there is none, and an
// error when the entry names another pid.
func ReadLiveSession(configDir string, pid int) (LiveSession, error) {
	path := RegistryPath(configDir, pid)
	data, err := readRegistryFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return LiveSession{}, fmt.Errorf("read claude live session %s: %w", path, ErrNoLiveSession)
	}
	if err != nil {
		return LiveSession{}, fmt.Errorf("read claude live session: %w", err)
	}
	s, err := ParseLiveSession(data)
	if err != nil {
		return LiveSession{}, fmt.Errorf("read claude live session %s: %w", path, err)
	}
	if s.PID != pid {
		return LiveSession{}, fmt.Errorf("read claude live session %s: it names pid %d", path, s.PID)
	}
	return s, nil
}

// ProjectDirName encodes cwd as Claude Code names its project directory:
// every character other than an ASCII letter or digit becomes '-' (one per
// UTF-16 code unit, as JavaScript counts).
func ProjectDirName(cwd string) string {
	out := make([]byte, 0, len(cwd))
	for _, r := range cwd {
		switch {
		case r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9':
			out = append(out, byte(r))
		case r >= 0x10000: // two UTF-16 code units, two dashes (Claude Code is JavaScript)
			out = append(out, '-', '-')
		default:
			out = append(out, '-')
		}
	}
	return string(out)
}

// TranscriptPath is the transcript of a session:
// <configDir>/projects/<ProjectDirName(cwd)>/<sessionID>.jsonl.
func TranscriptPath(configDir, cwd, sessionID string) string {
	return filepath.Join(configDir, "projects", ProjectDirName(cwd), sessionID+".jsonl")
}

// maxRegistryFile bounds a registry entry (Claude Code writes a few
// hundred bytes).
const maxRegistryFile = 1 << 20

// readRegistryFile reads a regular file of at most maxRegistryFile bytes;
// a FIFO or device in its place is refused instead of blocking the reader.
func readRegistryFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", path, st.Mode().Type())
	}
	data, err := io.ReadAll(io.LimitReader(f, maxRegistryFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxRegistryFile {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxRegistryFile)
	}
	return data, nil
}
