package terminal

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/owner"
	"github.com/clawconnect/clawconnect/internal/terminal/agentproc"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/internal/terminal/ids"
	"github.com/clawconnect/clawconnect/termapi"
)

// Terminal hosts on several machines. With a host name (Options.Host) a
// Service names its panes by version 3 terminal ids, which carry the host.
// An operation on a pane of another host is queued in the store for that
// host (store.HostOp) and waited for; only the pane's own host runs it.
// Each Turn a host creates is sealed with the host's secret key, which
// never leaves the machine: a host follows and types only Turns it sealed,
// so a Turn written into the store by anyone else for its panes is
// refused, not trusted.

// HostKeyFile is the name of a host's sealing key in its home directory.
const HostKeyFile = "terminal-host.key"

// LoadHostKey reads the host's sealing key from dir, creating it (32
// random bytes, readable by its owner only) on first use.
func LoadHostKey(dir string) ([]byte, error) {
	path := filepath.Join(dir, HostKeyFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("host key: %w", err)
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("host key: %w", err)
		}
		// Written whole to a temporary file, then linked into place: a
		// process of this host that starts at the same moment reads
		// either no key or the whole key, never a part of it.
		f, err := os.CreateTemp(dir, HostKeyFile+".*")
		if err != nil {
			return nil, fmt.Errorf("host key: %w", err)
		}
		defer os.Remove(f.Name())
		_, werr := f.Write(key)
		if err := errors.Join(werr, f.Chmod(0o600), f.Close()); err != nil {
			return nil, fmt.Errorf("host key %s: %w", path, err)
		}
		if err := os.Link(f.Name(), path); errors.Is(err, fs.ErrExist) {
			return LoadHostKey(dir) // another process of this host made it first
		} else if err != nil {
			return nil, fmt.Errorf("host key: %w", err)
		}
		return key, nil
	}
	if err != nil {
		return nil, fmt.Errorf("host key: %w", err)
	}
	if len(b) != 32 {
		return nil, fmt.Errorf("host key %s holds %d bytes, not 32; remove it and a new one is made", path, len(b))
	}
	return b, nil
}

// HostName returns this machine's host name as terminal ids carry it.
func HostName() (string, error) {
	h, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("host name: %w", err)
	}
	if err := agentproc.CheckHostName(h); err != nil {
		return "", fmt.Errorf("host name: %w", err)
	}
	return h, nil
}

// hostOf returns the host a terminal id names ("" for an id without one).
func hostOf(terminalID string) string {
	id, err := agentproc.ParseTerminalID(terminalID)
	if err != nil {
		return ""
	}
	return id.Host
}

// ownID is terminalID as this host names its own panes: with a host
// name, the version 2 form (accepted on the pane's own machine) becomes
// the version 3 form naming this host.
func (s *Service) ownID(terminalID string) string {
	id, err := agentproc.ParseTerminalID(terminalID)
	if err != nil || s.o.Host == "" || id.Host != "" {
		return terminalID
	}
	id.Host = s.o.Host
	return id.String()
}

// foreign returns the host that runs terminalID's pane when it is not
// this one.
func (s *Service) foreign(terminalID string) (string, bool) {
	h := hostOf(terminalID)
	return h, h != "" && h != s.o.Host
}

// OtherHost returns the terminal host that runs terminalID's pane when it
// is another machine's: ok is false for this machine's own panes (and
// every pane of a single machine).
func (s *Service) OtherHost(terminalID string) (host string, ok bool) { return s.foreign(terminalID) }

// seal returns the Turn's seal: an HMAC with the host's key of the fields
// a Turn never changes that say which pane, process and request it is.
func (s *Service) seal(t *store.Turn) string {
	m := hmac.New(sha256.New, s.o.HostKey)
	for _, f := range []string{t.TurnID, t.SessionID, t.Takeover.TerminalID, t.Takeover.TerminalKey,
		strconv.Itoa(t.Takeover.AgentPID), t.Takeover.ProcessBirth, t.UserRequest} {
		m.Write([]byte(strconv.Itoa(len(f)) + ":" + f))
	}
	return hex.EncodeToString(m.Sum(nil))
}

