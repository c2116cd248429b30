package watch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	"github.com/clawconnect/clawconnect/internal/terminal/redact"
	"github.com/clawconnect/clawconnect/termapi"
)

// Host is the monitor host a watch's follower runs in (one follower per
// watch across processes, by the watch's work lease).
type Host interface {
	// Claim takes kind's work lease of id for the host. The returned
	// context ends when the host loses the lease; release gives it back
	// and must be called when the follower stops.
	Claim(ctx context.Context, kind, id string) (l store.WorkLease, lctx context.Context, release func(), err error)
	// Follow calls look whenever the session files at paths or the
	// pane's output change, at the host's re-check tick (recheck true)
	// and when look's next timeout falls due, until look says stop, its
	// write loses the lease, or ctx ends. id names the watch in logs.
	Follow(ctx context.Context, pane agents.Pane, paths []string, id string,
		look func(ctx context.Context, recheck bool) (stop bool, next time.Time, err error)) error
	// Track names the records the follower of id reads at each look: the
	// host's re-check reads their versions in one query per kind.
	Track(id string, records ...Record)
	// Unchanged reports whether the host's last re-check read r at
	// version (so a copy held at version is still the stored one).
	Unchanged(r Record, version int64) bool
}

// Record names one stored record a follower reads at each look: a
// store.Version* kind and the record's id.
type Record struct{ Kind, ID string }

// reuse returns held when the look is the host's re-check and the re-check
// read held's record at held's version; otherwise it reads the record
// afresh.
func reuse[T any](h Host, recheck bool, r Record, held *T, version func(*T) int64, read func() (*T, error)) (*T, error) {
	if recheck && held != nil && h.Unchanged(r, version(held)) {
		return held, nil
	}
	return read()
}

func watchVersion(w *store.Watch) int64         { return w.Revision }
func sessionVersion(s *store.TermSession) int64 { return s.Revision }
func dispatchVersion(d *store.Dispatch) int64   { return d.Version }

// Follow runs the follower of the watch id under h until the watch ends,
// h loses its lease, or ctx ends. A watch another host follows is left to
// it (nil).
func (s *Service) Follow(ctx context.Context, id string, h Host) error {
	return (&watcher{h: h, s: s, id: id}).run(ctx)
}

// watcher follows one watch under its LeaseWatch work lease (keyed by the
// watch id, so one follower runs across processes).
type watcher struct {
	h     Host
	s     *Service
	id    string
	lease store.MonitorLease
	pane  agents.Pane
	agent agents.Agent
	find  agents.TaskFinder
	// watch, sess and ledger are as the last look left them (a look at
	// the host's re-check reuses them while their stored versions stay);
	// ledger is the watched terminal's dispatch entry
	// (Version 0: it has none), which the follower never writes.
	watch   *store.Watch
	sess    *store.TermSession
	ledger  *store.Dispatch
	spoiled bool
}

func (m *watcher) run(ctx context.Context) error {
	l, ctx, release, err := m.h.Claim(ctx, store.LeaseWatch, m.id)
	if errors.Is(err, store.ErrLeaseLost) {
		return nil // another host follows it
	}
	if err != nil {
		return err
	}
	m.lease = l
	defer release()
	w, err := m.s.o.Store.GetWatch(ctx, m.id)
	if err != nil {
		return err
	}
	if w.Status != store.WatchActive {
		return nil
	}
	if err := json.Unmarshal(w.Control, &m.pane); err != nil {
		return fmt.Errorf("watch %s has no readable pane record: %w", m.id, err)
	}
	var ok bool
	if m.agent, ok = m.s.o.Agents[w.Agent]; !ok {
		return fmt.Errorf("%w: no reader for agent %q in this build", termapi.ErrRefused, w.Agent)
	}
	if m.find, ok = m.agent.(agents.TaskFinder); !ok {
		return fmt.Errorf("watch %s: %s panes cannot be watched by this build", m.id, w.Agent)
	}
	return m.h.Follow(ctx, m.pane, m.agent.WatchPaths(m.pane, m.anchorOf(w)), m.id, m.check)
}

// anchorOf is the anchor scans start from: the acceptance evidence once
// the task was seen (it may bind a virgin anchor), else the watch's own.
func (m *watcher) anchorOf(w *store.Watch) json.RawMessage {
	if len(w.Acceptance) > 0 {
		return w.Acceptance
	}
	return w.Anchor
}

