package terminal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	"github.com/clawconnect/clawconnect/internal/terminal/outbox"
	"github.com/clawconnect/clawconnect/termapi"
)

// Terminal watches: a task a human
// typed into an agent pane, followed by the monitor host like a Turn and
// reported once — completed, failed, timed out or invalidated, plus one
// notification per approval prompt and per question dialog — through the
// callback outbox into the OpenClaw session that asked for the watch.

// activeTaskWait bounds the look for a running task's record.
const activeTaskWait = 3 * time.Second

// DefaultWatchTimeout is a watch's hard lifetime when none is given.
const DefaultWatchTimeout = 720 * time.Minute

// Watch notification kinds (the outbox row's kind is "watch_" + kind).
const (
	WatchKindApproval    = "approval"
	WatchKindQuestion    = "question"
	WatchKindCompleted   = "completed"
	WatchKindFailed      = "failed"
	WatchKindTimedOut    = "timed_out"
	WatchKindInvalidated = "invalidated"
)

// WatchRequest asks to watch the task a human runs (or is about to start)
// in a pane.
type WatchRequest struct {
	TerminalID string `json:"terminal_id"`
	// OriginSession is the OpenClaw session key notified; required.
	OriginSession string `json:"origin_session"`
	// GatewayURL serves OriginSession; "" = the service's CallbackGateway.
	GatewayURL string `json:"gateway_url,omitempty"`
	// Timeout is the watch's hard lifetime; DefaultWatchTimeout.
	Timeout time.Duration `json:"timeout,omitempty"`
}

// WatchView is the visible state of a watch.
type WatchView struct {
	WatchID        string                 `json:"watch_id"`
	Status         string                 `json:"status"`
	Agent          string                 `json:"agent"`
	TerminalID     string                 `json:"terminal_id"`
	SessionID      string                 `json:"session_id"`
	OriginSession  string                 `json:"origin_session"`
	NativeTurnID   string                 `json:"native_turn_id,omitempty"`
	TaskSeen       bool                   `json:"task_seen"`
	CreatedAt      string                 `json:"created_at"`
	DeadlineAt     string                 `json:"deadline_at"`
	Settlement     *store.WatchSettlement `json:"settlement,omitempty"`
	Diagnostic     string                 `json:"diagnostic,omitempty"`
	Notifications  []termapi.CallbackView `json:"notifications"`
	PendingActions []string               `json:"next_steps,omitempty"`
}

func newWatchID(now time.Time) string {
	return "watch-" + now.UTC().Format("20060102T150405") + "-" + randHex(4)
}

// isWatchID tells a watch's monitor key from a Turn's.
func isWatchID(id string) bool { return strings.HasPrefix(id, "watch-") }

// ourTurnRuns reports (as a refusal) a Turn of ours that still owns the
// pane's next input.
func (s *Service) ourTurnRuns(ctx context.Context, p agents.Pane) error {
	d, err := s.o.Store.GetDispatch(ctx, p.Key)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	var status termapi.TurnStatus
	if t, err := s.o.Store.GetTurn(ctx, d.TurnID); err == nil {
		status = t.Status
	}
	if d.Blocks(status) || (status != "" && status.SendBlocking()) {
		return fmt.Errorf("%w: Turn %s of ClawConnect runs in this pane (%s); follow it with `clawconnect terminal status %s` instead of a watch",
			termapi.ErrRefused, d.TurnID, status, d.TurnID)
	}
	return nil
}