// sealTurn seals a Turn this host creates.
func (s *Service) sealTurn(t *store.Turn) {
	if s.o.Host != "" && len(s.o.HostKey) > 0 {
		t.HostSeal = s.seal(t)
	}
}

// sealed reports whether this host sealed t.
func (s *Service) sealed(t *store.Turn) bool {
	want, err := hex.DecodeString(t.HostSeal)
	if err != nil || len(s.o.HostKey) == 0 {
		return false
	}
	got, _ := hex.DecodeString(s.seal(t))
	return hmac.Equal(got, want)
}

// HostName is this machine's host name when terminals are shared with
// other machines (Options.Host); "" on a single machine.
func (s *Service) HostName() string { return s.o.Host }

// Hosts returns every terminal host published in the store with its
// panes and liveness, by host name.
func (s *Service) Hosts(ctx context.Context) ([]hostpkg.View, error) {
	list, err := s.o.Store.TerminalHostList(ctx)
	if err != nil {
		return nil, err
	}
	return hostpkg.Views(list, s.o.Host, time.Now()), nil
}

// Operations a host runs for another (store.HostOp.Op).
const (
	hostOpSend    = "send"
	hostOpRespond = "respond"
	hostOpApprove = "approve"
	hostOpCancel  = "cancel"
	hostOpInspect = "inspect"
)

// hostOpArgs is the input of a host operation.
type hostOpArgs struct {
	Send       *termapi.SendRequest `json:"send,omitempty"`
	TurnID     string               `json:"turn_id,omitempty"`
	Text       string               `json:"text,omitempty"`
	TerminalID string               `json:"terminal_id,omitempty"`
}

// onHost runs op on host and decodes its result into out; the error is
// the host's (errors.Is keeps its sentinel). A host that is away refuses
// at once: a pane's control is only ever its own host's.
func (s *Service) onHost(ctx context.Context, host, op string, args hostOpArgs, out any) error {
	live, last, err := hostpkg.Published(ctx, s.o.Store, host)
	if err != nil {
		return err
	}
	if !live {
		when := "it never published"
		if last > 0 {
			when = "its last heartbeat was " + time.UnixMilli(last).UTC().Format(time.RFC3339)
		}
		return fmt.Errorf("%w: the pane runs on terminal host %s, which is away (%s); only that host controls its panes — start `clawconnect terminal daemon` there, then retry",
			termapi.ErrRefused, host, when)
	}
	b, err := json.Marshal(args)
	if err != nil {
		return err
	}
	now := time.Now()
	rec := &store.HostOp{OpID: "hostop-" + ids.UUID(), Host: host, Op: op, Args: b, RequestedBy: owner.Self().ID, CreatedAt: now.UnixMilli()}
	announced, stop := s.o.Store.WatchTerminalWork()
	defer stop()
	if err := s.o.Store.PutHostOp(ctx, rec); err != nil {
		return fmt.Errorf("queue %s for host %s: %w", op, host, err)
	}
	s.o.Store.AnnounceTerminalWork(context.WithoutCancel(ctx))
	// The feed wakes the wait when the host finishes; the tick covers a
	// lost announcement and notices the host going away.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		got, err := s.o.Store.GetHostOp(ctx, rec.OpID)
		if err != nil {
			return err
		}
		if got.Status == store.HostOpDone {
			if len(got.Result) > 0 && out != nil {
				if err := json.Unmarshal(got.Result, out); err != nil {
					return fmt.Errorf("%s on host %s: decode its result: %w", op, host, err)
				}
			}
			if got.Error != "" {
				return hostpkg.OpError(got.ErrorKind, got.Error)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %s queued for terminal host %s (%s) did not finish before the wait ended: %w", termapi.ErrOutcomeUncertain, op, host, rec.OpID, ctx.Err())
		case <-announced:
		case <-tick.C:
			if live, _, err := hostpkg.Published(ctx, s.o.Store, host); err == nil && !live && time.Since(now) > time.Second {
				return fmt.Errorf("%w: terminal host %s went away while it ran %s (%s); look at the Turn with `clawconnect terminal status`", termapi.ErrOutcomeUncertain, host, op, rec.OpID)
			}
		}
	}
}