func (m *watcher) save(ctx context.Context, w *store.Watch, also func(context.Context, store.TerminalTx) error) error {
	w.UpdatedAt = time.Now().UnixMilli()
	err := m.s.o.Store.SaveWatch(ctx, store.WatchWrite{Watch: w, Also: also,
		Fence: &store.Fence{Owner: m.lease.Owner, Token: m.lease.Fence, Now: time.Now().UnixMilli()}})
	if err != nil {
		m.spoiled = true // the look's copy now differs from the stored watch
		return err
	}
	m.s.o.Announcer.Changed()
	return nil
}

// check looks at the watch once; it returns stop when the watch ended and
// when the next timeout falls due.
func (m *watcher) check(ctx context.Context, recheck bool) (bool, time.Time, error) {
	never := time.Now().Add(time.Hour)
	held := m.watch
	m.watch = nil
	w, err := reuse(m.h, recheck, Record{store.VersionWatch, m.id}, held, watchVersion,
		func() (*store.Watch, error) { return m.s.o.Store.GetWatch(ctx, m.id) })
	if err != nil {
		return false, never, err
	}
	defer func() {
		if !m.spoiled {
			m.watch = w
		}
		m.spoiled = false
	}()
	if w.Status != store.WatchActive {
		return true, never, nil
	}
	now := time.Now()
	ledgerKey := Record{store.VersionDispatch, w.TerminalKey}
	m.h.Track(m.id, Record{store.VersionWatch, m.id}, Record{store.VersionSession, w.SessionID}, ledgerKey)
	sess, err := reuse(m.h, recheck, Record{store.VersionSession, w.SessionID}, m.sess, sessionVersion,
		func() (*store.TermSession, error) { return m.s.o.Store.GetTermSession(ctx, w.SessionID) })
	m.sess = sess
	if err == nil {
		if b := sess.Binding; b == nil || b.BindingID != w.BindingID || b.Generation != w.BindingGeneration {
			return true, never, m.settle(ctx, w, KindInvalidated, "binding_superseded",
				"The watched pane's session context changed (new thread, resume or rebind) before the task ended; the watch stopped.", "")
		}
	}
	var alive, dead bool
	m.pane, alive, dead = m.s.o.Panes.Live(ctx, m.pane)
	d, err := reuse(m.h, recheck, ledgerKey, m.ledger, dispatchVersion,
		func() (*store.Dispatch, error) { return ledgerEntry(ctx, m.s.o.Store, w.TerminalKey) })
	m.ledger = d
	sent := err == nil && d.Version > 0 && d.PreparedAt >= w.CreatedAt
	if sent && d.MessageType == store.DispatchTransition {
		// A thread transition types into the pane: the watched task
		// belonged to the thread it leaves, and the requester is told so
		// (not that a Turn was sent: there is none).
		return true, never, m.settle(ctx, w, KindInvalidated, "thread_transition",
			"A thread transition ("+d.GenerationID+") started in the watched pane (new thread, resume or adopt); the task watched belonged to the thread it leaves, so the watch stopped.", "")
	} else if sent {
		// ClawConnect sent a Turn into the pane: it is followed as that
		// Turn, never reported as the human's task.
		return true, never, m.settle(ctx, w, KindInvalidated, "clawconnect_turn_sent",
			"A ClawConnect Turn ("+d.TurnID+") was sent to the watched pane; it is followed as that Turn and the watch stopped.", d.TurnID)
	}
	anchor := m.anchorOf(w)
	if w.NativeTurnID == "" {
		acc, err := m.find.StartedTask(ctx, m.pane, w.Anchor)
		if err != nil {
			m.diagnose(ctx, w, "task: "+err.Error())
		} else if acc != nil {
			w.NativeTurnID, w.Acceptance, w.StartedAt = acc.NativeTurnID, acc.Evidence, now.UnixMilli()
			if w.NativeThreadID == "" {
				w.NativeThreadID = acc.ThreadID
			}
			if err := m.save(ctx, w, nil); err != nil {
				return false, never, err
			}
			anchor = m.anchorOf(w)
		}
	}
	if w.NativeTurnID != "" {
		c, _, err := m.agent.Completion(ctx, m.pane, anchor, agents.Acceptance{NativeTurnID: w.NativeTurnID, ThreadID: w.NativeThreadID, Evidence: w.Acceptance})
		if err != nil {
			m.diagnose(ctx, w, "completion: "+err.Error())
		} else if c != nil {
			kind, body := KindCompleted, resultText(c.Text)
			switch c.Outcome {
			case "failed":
				kind = KindFailed
				body = "The " + w.Agent + " task stopped: " + body
			case agents.OutcomeCancelled:
				kind = KindFailed
				body = "The " + w.Agent + " task was interrupted in the terminal."
			}
			if body == "" {
				body = "(the agent finished without reply text)"
			}
			return true, never, m.settle(ctx, w, kind, c.Match, body, c.ID)
		}
	}
	if dead {
		return true, never, m.settle(ctx, w, KindInvalidated, "agent_process_exited",
			"The watched agent process exited before its task ended.", "")
	}
	if alive {
		if err := m.screen(ctx, w, now); err != nil {
			return false, never, err
		}
	}
	due := time.UnixMilli(w.DeadlineAt)
	if !now.Before(due) {
		return true, never, m.settle(ctx, w, KindTimedOut, "hard_timeout",
			fmt.Sprintf("The watch reached its lifetime of %s without the task ending.", time.Duration(w.DeadlineAt-w.CreatedAt)*time.Millisecond), "")
	}
	if due.Before(never) {
		return false, due, nil
	}
	return false, never, nil
}

