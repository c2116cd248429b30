package terminal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// SocketName is the file name of the monitor host's control socket inside
// CLAWCONNECT_HOME. A CLI command talks to the host through it, because an
// embedded SQLite store belongs to one process.
const SocketName = "terminal.sock"

// apiRequest is the body of every call.
type apiRequest struct {
	TurnID      string      `json:"turn_id,omitempty"`
	Request     string      `json:"request,omitempty"`
	Fingerprint string      `json:"fingerprint,omitempty"`
	Minutes     float64     `json:"minutes,omitempty"`
	Reason      string      `json:"reason,omitempty"`
	SessionID   string      `json:"session_id,omitempty"`
	Send        SendRequest `json:"send"`
	// TerminalID names the pane of inspect and of the transitions, and
	// with WatchID the watch of unwatch / watch-status.
	TerminalID string       `json:"terminal_id,omitempty"`
	WatchID    string       `json:"watch_id,omitempty"`
	Watch      WatchRequest `json:"watch"`
	// Limit bounds a listing (watches).
	Limit int `json:"limit,omitempty"`
	// Transition fields (transition_api.go).
	ThreadID     string `json:"native_thread_id,omitempty"`
	TransitionID string `json:"transition_id,omitempty"`
	Adopt        bool   `json:"adopt,omitempty"`
	// Sockets are the tmux server sockets the caller lists panes on
	// (its CLAWCONNECT_TMUX_SOCKETS and $TMUX server): the host follows
	// them too, so it finds the caller's panes whatever it was started
	// with.
	Sockets []string `json:"tmux_sockets,omitempty"`
}

// apiError carries an error and the sentinel it matched.
type apiError struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

var apiKinds = []struct {
	name string
	err  error
}{{"bad_input", ErrBadInput}, {"not_found", ErrNotFound}, {"refused", ErrRefused},
	{"input_not_sent", ErrInputNotSent}, {"outcome_uncertain", ErrOutcomeUncertain}}

// Handler serves s over HTTP (POST /v1/<operation>, JSON in and out) for
// Client. It is meant for a unix socket only the user can open.
func Handler(s *Service) http.Handler {
	mux := http.NewServeMux()
	op := func(name string, f func(ctx context.Context, r apiRequest) (any, error)) {
		mux.HandleFunc("POST /v1/"+name, func(w http.ResponseWriter, req *http.Request) {
			var r apiRequest
			if err := json.NewDecoder(io.LimitReader(req.Body, 1<<20)).Decode(&r); err != nil {
				http.Error(w, "bad request body", http.StatusBadRequest)
				return
			}
			var out any
			err := s.FollowSockets(r.Sockets)
			if err == nil {
				out, err = f(req.Context(), r)
			}
			var body struct {
				Result any       `json:"result,omitempty"`
				Error  *apiError `json:"error,omitempty"`
			}
			body.Result = out
			if err != nil {
				body.Error = &apiError{Kind: "failed", Message: err.Error()}
				for _, k := range apiKinds {
					if errors.Is(err, k.err) {
						body.Error.Kind = k.name
						break
					}
				}
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(body)
		})
	}
	op("list", func(ctx context.Context, _ apiRequest) (any, error) { return s.List(ctx) })
	op("send", func(ctx context.Context, r apiRequest) (any, error) {
		// A send runs to its end even if the client goes away: input
		// already typed must be recorded.
		return s.Send(context.WithoutCancel(ctx), r.Send)
	})
	op("wait", func(ctx context.Context, r apiRequest) (any, error) { return s.Wait(ctx, r.TurnID) })
	op("status", func(ctx context.Context, r apiRequest) (any, error) { return s.Status(ctx, r.TurnID) })
	op("respond", func(ctx context.Context, r apiRequest) (any, error) {
		return s.Respond(context.WithoutCancel(ctx), r.TurnID, r.Request)
	})
	op("approve", func(ctx context.Context, r apiRequest) (any, error) {
		return s.Approve(context.WithoutCancel(ctx), r.TurnID, r.Fingerprint)
	})
	op("cancel", func(ctx context.Context, r apiRequest) (any, error) {
		return s.Cancel(context.WithoutCancel(ctx), r.TurnID)
	})
	op("renew", func(ctx context.Context, r apiRequest) (any, error) { return s.Renew(ctx, r.TurnID, r.Minutes) })
	op("close", func(ctx context.Context, r apiRequest) (any, error) { return s.Close(ctx, r.TurnID, r.Reason) })
	op("retry-callback", func(ctx context.Context, r apiRequest) (any, error) { return s.RetryCallback(ctx, r.TurnID) })
	op("session", func(ctx context.Context, r apiRequest) (any, error) { return s.Session(ctx, r.SessionID) })
	op("file", func(ctx context.Context, r apiRequest) (any, error) { return s.SessionFile(ctx, r.TurnID) })
	op("detach", func(ctx context.Context, r apiRequest) (any, error) { return s.Detach(ctx, r.SessionID, r.Reason) })
	watchOps(s, op)
	transitionOps(s, op)
	return mux
}

// SocketIdleTimeout is how long a connection to the host's socket may sit
// between requests before the host closes it: a client that went away
// without closing holds nothing for good. A request that waits (a Turn's
// wait) is not idle.
const SocketIdleTimeout = time.Minute

// ServeSocket serves s on the unix socket path (mode 0600, replacing a
// stale socket file) until ctx ends. The socket is bound inside a fresh
// directory only this user can enter and renamed into place once it is
// 0600, so no other user can reach it even for a moment, whatever the
// umask and the mode of path's directory; a connection whose peer (its
// SO_PEERCRED) is another user is closed at once and logged; a connection
// idle for SocketIdleTimeout is closed.
func ServeSocket(ctx context.Context, path string, s *Service) error {
	return serveSocket(ctx, path, s, socketOptions{uid: os.Geteuid(), idle: SocketIdleTimeout})
}

// socketOptions are ServeSocket's, settable by tests.
type socketOptions struct {
	// uid is the only peer user served.
	uid int
	// idle closes a connection idle between requests.
	idle time.Duration
	// bound, when set, is called with the socket's private path after it
	// is bound and before it is made 0600 and published at its path.
	bound func(private string)
}

func serveSocket(ctx context.Context, path string, s *Service, o socketOptions) error {
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		_ = c.Close()
		return fmt.Errorf("serve terminal socket: %s is in use by another clawconnect process", path)
	}
	l, err := listenPrivate(path, o.bound)
	if err != nil {
		return fmt.Errorf("serve terminal socket: %w", err)
	}
	srv := &http.Server{Handler: Handler(s), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: o.idle}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	err = srv.Serve(&peerListener{Listener: l, uid: o.uid, log: s.log})
	<-done
	_ = os.Remove(path)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("serve terminal socket: %w", err)
}