// Watch starts following the task a human runs in the pane, or the next
// one they start there, and notifies OriginSession once when it completes,
// fails or times out (and once per approval prompt and question dialog). It is refused while a
// Turn of ClawConnect runs in the pane, while the pane already has an
// active watch, and for a pane showing a dialog or holding a draft.
func (s *Service) Watch(ctx context.Context, req WatchRequest) (WatchView, error) {
	if err := checkTerminalID(req.TerminalID); err != nil {
		return WatchView{}, fmt.Errorf("watch: %w", err)
	}
	if req.OriginSession == "" {
		return WatchView{}, fmt.Errorf("watch: %w: give the OpenClaw session to notify (--origin-session SESSION_KEY)", termapi.ErrBadInput)
	}
	if err := checkSessionKey(req.OriginSession); err != nil {
		return WatchView{}, fmt.Errorf("watch: %w", err)
	}
	if req.Timeout < 0 {
		return WatchView{}, fmt.Errorf("watch: %w: the timeout must be positive", termapi.ErrBadInput)
	}
	ws := s.o.Store
	if req.GatewayURL == "" {
		req.GatewayURL = s.o.CallbackGateway
	}
	p, a, id, err := s.followTarget(ctx, req.TerminalID)
	if err != nil {
		return WatchView{}, fmt.Errorf("watch: %w", err)
	}
	finder, ok := a.(agents.TaskFinder)
	if !ok {
		return WatchView{}, fmt.Errorf("watch: %w: %s panes cannot be watched by this build", termapi.ErrRefused, p.Agent)
	}
	if err := s.ourTurnRuns(ctx, p); err != nil {
		return WatchView{}, fmt.Errorf("watch: %w", err)
	}
	text, err := s.o.Terminals.Capture(ctx, p)
	if err != nil {
		return WatchView{}, fmt.Errorf("watch: capture pane: %w", err)
	}
	sc := a.Screen(text)
	var anchor json.RawMessage
	switch {
	case sc.Dialog:
		return WatchView{}, fmt.Errorf("watch: %w: the pane shows a dialog or menu; close it in the terminal first", termapi.ErrRefused)
	case sc.Activity == "idle" && !sc.ComposerEmpty:
		return WatchView{}, fmt.Errorf("watch: %w: the composer holds an unsent draft; press Enter in the pane first (then watch the running task), or clear it", termapi.ErrRefused)
	case sc.Activity == "idle":
		// The human has not started the task yet: follow the next one.
		if anchor, err = a.Anchor(ctx, p, id); err != nil {
			return WatchView{}, fmt.Errorf("watch: anchor the session file: %w", err)
		}
	default:
		// The screen shows work a moment before the session file records
		// the task: look for it a little while.
		for deadline := time.Now().Add(activeTaskWait); ; {
			if anchor, err = finder.ActiveTaskAnchor(ctx, p, id); err == nil || time.Now().After(deadline) {
				break
			}
			select {
			case <-ctx.Done():
				return WatchView{}, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
		if err != nil {
			return WatchView{}, fmt.Errorf("watch: %w: the agent is %s but its running task cannot be found in its session file (%v); start the watch before the human presses Enter",
				termapi.ErrRefused, sc.Activity, Redact(err.Error()))
		}
	}
	sess, err := s.followSession(ctx, p, id)
	if err != nil {
		return WatchView{}, fmt.Errorf("watch: %w", err)
	}
	timeout := req.Timeout
	if timeout == 0 {
		timeout = DefaultWatchTimeout
	}
	now := time.Now()
	ctrl, _ := json.Marshal(p)
	w := &store.Watch{WatchID: newWatchID(now), Agent: p.Agent, TerminalID: p.TerminalID, TerminalKey: p.Key, PID: p.PID,
		ProcessBirth: p.Birth, Control: ctrl, SessionID: sess.SessionID, BindingID: sess.Binding.BindingID,
		BindingGeneration: sess.Binding.Generation, NativeThreadID: id.ThreadID, OriginSessionKey: req.OriginSession,
		GatewayURL: req.GatewayURL, Anchor: anchor, Status: store.WatchActive, CreatedAt: now.UnixMilli(),
		UpdatedAt: now.UnixMilli(), DeadlineAt: now.Add(timeout).UnixMilli()}
	if err := ws.CreateWatch(ctx, w); err != nil {
		if errors.Is(err, store.ErrWatched) {
			return WatchView{}, fmt.Errorf("watch: %w: the pane already has an active watch; unwatch it first: %w", termapi.ErrRefused, err)
		}
		return WatchView{}, fmt.Errorf("watch: %w", err)
	}
	s.log.Info("terminal watch started", "watch_id", w.WatchID, "terminal_id", p.TerminalID, "session_key", req.OriginSession)
	s.notify()
	s.startMonitor(ctx, w.WatchID)
	return s.watchView(ctx, w), nil
}

// activeWatch returns the id of the terminal key's active watch, or "".
func (s *Service) activeWatch(ctx context.Context, terminalKey string) (string, error) {
	ws := s.o.Store
	list, err := ws.TerminalWatches(ctx, terminalKey, 1)
	if err != nil || len(list) == 0 || list[0].Status != store.WatchActive {
		return "", err
	}
	return list[0].WatchID, nil
}

// WatchStatus returns the watch named by a watch id, or the active watch
// of a pane named by its terminal id, and its notifications' delivery.
func (s *Service) WatchStatus(ctx context.Context, id string) (WatchView, error) {
	w, err := s.resolveWatch(ctx, id)
	if err != nil {
		return WatchView{}, fmt.Errorf("watch status: %w", err)
	}
	return s.watchView(ctx, w), nil
}

// Watches returns up to limit active watches (store.MaxPage when limit is
// below 1 or above it), oldest first, each with its
// notifications' delivery: what a dashboard shows beside the panes. A
// store that keeps no watches has none. It changes nothing.
func (s *Service) Watches(ctx context.Context, limit int) ([]WatchView, error) {
	ws := s.o.Store
	if limit < 1 || limit > store.MaxPage {
		limit = store.MaxPage
	}
	active, err := ws.ActiveWatches(ctx, limit)
	if err != nil {
		return nil, fmt.Errorf("watches: %w", err)
	}
	out := make([]WatchView, 0, len(active))
	for _, w := range active {
		out = append(out, s.watchView(ctx, w))
	}
	return out, nil
}

// resolveWatch returns the watch a watch id names, or the active watch of
// the pane a terminal id names.
func (s *Service) resolveWatch(ctx context.Context, id string) (*store.Watch, error) {
	if isWatchID(id) {
		return s.getWatch(ctx, id)
	}
	if err := checkTerminalID(id); err != nil {
		return nil, err
	}
	ws := s.o.Store
	active, err := ws.ActiveWatches(ctx, store.MaxPage)
	if err != nil {
		return nil, err
	}
	for _, a := range active {
		if a.TerminalID == id {
			return a, nil
		}
	}
	return nil, fmt.Errorf("%w: terminal %s has no active watch", termapi.ErrNotFound, id)
}

func (s *Service) getWatch(ctx context.Context, watchID string) (*store.Watch, error) {
	if err := checkID("watch id", "watch-", watchID); err != nil {
		return nil, err
	}
	ws := s.o.Store
	w, err := ws.GetWatch(ctx, watchID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: no watch %s", termapi.ErrNotFound, watchID)
	}
	return w, err
}

// Unwatch cancels the active watch named by a watch id or a terminal id:
// nothing more is notified for it (notifications already queued are still
// delivered). A watch that already ended is returned unchanged.
func (s *Service) Unwatch(ctx context.Context, id string) (WatchView, error) {
	ws := s.o.Store
	w, err := s.resolveWatch(ctx, id)
	if err != nil {
		return WatchView{}, fmt.Errorf("unwatch: %w", err)
	}
	for range 5 {
		if w.Status != store.WatchActive {
			return s.watchView(ctx, w), nil
		}
		now := nowMs()
		w.Status, w.UpdatedAt = store.WatchCancelled, now
		w.Settlement = &store.WatchSettlement{Kind: store.WatchCancelled, Text: "unwatched", SettledAt: now}
		err = ws.SaveWatch(ctx, store.WatchWrite{Watch: w})
		if err == nil {
			s.notify()
			return s.watchView(ctx, w), nil
		}
		if !errors.Is(err, store.ErrConflict) {
			return WatchView{}, fmt.Errorf("unwatch: %w", err)
		}
		if w, err = ws.GetWatch(ctx, w.WatchID); err != nil {
			return WatchView{}, fmt.Errorf("unwatch: %w", err)
		}
	}
	return WatchView{}, fmt.Errorf("unwatch %s: %w: the watch kept changing; retry", w.WatchID, termapi.ErrRefused)
}

func (s *Service) watchView(ctx context.Context, w *store.Watch) WatchView {
	v := WatchView{WatchID: w.WatchID, Status: w.Status, Agent: w.Agent, TerminalID: w.TerminalID, SessionID: w.SessionID,
		OriginSession: w.OriginSessionKey, NativeTurnID: w.NativeTurnID, TaskSeen: w.NativeTurnID != "",
		CreatedAt: ts(w.CreatedAt), DeadlineAt: ts(w.DeadlineAt), Settlement: w.Settlement, Diagnostic: w.Diagnostic,
		Notifications: []termapi.CallbackView{}}
	if cbs, err := s.o.Store.TurnCallbacks(ctx, w.WatchID, 20); err == nil {
		for _, cb := range cbs {
			v.Notifications = append(v.Notifications, *callbackView(cb))
		}
	}
	if w.Status == store.WatchActive {
		v.PendingActions = []string{"clawconnect terminal unwatch " + w.WatchID}
	}
	return v
}

// watchMessageID is the deterministic id of a watch notification: the same
// evidence always yields the same id.
func watchMessageID(watchID, kind, evidence string) string {
	b, _ := json.Marshal(map[string]any{"schema": "clawconnect/terminal-watch-notification", "version": 1,
		"watch_id": watchID, "kind": kind, "evidence_fingerprint": evidence})
	sum := sha256.Sum256(b)
	return "msg-watch-" + hex.EncodeToString(sum[:])[:32]
}

// watchNotification returns the outbox hook of one watch notification. It
// queues nothing (and records why on the watch) unless the Session binding
// the watch started in is still current, or the notification is the
// watch's invalidation.
func watchNotification(w *store.Watch, kind, evidence, body string, meta map[string]any, now int64) (string, func(context.Context, store.TerminalTx) error) {
	id := watchMessageID(w.WatchID, kind, evidence)
	if w.OriginSessionKey == "" {
		return "", nil
	}
	typ, requires := MsgDone, false
	switch kind {
	case WatchKindApproval, WatchKindQuestion:
		typ, requires = MsgQuestion, true
	case WatchKindFailed, WatchKindTimedOut, WatchKindInvalidated:
		typ = MsgError
	}
	md := map[string]any{"source": "terminal_watch", "kind": kind, "watch_id": w.WatchID, "terminal_id": w.TerminalID,
		"gateway_session": w.OriginSessionKey, "agent": w.Agent, "native_turn_id": w.NativeTurnID}
	for k, v := range meta {
		md[k] = v
	}
	cm := outbox.CallbackMessage{ID: id, TS: now, From: actorOf(w.Agent), To: ActorOpenClaw, Type: typ, RequiresResponse: requires,
		Body: body, SessionID: w.SessionID, TurnID: w.WatchID, ConversationID: w.WatchID, Metadata: md}
	watch := *w
	return id, func(ctx context.Context, tx store.TerminalTx) error {
		sess, err := tx.GetTermSession(ctx, watch.SessionID)
		if err != nil {
			return fmt.Errorf("prepare watch notification: %w", err)
		}
		// Fenced: once the pane's context moved on, nothing of the old
		// task is reported; the watch record says why. The invalidation
		// itself is the exception: it is how the requester learns the
		// watch ended (a thread transition, a rebind), whether the
		// watcher saw the transition start or only its commit.
		if b := sess.Binding; kind != WatchKindInvalidated && (b == nil || b.BindingID != watch.BindingID || b.Generation != watch.BindingGeneration) {
			return nil
		}
		msg, err := json.Marshal(cm)
		if err != nil {
			return fmt.Errorf("prepare watch notification: %w", err)
		}
		return tx.PutCallback(ctx, &store.Callback{MessageID: id, TurnID: watch.WatchID, SessionID: watch.SessionID,
			Kind: "watch_" + kind, SessionKey: watch.OriginSessionKey, GatewayURL: watch.GatewayURL, BindingID: watch.BindingID,
			Generation: watch.BindingGeneration, Message: msg, Status: termapi.CallbackPending, NextAttemptAt: now,
			CreatedAt: now, UpdatedAt: now})
	}
}