// screen notifies each new approval prompt and each new question dialog
// once. Neither is answered from here: the human who started the task
// answers it in the terminal (respond and approve act on Turns only).
func (m *watcher) screen(ctx context.Context, w *store.Watch, now time.Time) error {
	text, err := m.s.o.Panes.Capture(ctx, m.pane)
	if err != nil {
		return nil
	}
	sc := m.agent.Screen(text)
	var kind, evidence, body string
	var meta map[string]any
	switch {
	case sc.Approval != nil && sc.Approval.Fingerprint != w.LastApprovalFingerprint:
		kind, evidence = KindApproval, sc.Approval.Fingerprint
		body = "The watched " + w.Agent + " task asks for approval (" + sc.Approval.Kind + "); answer it in the terminal."
		meta = map[string]any{"reason": "approval_required", "approval_kind": sc.Approval.Kind, "approval_fingerprint": sc.Approval.Fingerprint}
		if w.Agent == termapi.AgentCodex && sc.Approval.Command != "" {
			meta["command"] = redact.Redact(sc.Approval.Command)
		}
		w.LastApprovalFingerprint = sc.Approval.Fingerprint
	case sc.Approval == nil && sc.Question != nil && sc.Question.Fingerprint != w.LastQuestionFingerprint:
		q := storedQuestion(sc.Question, now.UnixMilli())
		kind, evidence = KindQuestion, q.Fingerprint
		body = questionBody(w.Agent, q)
		meta = map[string]any{"reason": "question", "question": q, "question_fingerprint": q.Fingerprint, "answerable": q.Answerable}
		w.LastQuestionFingerprint = q.Fingerprint
	default:
		return nil
	}
	id, also := notification(w, kind, evidence, body, meta, now.UnixMilli())
	if also != nil {
		w.Notifications = append(w.Notifications, id)
	}
	return m.save(ctx, w, also)
}

// ledgerEntry reads the terminal's dispatch ledger entry; a terminal that
// has none reads as an entry at Version 0, which a re-check can keep.
func ledgerEntry(ctx context.Context, st store.TerminalStore, key string) (*store.Dispatch, error) {
	d, err := st.GetDispatch(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return &store.Dispatch{TerminalKey: key}, nil
	}
	return d, err
}

// settle ends the watch with its one final notification.
func (m *watcher) settle(ctx context.Context, w *store.Watch, kind, match, body, evidence string) error {
	now := time.Now().UnixMilli()
	if evidence == "" {
		sum := sha256.Sum256([]byte(kind + "\n" + match + "\n" + w.NativeTurnID))
		evidence = hex.EncodeToString(sum[:])
	}
	status := map[string]string{KindCompleted: store.WatchCompleted, KindFailed: store.WatchFailed,
		KindTimedOut: store.WatchTimedOut, KindInvalidated: store.WatchInvalidated}[kind]
	id, also := notification(w, kind, evidence, body, map[string]any{"match": match, "outcome": kind}, now)
	w.Status = status
	w.Settlement = &store.WatchSettlement{Kind: kind, Text: body, Match: match, MessageID: id, SettledAt: now}
	if also != nil {
		w.Notifications = append(w.Notifications, id)
	}
	if err := m.save(ctx, w, also); err != nil {
		return err
	}
	m.s.log.Info("terminal watch settled", "watch_id", w.WatchID, "kind", kind, "message_id", id)
	return nil
}

// diagnose records a detector error once (redacted); it never settles the
// watch from a guess.
func (m *watcher) diagnose(ctx context.Context, w *store.Watch, msg string) {
	msg = redact.Redact(msg)
	if msg == w.Diagnostic {
		return
	}
	w.Diagnostic = msg
	if err := m.save(ctx, w, nil); err != nil {
		m.s.log.Warn("record watch diagnostic", "watch_id", w.WatchID, "err", err)
	}
}