// listenPrivate binds a unix socket in a new directory beside path that
// only this user can enter (os.MkdirTemp makes it 0700 whatever the
// umask), makes it 0600 there, and renames it to path, replacing a stale
// socket file. Neither a chmod after a bind in a shared directory (another
// user may connect in between) nor a umask (one per process, shared by
// every goroutine that creates files meanwhile) would close that window.
func listenPrivate(path string, bound func(string)) (net.Listener, error) {
	dir, err := os.MkdirTemp(filepath.Dir(path), ".terminal-sock-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	private := filepath.Join(dir, "s")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: private, Net: "unix"})
	if err != nil {
		return nil, err
	}
	// The name it was bound to is gone once renamed; path is removed by
	// serveSocket.
	l.SetUnlinkOnClose(false)
	if bound != nil {
		bound(private)
	}
	if err := os.Chmod(private, 0o600); err != nil {
		_ = l.Close()
		return nil, err
	}
	if err := os.Rename(private, path); err != nil {
		_ = l.Close()
		return nil, err
	}
	return l, nil
}

// peerListener accepts only connections whose peer process runs as uid
// (SO_PEERCRED): the socket's mode already keeps other users out, and this
// holds even if the mode or a directory's is loosened later.
type peerListener struct {
	net.Listener
	uid int
	log *slog.Logger
}

// Accept implements net.Listener: it closes, and logs, each connection of
// another user and returns the next one of uid.
func (l *peerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		uid, err := peerUID(c)
		switch {
		case err != nil:
			l.log.Warn("terminal socket: refused a connection whose peer user cannot be read", "err", err)
		case uid != l.uid:
			l.log.Warn("terminal socket: refused a connection from another user", "peer_uid", uid, "uid", l.uid)
		default:
			return c, nil
		}
		_ = c.Close()
	}
}

// peerUID is the effective uid of the process at the other end of c, as
// the kernel recorded it when that process connected.
func peerUID(c net.Conn) (int, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return 0, fmt.Errorf("peer credentials: %T is not a unix socket connection", c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("peer credentials: %w", err)
	}
	var cred *syscall.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return 0, fmt.Errorf("peer credentials: %w", err)
	}
	if cerr != nil {
		return 0, fmt.Errorf("peer credentials: %w", cerr)
	}
	return int(cred.Uid), nil
}

