package terminal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"

	"github.com/clawconnect/clawconnect/internal/terminal/ids"
	"github.com/clawconnect/clawconnect/termapi"
)

// SessionView is a managed Session with its latest Turn, as the
// agent-session runtime reports them. Times are epoch milliseconds.
type SessionView struct {
	SessionID      string `json:"session_id"`
	Agent          string `json:"agent"`
	Status         string `json:"status"`
	TerminalID     string `json:"terminal_id,omitempty"`
	NativeThreadID string `json:"native_thread_id,omitempty"`
	CreatedAt      int64  `json:"created_at"`
	UpdatedAt      int64  `json:"updated_at"`
	DetachedAt     int64  `json:"detached_at,omitempty"`
	// Latest is the Session's newest Turn; nil before the first.
	Latest *termapi.TurnView `json:"latest_turn,omitempty"`
	// LatestUpdatedAt and LatestIdleSince date the newest Turn's last
	// change and its reply (0 when none).
	LatestUpdatedAt int64 `json:"latest_updated_at,omitempty"`
	LatestIdleSince int64 `json:"latest_idle_since,omitempty"`
}

// sessionView is the view of sess with its latest Turn.
func sessionView(ctx context.Context, st store.TerminalStore, sess *store.TermSession) (SessionView, error) {
	v := SessionView{SessionID: sess.SessionID, Agent: sess.Agent, Status: sess.Status,
		CreatedAt: sess.CreatedAt, UpdatedAt: sess.UpdatedAt, DetachedAt: sess.DetachedAt}
	if b := sess.Binding; b != nil {
		v.TerminalID, v.NativeThreadID = b.TerminalID, b.NativeThreadID
	}
	turns, err := st.SessionTurns(ctx, sess.SessionID, 1)
	if err != nil {
		return v, err
	}
	if len(turns) == 1 {
		tv := View(turns[0])
		v.Latest, v.LatestUpdatedAt, v.LatestIdleSince = &tv, turns[0].UpdatedAt, turns[0].IdleSince
	}
	return v, nil
}

// getSession reads a Session by the id a caller gave, with an error that
// says what to do when there is none.
func getSession(ctx context.Context, st store.TerminalStore, sessionID string) (*store.TermSession, error) {
	if err := ids.Check("session id", "session-", sessionID); err != nil {
		return nil, err
	}
	sess, err := st.GetTermSession(ctx, sessionID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: no session %s; terminal list shows the managed Sessions", termapi.ErrNotFound, sessionID)
	}
	return sess, err
}

// Session returns the managed Session and its latest Turn. It changes
// nothing.
func (s *Service) Session(ctx context.Context, sessionID string) (SessionView, error) {
	sess, err := getSession(ctx, s.o.Store, sessionID)
	if err != nil {
		return SessionView{}, fmt.Errorf("session: %w", err)
	}
	v, err := sessionView(ctx, s.o.Store, sess)
	if err != nil {
		return SessionView{}, fmt.Errorf("session: %w", err)
	}
	return v, nil
}

// Detach releases the Session from management: its ended Turn, if still
// open (waiting for approval, stalled), is closed with reason, and the
// Session is marked detached so that no session_exact send reaches it
// again. The pane and the agent are not touched. A Session whose Turn is
// still with the agent is refused: cancel the Turn first. Detaching a
// detached Session changes nothing.
func (s *Service) Detach(ctx context.Context, sessionID, reason string) (SessionView, error) {
	if reason == "" {
		reason = "detached"
	}
	for range 3 {
		sess, err := getSession(ctx, s.o.Store, sessionID)
		if err != nil {
			return SessionView{}, fmt.Errorf("detach: %w", err)
		}
		v, err := sessionView(ctx, s.o.Store, sess)
		if err != nil {
			return SessionView{}, fmt.Errorf("detach: %w", err)
		}
		if sess.Status == store.SessionDetached {
			return v, nil
		}
		if t := v.Latest; t != nil {
			switch {
			case Running(t.Status):
				return v, fmt.Errorf("detach: %w: turn %s is still with the agent (%s); cancel it first", termapi.ErrRefused, t.TurnID, t.Status)
			case t.Status.SendBlocking():
				if _, err := s.Close(ctx, t.TurnID, reason); err != nil && !errors.Is(err, termapi.ErrRefused) {
					return v, fmt.Errorf("detach: %w", err)
				}
			}
		}
		now := nowMs()
		sess.Status, sess.DetachedAt, sess.UpdatedAt = store.SessionDetached, now, now
		err = s.o.Store.SaveTermSession(ctx, sess)
		if errors.Is(err, store.ErrConflict) {
			continue // changed meanwhile: look again
		}
		if err != nil {
			return v, fmt.Errorf("detach: %w", err)
		}
		s.notify()
		return s.Session(ctx, sessionID)
	}
	return SessionView{}, fmt.Errorf("detach: session %s keeps changing; try again", sessionID)
}

// SessionFile returns the session file and anchor of the Turn, from its
// acceptance evidence when the agent took the request (a virgin Codex
// anchor is bound there), else from the anchor taken before Enter. The
// path is one of this machine's: for a Turn whose pane another terminal
// host runs, the error wraps termapi.ErrOtherHost and names that host (the
// file is on its machine), and a Turn that names this host without its
// seal is refused.
func (s *Service) SessionFile(ctx context.Context, turnID string) (termapi.SessionFile, error) {
	t, err := s.turn(ctx, turnID)
	if err != nil {
		return termapi.SessionFile{}, fmt.Errorf("session file: %w", err)
	}
	switch host := hostOf(t.Takeover.TerminalID); {
	case host == "":
	case host != s.o.Host:
		return termapi.SessionFile{}, fmt.Errorf("session file: %w: turn %s runs in pane %s of terminal host %s, so its session file is on that machine, not this one; follow the Turn's record instead (clawconnect terminal status %s)",
			termapi.ErrOtherHost, t.TurnID, t.Takeover.TerminalID, host, t.TurnID)
	case !s.sealed(t):
		return termapi.SessionFile{}, fmt.Errorf("session file: %w: terminal host %s did not create turn %s (its seal does not verify); its files are not read here", termapi.ErrRefused, host, t.TurnID)
	}
	out := termapi.SessionFile{TurnID: t.TurnID, Agent: t.Agent}
	raw := t.Takeover.Submission.AcceptanceEvidence
	if len(raw) == 0 {
		raw = t.Takeover.Submission.Anchor
	}
	var a struct {
		Path   string `json:"path"`
		Offset int64  `json:"offset_bytes"`
	}
	if len(raw) > 0 {
		if err := json.Unmarshal(agents.AnchorOf(raw), &a); err != nil {
			return out, fmt.Errorf("session file: turn %s: %w", turnID, err)
		}
	}
	out.Path, out.Offset = a.Path, a.Offset
	return out, nil
}
