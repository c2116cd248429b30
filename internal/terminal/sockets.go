package terminal

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/clawconnect/clawconnect/internal/terminal/tmux"
	"github.com/clawconnect/clawconnect/termapi"
)

// SocketFollower is implemented by Terminals that can list more tmux
// servers at run time: a host started without a command's private sockets
// learns them from the panes its store records (each pane key names its
// server), so any host on the machine can follow any pane.
type SocketFollower interface {
	// FollowSockets adds servers to discovery and reports how many were
	// new. The paths are already checked (CheckSocket).
	FollowSockets(paths ...string) int
}

var _ SocketFollower = (*TmuxTerminals)(nil)

// FollowSockets implements SocketFollower.
func (t *TmuxTerminals) FollowSockets(paths ...string) int { return t.Tmux.AddSockets(paths...) }

// errNoSocket means a socket path names nothing: its server is not
// running, which is not an error of the caller's (discovery skips a server
// that is not running too).
var errNoSocket = errors.New("no such socket")

// CheckSocket checks a tmux server socket path that came from outside this
// process (a caller's request, a shared store) and returns the path it
// resolves to. It must be absolute and clean (no ".", ".." or repeated
// slashes) and resolve to a socket owned by this process's user: tmux
// servers of other users, and files that are not sockets, are never
// driven. An error says what was wrong; one wrapping errNoSocket means
// nothing is there (yet).
func CheckSocket(path string) (string, error) {
	switch {
	case path == "":
		return "", fmt.Errorf("%w: tmux socket path is empty", termapi.ErrBadInput)
	case strings.ContainsRune(path, 0):
		return "", fmt.Errorf("%w: tmux socket path %q holds a NUL byte", termapi.ErrBadInput, path)
	case !filepath.IsAbs(path):
		return "", fmt.Errorf("%w: tmux socket %q is not an absolute path; give the full path (tmux -L NAME uses /tmp/tmux-UID/NAME)", termapi.ErrBadInput, path)
	case filepath.Clean(path) != path:
		return "", fmt.Errorf("%w: tmux socket %q is not in clean form (it holds \".\", \"..\", repeated or trailing slashes); give it as %q", termapi.ErrBadInput, path, filepath.Clean(path))
	}
	real, err := filepath.EvalSymlinks(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("tmux socket %s: %w", path, errNoSocket)
	}
	if err != nil {
		return "", fmt.Errorf("%w: tmux socket %s: %w", termapi.ErrBadInput, path, err)
	}
	fi, err := os.Lstat(real)
	if err != nil {
		return "", fmt.Errorf("%w: tmux socket %s: %w", termapi.ErrBadInput, path, err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return "", fmt.Errorf("%w: %s is not a socket (it is a %s); give the path of a tmux server's socket", termapi.ErrBadInput, path, fileKind(fi.Mode()))
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "", fmt.Errorf("%w: tmux socket %s: its owner cannot be read", termapi.ErrBadInput, path)
	}
	if uid := os.Geteuid(); int(st.Uid) != uid {
		return "", fmt.Errorf("%w: tmux socket %s belongs to uid %d, not to this user (uid %d); clawconnect drives only its own user's tmux servers", termapi.ErrBadInput, path, st.Uid, uid)
	}
	return real, nil
}

func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m.IsRegular():
		return "regular file"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "file of mode " + m.String()
}

// followSockets checks tmux server sockets that came from outside
// (CheckSocket) and lists their panes from now on. A socket with nothing
// behind it is skipped, as discovery skips a server that is not running;
// any other bad path fails with ErrBadInput and follows none of them. It
// is safe for concurrent use.
func (s *Service) followSockets(paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	f, ok := s.o.Terminals.(SocketFollower)
	if !ok {
		return nil
	}
	checked := make([]string, 0, len(paths))
	for _, p := range paths {
		real, err := CheckSocket(p)
		switch {
		case errors.Is(err, errNoSocket):
			continue
		case err != nil:
			return err
		}
		checked = append(checked, real)
	}
	if f.FollowSockets(checked...) > 0 {
		s.invMu.Lock()
		s.invAt = time.Time{}
		s.invMu.Unlock()
	}
	return nil
}

// followKey lists the server of a recorded pane key from now on, so a
// host follows a pane it was not told about. A key whose socket does not
// pass CheckSocket (gone, another user's, on another machine sharing the
// store) is left out: the pane is then simply not found.
func (s *Service) followKey(key string) {
	if sock := tmux.KeySocket(key); sock != "" {
		if _, done := s.keySockets.Load(sock); done {
			return
		}
		s.keySockets.Store(sock, true)
		if err := s.followSockets([]string{sock}); err != nil {
			s.log.Debug("recorded tmux socket not followed", "socket", sock, "err", err)
		}
	}
}

// followRecorded lists the servers of this host's panes whose Sessions
// have open Turns, so List shows them whichever sockets this host was
// started with. Another host's Turns are skipped: their key names a socket
// on that machine, and the same path here (a /tmp several hosts share, or
// another machine's default server) is not that pane's server; following
// it would list a pane under this host's id that this host does not run.
func (s *Service) followRecorded(ctx context.Context) {
	turns, err := s.o.Store.OpenTurns(ctx, 500)
	if err != nil {
		return
	}
	seen := map[string]bool{}
	for _, t := range turns {
		if _, other := s.foreign(t.Takeover.TerminalID); other || seen[t.SessionID] {
			continue
		}
		seen[t.SessionID] = true
		if sess, err := s.o.Store.GetTermSession(ctx, t.SessionID); err == nil && sess.Binding != nil {
			s.followKey(sess.Binding.TerminalKey)
		}
	}
}