// RunOp runs a host operation another host queued for this one
// (host.Shared).
func (s *Service) RunOp(ctx context.Context, op *store.HostOp) (any, error) {
	var a hostOpArgs
	if err := json.Unmarshal(op.Args, &a); err != nil {
		return nil, fmt.Errorf("%w: host operation %s: %w", termapi.ErrBadInput, op.OpID, err)
	}
	switch op.Op {
	case hostOpSend:
		if a.Send == nil {
			return nil, fmt.Errorf("%w: host operation %s: no send request", termapi.ErrBadInput, op.OpID)
		}
		if a.Send.TerminalID != "" {
			if h, ok := s.foreign(a.Send.TerminalID); ok {
				return nil, fmt.Errorf("%w: terminal %s runs on host %s, not %s", termapi.ErrRefused, a.Send.TerminalID, h, s.o.Host)
			}
		}
		return s.Send(ctx, *a.Send)
	case hostOpRespond:
		return s.Respond(ctx, a.TurnID, a.Text)
	case hostOpApprove:
		return s.Approve(ctx, a.TurnID, a.Text)
	case hostOpCancel:
		return s.Cancel(ctx, a.TurnID)
	case hostOpInspect:
		return s.Inspect(ctx, a.TerminalID)
	}
	return nil, fmt.Errorf("%w: host operation %q is unknown to this build", termapi.ErrBadInput, op.Op)
}

// sendOn sends req to a pane of host, through that host.
func (s *Service) sendOn(ctx context.Context, host string, req termapi.SendRequest) (termapi.SendResult, error) {
	var res termapi.SendResult
	err := s.onHost(ctx, host, hostOpSend, hostOpArgs{Send: &req}, &res)
	return res, err
}

// sendHost returns the host that must run a send of req when it is
// another one: the host its terminal id names, or the host of its
// Session's binding.
func (s *Service) sendHost(ctx context.Context, req termapi.SendRequest) (string, bool) {
	if req.TerminalID != "" {
		return s.foreign(req.TerminalID)
	}
	sess, err := s.o.Store.GetTermSession(ctx, req.SessionID)
	if err != nil || sess.Binding == nil {
		return "", false // the local path reports it
	}
	return s.foreign(sess.Binding.TerminalID)
}

// turnOn runs a Turn operation on the Turn's host when that is another
// one, and refuses one that names this host without its seal; ok is false
// when this host runs it (its own Turn, or a single machine's).
func (s *Service) turnOn(ctx context.Context, t *store.Turn, op, text string, out any) (ok bool, err error) {
	host := hostOf(t.Takeover.TerminalID)
	switch {
	case host == "":
		return false, nil
	case host == s.o.Host && !s.sealed(t):
		return true, fmt.Errorf("%w: terminal host %s did not create turn %s (its seal does not verify); it takes no operation here", termapi.ErrRefused, host, t.TurnID)
	case host == s.o.Host:
		return false, nil
	}
	return true, s.onHost(ctx, host, op, hostOpArgs{TurnID: t.TurnID, Text: text}, out)
}

// hostLostReason starts the stalled reason of a Turn whose host went away.
const hostLostReason = "host_lost"

// screenForeign decides, before the monitor claims its Turn, whether this
// host follows it: a Turn of another host is left to it (or, when that
// host is away past its lease, stalled host_lost), and a Turn that names
// this host but that it did not seal is refused. stop says the monitor
// must not follow it.
func (m *monitor) screenForeign(ctx context.Context) (stop bool, err error) {
	s := m.s
	if s.o.Host == "" {
		return false, nil
	}
	t, err := s.o.Store.GetTurn(ctx, m.turnID)
	if err != nil || !t.Status.Monitored() {
		return false, nil // the monitor reads it again and decides
	}
	host := hostOf(t.Takeover.TerminalID)
	switch {
	case host == "":
		return false, nil // a Turn of a single machine's store
	case host == s.o.Host:
		if s.sealed(t) {
			return false, nil
		}
		return true, m.underLease(ctx, m.refuseForged)
	}
	live, _, err := hostpkg.Published(ctx, s.o.Store, host)
	if err != nil || live {
		return true, err
	}
	return true, m.underLease(ctx, func(ctx context.Context, t *store.Turn) error {
		reason := hostLostReason + ": terminal host " + host + " stopped publishing for longer than its lease; the Turn is followed again when it comes back with the same pane and process"
		return m.write(ctx, stallWrite(t, hostLostReason, reason, time.Now().UnixMilli()))
	})
}