// Client calls a Service through its host's socket. Its methods mirror
// Service's and return errors matching the same sentinels.
type Client struct {
	hc      *http.Client
	sockets []string
}

// Dial returns a Client for the host listening on path, or an error when
// no host listens there. The tmux server sockets travel with every
// request, so the host finds the panes the caller would find itself.
func Dial(path string, sockets ...string) (*Client, error) {
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		return nil, err
	}
	_ = c.Close()
	return &Client{hc: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
		// Before the host closes it (SocketIdleTimeout), so a request is
		// never written to a connection the host is closing.
		IdleConnTimeout: SocketIdleTimeout / 2,
	}}, sockets: sockets}, nil
}

func (c *Client) call(ctx context.Context, op string, in apiRequest, out any) error {
	in.Sockets = c.sockets
	b, _ := json.Marshal(in)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://clawconnect/v1/"+op, bytes.NewReader(b))
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s: call the terminal host: %w", op, err)
	}
	defer resp.Body.Close()
	var body struct {
		Result json.RawMessage `json:"result"`
		Error  *apiError       `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return fmt.Errorf("%s: read the terminal host's answer (HTTP %d): %w", op, resp.StatusCode, err)
	}
	if len(body.Result) > 0 {
		if err := json.Unmarshal(body.Result, out); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
	}
	if body.Error != nil {
		for _, k := range apiKinds {
			if k.name == body.Error.Kind {
				return &remoteError{msg: body.Error.Message, kind: k.err}
			}
		}
		return errors.New(body.Error.Message)
	}
	return nil
}

type remoteError struct {
	msg  string
	kind error
}

func (e *remoteError) Error() string        { return e.msg }
func (e *remoteError) Is(target error) bool { return target == e.kind }

// List calls Service.List.
func (c *Client) List(ctx context.Context) (out ListResult, err error) {
	return out, c.call(ctx, "list", apiRequest{}, &out)
}

// Send calls Service.Send.
func (c *Client) Send(ctx context.Context, r SendRequest) (out SendResult, err error) {
	return out, c.call(ctx, "send", apiRequest{Send: r}, &out)
}

// Wait calls Service.Wait.
func (c *Client) Wait(ctx context.Context, id string) (out TurnView, err error) {
	return out, c.call(ctx, "wait", apiRequest{TurnID: id}, &out)
}

// Status calls Service.Status.
func (c *Client) Status(ctx context.Context, id string) (out TurnView, err error) {
	return out, c.call(ctx, "status", apiRequest{TurnID: id}, &out)
}

// Respond calls Service.Respond.
func (c *Client) Respond(ctx context.Context, id, text string) (out SendResult, err error) {
	return out, c.call(ctx, "respond", apiRequest{TurnID: id, Request: text}, &out)
}

// Approve calls Service.Approve.
func (c *Client) Approve(ctx context.Context, id, fingerprint string) (out TurnView, err error) {
	return out, c.call(ctx, "approve", apiRequest{TurnID: id, Fingerprint: fingerprint}, &out)
}

// Cancel calls Service.Cancel.
func (c *Client) Cancel(ctx context.Context, id string) (out TurnView, err error) {
	return out, c.call(ctx, "cancel", apiRequest{TurnID: id}, &out)
}

// Renew calls Service.Renew.
func (c *Client) Renew(ctx context.Context, id string, minutes float64) (out TurnView, err error) {
	return out, c.call(ctx, "renew", apiRequest{TurnID: id, Minutes: minutes}, &out)
}

// Close calls Service.Close.
func (c *Client) Close(ctx context.Context, id, reason string) (out TurnView, err error) {
	return out, c.call(ctx, "close", apiRequest{TurnID: id, Reason: reason}, &out)
}

// RetryCallback calls Service.RetryCallback.
func (c *Client) RetryCallback(ctx context.Context, id string) (out TurnView, err error) {
	return out, c.call(ctx, "retry-callback", apiRequest{TurnID: id}, &out)
}

// Session calls Service.Session.
func (c *Client) Session(ctx context.Context, sessionID string) (out SessionView, err error) {
	return out, c.call(ctx, "session", apiRequest{SessionID: sessionID}, &out)
}

// Detach calls Service.Detach.
func (c *Client) Detach(ctx context.Context, sessionID, reason string) (out SessionView, err error) {
	return out, c.call(ctx, "detach", apiRequest{SessionID: sessionID, Reason: reason}, &out)
}

// SessionFile calls Service.SessionFile.
func (c *Client) SessionFile(ctx context.Context, turnID string) (out SessionFile, err error) {
	return out, c.call(ctx, "file", apiRequest{TurnID: turnID}, &out)
}