// underLease runs f on the Turn under its monitor lease, if the Turn
// still needs a monitor once the lease is held.
func (m *monitor) underLease(ctx context.Context, f func(ctx context.Context, t *store.Turn) error) error {
	l, lctx, release, err := m.h.Claim(ctx, store.LeaseMonitor, m.turnID)
	if errors.Is(err, store.ErrLeaseLost) {
		return nil
	}
	if err != nil {
		return err
	}
	defer release()
	m.lease = l
	t, err := m.s.o.Store.GetTurn(lctx, m.turnID)
	if err != nil || !t.Status.Monitored() {
		return err
	}
	return f(lctx, t)
}

// refuseForged fails a Turn that names this host's pane without this
// host's seal (written into the store by another host or process): it is
// never typed into or followed, and the pane's next input it may hold is
// released.
func (m *monitor) refuseForged(ctx context.Context, t *store.Turn) error {
	s := m.s
	reason := "refused: terminal host " + s.o.Host + " did not create this Turn (its seal does not verify), so it is never typed or followed here"
	now := time.Now().UnixMilli()
	w := store.TurnWrite{Turn: t, Events: []store.TurnEvent{event(now, "terminal_turn_refused", map[string]any{"reason": reason, "host": s.o.Host})}}
	if d, err := s.o.Store.GetDispatch(ctx, t.Takeover.TerminalKey); err == nil {
		releaseInput(&w, t, d, now)
	}
	failTurn(t, "forged_turn", reason)
	s.log.Warn("refused a Turn this host did not seal", "turn_id", t.TurnID, "terminal_id", t.Takeover.TerminalID)
	return m.write(ctx, w)
}

// resumeHostLost follows again each of this host's Turns that another
// host stalled host_lost while this one was away, when its pane still
// runs the same agent process.
func (s *Service) resumeHostLost(ctx context.Context) {
	ids, err := s.o.Store.TurnIDsWithStatus(ctx, termapi.TurnStalled, store.MaxPage)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("read stalled turns", "err", err)
		}
		return
	}
	for _, id := range ids {
		t, err := s.o.Store.GetTurn(ctx, id)
		if err != nil || t.Status != termapi.TurnStalled || !strings.HasPrefix(t.StalledReason, hostLostReason) ||
			hostOf(t.Takeover.TerminalID) != s.o.Host || !s.sealed(t) {
			continue
		}
		if _, err := s.findPane(ctx, t.Takeover.TerminalKey, t.Takeover.AgentPID, t.Takeover.ProcessBirth); err != nil {
			s.log.Info("a Turn stalled while its host was away stays stalled: its pane changed", "turn_id", id, "err", err)
			continue
		}
		now := time.Now()
		renewTurn(t, now, "host_returned")
		if err := s.write(ctx, t, event(now.UnixMilli(), "terminal_host_returned", map[string]any{"host": s.o.Host})); err != nil {
			s.log.Warn("resume a Turn after its host returned", "turn_id", id, "err", err)
			continue
		}
		s.startMonitor(ctx, id)
	}
}

// announceCallback tells the other hosts at once that a write queued a
// callback: on several machines the host that delivers it (one
// configured with its gateway) may be another one, which would otherwise
// find it only at its outbox's next poll.
func (s *Service) announceCallback(ctx context.Context) {
	if s.o.Host == "" {
		return
	}
	s.o.Store.AnnounceTerminalWork(context.WithoutCancel(ctx))
}
