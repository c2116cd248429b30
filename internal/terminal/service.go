package terminal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/request"
	"github.com/clawconnect/clawconnect/internal/terminal/screen"

	"github.com/clawconnect/clawconnect/termapi"
)

// Defaults of Options.
const (
	DefaultInactivityTimeout = 60 * time.Minute
	DefaultHardTimeout       = 720 * time.Minute
	DefaultAcceptanceTimeout = 5 * time.Second
	DefaultDraftTimeout      = 2 * time.Second
)

// Send scopes: what a send is bound to (docs/GLOSSARY.md).
const (
	ScopeSessionExact          = "session_exact"
	ScopeTerminalFollowCurrent = "terminal_follow_current"
)

// Submission outcomes reported by Send and Respond (termapi's).
const (
	OutcomeAccepted          = termapi.OutcomeAccepted
	OutcomePendingAcceptance = termapi.OutcomePendingAcceptance
	OutcomeNotAccepted       = termapi.OutcomeNotAccepted
	OutcomeUncertain         = termapi.OutcomeUncertain
	OutcomeNotSent           = termapi.OutcomeNotSent
)

// Options configures a Service. Zero values are the documented defaults.
type Options struct {
	// Store holds the records; required.
	Store store.TerminalStore
	// Terminals finds panes and does their I/O; required.
	Terminals Terminals
	// Agents maps an agent kind ("codex", "claude") to its reader.
	Agents map[string]Agent
	// Logger receives operational logs; nil discards them.
	Logger *slog.Logger
	// InactivityTimeout and HardTimeout stall a Turn; 60 and 720 minutes.
	InactivityTimeout, HardTimeout time.Duration
	// AcceptanceTimeout bounds the wait for native acceptance; 5 s.
	AcceptanceTimeout time.Duration
	// DraftTimeout bounds the wait for the typed draft to show; 2 s.
	DraftTimeout time.Duration
	// CallbackGateway is the gateway URL recorded on a Turn sent with an
	// origin session and no gateway of its own.
	CallbackGateway string
	// AllowUnproven lets a Turn go to an agent version the readers were
	// not proven against (CLAWCONNECT_TERMINAL_UNPROVEN); the Turn is
	// marked with the version. False refuses such a send.
	AllowUnproven bool
	// AutoApprove are the auto-approve rules (CLAWCONNECT_TERMINAL_AUTO_APPROVE_FILE);
	// none by default.
	AutoApprove []AutoApproveRule
	// Host is this machine's host name when terminals are shared with
	// other machines (multihost.go); "" for a single machine. HostKey
	// seals the Turns this host creates.
	Host    string
	HostKey []byte
}

// Service is the Turn service. It is safe for concurrent use.
type Service struct {
	o   Options
	log *slog.Logger

	mu      sync.Mutex
	changed chan struct{} // closed and replaced at every change
	// waiters are the wake-up channels of the Waits on each Turn; a
	// change of one Turn wakes only its own.
	waiters map[string]map[chan struct{}]struct{}
	kick    func() // called at every change (the outbox); may be nil
	// watch hands work to this process's host; false means no host runs
	// here yet (it queued the id).
	watch func(turnID string) bool

	// transitionHook, if set, is called after each transition step is
	// stored (tests stop a transition there).
	transitionHook func(status string)

	// inv is the last pane inventory, shared by monitors so that many
	// open Turns cost one tmux list and /proc scan per interval, and
	// indexed by pane key so that each finds its pane without scanning
	// every other.
	invMu    sync.Mutex
	invAt    time.Time
	invByKey map[string][]Pane
	invErr   error

	// inputs caches List's human-input scans per pane (inputscan.go).
	inputs inputScans

	// keySockets holds the recorded sockets followKey checked already.
	keySockets sync.Map

	// holding counts the work leases this process holds for itself
	// (holdWork) while it is registered as their owner; guarded by mu.
	holding int
}

// livePane looks p up in an inventory at most maxAge old (monitors only;
// a send always discovers afresh): the pane listed under p's key that runs
// p's agent process incarnation, if any, and the inventory's error.
func (s *Service) livePane(ctx context.Context, maxAge time.Duration, p Pane) (Pane, bool, error) {
	s.invMu.Lock()
	defer s.invMu.Unlock()
	if s.invAt.IsZero() || time.Since(s.invAt) >= maxAge {
		panes, err := s.o.Terminals.Discover(ctx)
		s.invByKey, s.invErr, s.invAt = make(map[string][]Pane, len(panes)), err, time.Now()
		for _, q := range panes {
			s.invByKey[q.Key] = append(s.invByKey[q.Key], q)
		}
	}
	found, ok := Pane{}, false
	for _, q := range s.invByKey[p.Key] {
		if q.PID == p.PID && q.Birth == p.Birth {
			found, ok = q, true
		}
	}
	return found, ok, s.invErr
}

// NewService returns a Service over o.
func NewService(o Options) *Service {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.InactivityTimeout <= 0 {
		o.InactivityTimeout = DefaultInactivityTimeout
	}
	if o.HardTimeout <= 0 {
		o.HardTimeout = DefaultHardTimeout
	}
	if o.AcceptanceTimeout <= 0 {
		o.AcceptanceTimeout = DefaultAcceptanceTimeout
	}
	if o.DraftTimeout <= 0 {
		o.DraftTimeout = DefaultDraftTimeout
	}
	return &Service{o: o, log: o.Logger, changed: make(chan struct{}), waiters: map[string]map[chan struct{}]struct{}{}}
}

// notify reports a change made by this process: it wakes the Waits on
// the Turns named (a change of no Turn wakes none) and every reader of
// changes.
func (s *Service) notify(turnIDs ...string) {
	s.mu.Lock()
	close(s.changed)
	s.changed = make(chan struct{})
	for _, id := range turnIDs {
		for ch := range s.waiters[id] {
			select {
			case ch <- struct{}{}:
			default: // a wake-up is already pending
			}
		}
	}
	kick := s.kick
	s.mu.Unlock()
	if kick != nil {
		kick()
	}
}

// waitTurn registers a waiter on the Turn: the channel receives a value
// after each change of it that this process notifies (changes not yet
// received coalesce into one). stop ends the registration.
func (s *Service) waitTurn(turnID string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	set := s.waiters[turnID]
	if set == nil {
		set = map[chan struct{}]struct{}{}
		s.waiters[turnID] = set
	}
	set[ch] = struct{}{}
	return ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(set, ch)
		if len(set) == 0 {
			delete(s.waiters, turnID)
		}
	}
}

// setKick makes every change also call kick (the outbox's wake-up).
func (s *Service) setKick(kick func()) {
	s.mu.Lock()
	s.kick = kick
	s.mu.Unlock()
}

func (s *Service) changes() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// startMonitor hands a Turn (or a "watch-" id) that needs following to
// this process's running host, or, when none runs here, announces it on
// the store's feed so the host of another process takes it at once. The
// announcement is made even if ctx ends: the work is already stored.
func (s *Service) startMonitor(ctx context.Context, turnID string) {
	s.mu.Lock()
	w := s.watch
	s.mu.Unlock()
	if w != nil && w(turnID) {
		return
	}
	if f, ok := s.o.Store.(store.TerminalWorkFeed); ok {
		f.AnnounceTerminalWork(context.WithoutCancel(ctx))
	}
}

func nowMs() int64 { return time.Now().UnixMilli() }

func (s *Service) agent(kind string) (Agent, error) {
	a, ok := s.o.Agents[kind]
	if !ok {
		return nil, fmt.Errorf("%w: no reader for agent %q in this build", ErrRefused, kind)
	}
	return a, nil
}

// submissionPayload checks a request and returns the exact text sent and
// its sha256 hex.
func submissionPayload(text string) (string, string, error) {
	p, err := request.Prepare(text)
	switch {
	case errors.Is(err, request.ErrEmpty):
		return "", "", fmt.Errorf("%w: the request is empty; say what the agent should do", ErrBadInput)
	case errors.Is(err, request.ErrSlashCommand):
		return "", "", fmt.Errorf("%w: the request starts with a slash command; terminal sends never run native commands — rephrase it as plain text", ErrBadInput)
	case err != nil:
		return "", "", fmt.Errorf("%w: %w; nothing was typed", ErrBadInput, err)
	}
	return p.Text, p.Hash, nil
}

// freshness is the private token of a send target: the Session, its binding
// and the live incarnation and native thread. It is derived here and
// re-derived before every side effect; callers never pass it.
func freshness(sess *store.TermSession, p Pane, id Identity) string {
	b, _ := json.Marshal(map[string]any{
		"version": 2, "session_id": sess.SessionID, "status": sess.Status,
		"binding_id": sess.Binding.BindingID, "generation": sess.Binding.Generation,
		"terminal_id": p.TerminalID, "terminal_key": p.Key, "pid": p.PID, "birth": p.Birth, "thread": id.ThreadID,
	})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// findPane returns the live agent pane with terminal key, verifying (when
// pid > 0) that the same process incarnation still runs in it.
func (s *Service) findPane(ctx context.Context, key string, pid int, birth string) (Pane, error) {
	s.followKey(key)
	panes, err := s.o.Terminals.Discover(ctx)
	if err != nil {
		return Pane{}, fmt.Errorf("discover panes: %w", err)
	}
	var found []Pane
	for _, p := range panes {
		if p.Key == key {
			found = append(found, p)
		}
	}
	switch {
	case len(found) == 0:
		return Pane{}, fmt.Errorf("%w: the pane is gone or no longer runs a coding agent; run `clawconnect terminal list`", ErrRefused)
	case len(found) > 1:
		return Pane{}, fmt.Errorf("%w: %d agent processes claim the pane; it is not controllable until one exits", ErrRefused, len(found))
	}
	p := found[0]
	if p.NotControllable {
		return p, fmt.Errorf("%w: the pane is not controllable now (%s)", ErrRefused, p.Reason)
	}
	if pid > 0 && (p.PID != pid || p.Birth != birth) {
		return p, fmt.Errorf("%w: the agent process in the pane changed (was pid %d, now %d); send with --terminal %s to follow the new one",
			ErrRefused, pid, p.PID, p.TerminalID)
	}
	return p, nil
}

// checkScreen refuses a pane that is busy, shows a dialog, or holds a draft.
func (s *Service) checkScreen(ctx context.Context, a Agent, p Pane) (Screen, error) {
	sc, err := s.paintedScreen(ctx, a, p)
	if err != nil {
		return Screen{}, err
	}
	switch {
	case sc.Approval != nil:
		return sc, fmt.Errorf("%w: the pane shows an approval prompt; answer it (approve/cancel the Turn that owns it) before sending", ErrRefused)
	case sc.Question != nil:
		return sc, fmt.Errorf("%w: the pane shows the agent's question; answer it (respond to the Turn that owns it, or in the terminal) before sending", ErrRefused)
	case sc.Dialog:
		return sc, fmt.Errorf("%w: the pane shows a dialog or menu; close it in the terminal first", ErrRefused)
	case sc.Activity != "idle":
		return sc, fmt.Errorf("%w: the agent is busy (%s); wait for it to finish", ErrRefused, sc.Activity)
	case !sc.ComposerEmpty:
		return sc, fmt.Errorf("%w: the composer holds unsent text; clear it in the terminal first", ErrRefused)
	}
	return sc, nil
}

// paintWait bounds how long paintedScreen waits for a pane to paint.
const paintWait = 5 * time.Second

// paintedScreen reads the pane's screen. A screen that cannot be read
// (unknown activity: no composer drawn) is most often a TUI between
// clearing its screen and painting it again, as Codex does after a new
// thread, or one that has not painted yet: it waits for the pane's output
// (bounded by paintWait) and reads it again, rather than take a repaint
// for a busy agent. Without an OutputWatcher the first read stands.
func (s *Service) paintedScreen(ctx context.Context, a Agent, p Pane) (Screen, error) {
	text, err := s.o.Terminals.Capture(ctx, p)
	if err != nil {
		return Screen{}, fmt.Errorf("capture pane: %w", err)
	}
	sc := a.Screen(text)
	ow, ok := s.o.Terminals.(OutputWatcher)
	if sc.Activity != string(screen.Unknown) || !ok {
		return sc, nil
	}
	wctx, cancel := context.WithTimeout(ctx, paintWait)
	defer cancel()
	out, err := ow.WatchOutput(wctx, p)
	if err != nil {
		return sc, nil // the screen read stands
	}
	for {
		// Read once more after the watch started: a paint between the
		// first read and the watch is not missed.
		text, err := s.o.Terminals.Capture(ctx, p)
		if err != nil {
			return Screen{}, fmt.Errorf("capture pane: %w", err)
		}
		if sc = a.Screen(text); sc.Activity != string(screen.Unknown) {
			return sc, nil
		}
		select {
		case <-wctx.Done():
			if err := ctx.Err(); err != nil {
				return Screen{}, fmt.Errorf("capture pane: %w", err)
			}
			return sc, nil
		case _, ok := <-out:
			if !ok {
				return sc, nil // the watch ended: the last read stands
			}
		}
	}
}

// SendRequest is a request to start a new Turn. Exactly one of SessionID (termapi.SendRequest).
type SendRequest = termapi.SendRequest

// checkSessionKey validates an OpenClaw session key given as a callback
// origin.
func checkSessionKey(k string) error {
	if len(k) > 512 {
		return fmt.Errorf("%w: the origin session key is longer than 512 bytes", ErrBadInput)
	}
	for _, r := range k {
		if r <= ' ' || r == 0x7f {
			return fmt.Errorf("%w: the origin session key %q contains a space or control character", ErrBadInput, k)
		}
	}
	if strings.HasPrefix(k, "-") {
		// OpenClaw keys never start with '-': a flag was taken as the key.
		return fmt.Errorf("%w: the origin session key %q starts with '-'; a flag was probably taken for it (give the key right after --origin-session)", ErrBadInput, k)
	}
	return nil
}

// checkPrincipal validates the MCP caller a Turn is sent for.
func checkPrincipal(p string) error {
	if len(p) > 256 {
		return fmt.Errorf("%w: the principal is longer than 256 bytes", ErrBadInput)
	}
	for _, r := range p {
		if r < ' ' || r == 0x7f {
			return fmt.Errorf("%w: the principal %q contains a control character", ErrBadInput, p)
		}
	}
	return nil
}

// SendResult is what Send and Respond report (termapi.SendResult).
type SendResult = termapi.SendResult

// Send starts a new Turn: it verifies the target, takes the terminal's next
// input in the store, types the request, presses Enter, and waits (at most
// the acceptance timeout) for native evidence that the agent took it. The
// Turn is then followed by the monitor host. Bad input and a target that
// cannot take the request are refused before anything changes.
func (s *Service) Send(ctx context.Context, req SendRequest) (SendResult, error) {
	payload, hash, err := submissionPayload(req.Request)
	if err != nil {
		return SendResult{}, fmt.Errorf("send: %w", err)
	}
	if err := checkSessionKey(req.OriginSession); err != nil {
		return SendResult{}, fmt.Errorf("send: %w", err)
	}
	if err := checkPrincipal(req.Principal); err != nil {
		return SendResult{}, fmt.Errorf("send: %w", err)
	}
	if err := termapi.CheckTimeouts(req); err != nil {
		return SendResult{}, fmt.Errorf("send: %w", err)
	}
	if req.GatewayURL == "" {
		req.GatewayURL = s.o.CallbackGateway
	}
	if (req.SessionID == "") == (req.TerminalID == "") {
		return SendResult{}, fmt.Errorf("send: %w: give exactly one of a session id (session_exact; --session on the command line) or a terminal id (terminal_follow_current; --terminal), as `clawconnect terminal list` shows them", ErrBadInput)
	}
	if host, ok := s.sendHost(ctx, req); ok {
		return s.sendOn(ctx, host, req)
	}
	var (
		sess *store.TermSession
		p    Pane
		a    Agent
		id   Identity
	)
	if req.SessionID != "" {
		if err := checkID("session id", "session-", req.SessionID); err != nil {
			return SendResult{}, fmt.Errorf("send: %w", err)
		}
		if sess, p, a, id, err = s.exactTarget(ctx, req.SessionID); err != nil {
			return SendResult{}, fmt.Errorf("send: %w", err)
		}
	} else {
		if err := checkTerminalID(req.TerminalID); err != nil {
			return SendResult{}, fmt.Errorf("send: %w", err)
		}
		if p, a, id, err = s.followTarget(ctx, req.TerminalID); err != nil {
			return SendResult{}, fmt.Errorf("send: %w", err)
		}
		if err := s.checkThreadSwitch(ctx, p, id); err != nil {
			return SendResult{}, fmt.Errorf("send: %w", err)
		}
	}
	if _, err := s.checkScreen(ctx, a, p); err != nil {
		return SendResult{}, fmt.Errorf("send: %w", err)
	}
	unproven, err := s.checkVersion(a, p)
	if err != nil {
		return SendResult{}, fmt.Errorf("send: %w", err)
	}
	if sess == nil {
		if sess, err = s.followSession(ctx, p, id); err != nil {
			return SendResult{}, fmt.Errorf("send: %w", err)
		}
	}
	token := freshness(sess, p, id)
	anchor, err := a.Anchor(ctx, p, id)
	if err != nil {
		return SendResult{}, fmt.Errorf("send: anchor the session file: %w", err)
	}
	now := time.Now()
	inact, hard := s.o.InactivityTimeout, s.o.HardTimeout
	if req.InactivityTimeout > 0 {
		inact = req.InactivityTimeout
	}
	if req.HardTimeout > 0 {
		hard = req.HardTimeout
	}
	ctrl, _ := json.Marshal(p)
	turn := &store.Turn{
		TurnID: newTurnID(now), SessionID: sess.SessionID, Agent: sess.Agent, Workspace: sess.Workspace,
		TerminalBindingID: sess.Binding.BindingID, TerminalBindingGeneration: sess.Binding.Generation,
		NativeThreadID: id.ThreadID, UserRequest: payload, Status: store.TurnCreated,
		CreatedAt: now.UnixMilli(), UpdatedAt: now.UnixMilli(),
		OriginSessionKey: req.OriginSession, GatewayURL: req.GatewayURL, Principal: req.Principal, UnprovenVersion: unproven,
		Takeover: store.Takeover{
			TerminalID: p.TerminalID, TerminalKey: p.Key, TerminalControl: ctrl, AgentPID: p.PID, ProcessBirth: p.Birth,
			RequestText: payload, StartedAt: now.UnixMilli(),
			InactivityTimeoutMinutes: inact.Minutes(), HardTimeoutMinutes: hard.Minutes(),
			InactivityDeadlineAt: now.Add(inact).UnixMilli(), HardDeadlineAt: now.Add(hard).UnixMilli(),
			LastActivityAt: now.UnixMilli(), LastActivityReason: "send",
		},
	}
	msg, err := newMessage(turn, ActorOpenClaw, actorOf(sess.Agent), MsgTask, payload, now.UnixMilli())
	if err != nil {
		return SendResult{}, fmt.Errorf("send: %w", err)
	}
	turn.Takeover.Submission = store.Submission{MessageID: msg.ID, MessageType: MsgTask, RequestHash: hash,
		Status: store.DispatchPrepared, Anchor: anchor, PreparedAt: now.UnixMilli()}
	d := &store.Dispatch{
		TerminalKey: p.Key, GenerationID: "dispatch-" + uuid(), SessionID: sess.SessionID, TurnID: turn.TurnID,
		MessageID: msg.ID, MessageType: MsgTask, RequestHash: hash, Status: store.DispatchPrepared,
		BindingID: sess.Binding.BindingID, BindingGeneration: sess.Binding.Generation, PreparedAt: now.UnixMilli(),
	}
	if err := s.retireReplaced(ctx, p); err != nil {
		return SendResult{}, fmt.Errorf("send: %w", err)
	}
	s.sealTurn(turn)
	// The sender holds the Turn's monitor lease from before the Turn exists,
	// so no host's rescan can start a monitor that writes under the send.
	lease, err := s.senderLease(ctx, turn.TurnID)
	if err != nil {
		return SendResult{}, fmt.Errorf("send: %w", err)
	}
	err = s.o.Store.CreateTurn(ctx, store.TurnCreate{Turn: turn, Dispatch: d,
		Events: []store.TurnEvent{event(now.UnixMilli(), "terminal_message_submit_prepared", map[string]any{"message_id": msg.ID, "request_hash": hash})}})
	if err != nil {
		_ = s.o.Store.ReleaseWork(context.WithoutCancel(ctx), lease)
		if errors.Is(err, store.ErrTerminalBusy) || errors.Is(err, store.ErrConflict) {
			return SendResult{}, fmt.Errorf("send: %w: %w; wait for it, or cancel/close it first", ErrRefused, err)
		}
		return SendResult{}, fmt.Errorf("send: %w", err)
	}
	s.notify(turn.TurnID)
	res := SendResult{SessionID: sess.SessionID, TurnID: turn.TurnID}
	outcome, derr := s.dispatch(ctx, lease, turn, d, p, a, token, msg)
	res.SubmissionOutcome = outcome
	res.DoNotRetry = outcome != OutcomeNotSent
	return res, derr
}

// exactTarget resolves a session_exact send: the Session's exact pane,
// process and native thread, with no human input since its last Turn.
func (s *Service) exactTarget(ctx context.Context, sessionID string) (*store.TermSession, Pane, Agent, Identity, error) {
	sess, err := s.o.Store.GetTermSession(ctx, sessionID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, Pane{}, nil, Identity{}, fmt.Errorf("%w: no session %s; run `clawconnect terminal list` for current ids", ErrNotFound, sessionID)
	}
	if err != nil {
		return nil, Pane{}, nil, Identity{}, err
	}
	if sess.Status != store.SessionBound || sess.Binding == nil {
		return nil, Pane{}, nil, Identity{}, fmt.Errorf("%w: session %s is %s, not bound to a terminal", ErrRefused, sessionID, sess.Status)
	}
	b := sess.Binding
	p, err := s.findPane(ctx, b.TerminalKey, b.NativeProcess.PID, b.NativeProcess.ProcessBirth)
	if err != nil {
		return nil, Pane{}, nil, Identity{}, err
	}
	a, err := s.agent(p.Agent)
	if err != nil {
		return nil, Pane{}, nil, Identity{}, err
	}
	id, err := s.identify(ctx, a, p)
	if err != nil {
		return nil, Pane{}, nil, Identity{}, fmt.Errorf("identify the pane's native session: %w", err)
	}
	if !strings.EqualFold(id.ThreadID, b.NativeThreadID) {
		return nil, Pane{}, nil, Identity{}, fmt.Errorf("%w: the pane's foreground thread changed since session %s was bound (was %q, now %q); send with --terminal %s to follow the current context",
			ErrRefused, sessionID, b.NativeThreadID, id.ThreadID, p.TerminalID)
	}
	if len(b.Checkpoint) > 0 {
		human, err := a.UserInputSince(ctx, p, b.Checkpoint)
		if err != nil {
			return nil, Pane{}, nil, Identity{}, fmt.Errorf("check the session file for human input: %w", err)
		}
		if human {
			return nil, Pane{}, nil, Identity{}, fmt.Errorf("%w: someone typed in the pane since the last Turn of session %s, so its exact context is gone; send with --terminal %s to follow the current context",
				ErrRefused, sessionID, p.TerminalID)
		}
	}
	return sess, p, a, id, nil
}

// identify reads the pane's foreground thread (Agent.Identify). A thread
// the agent holds locked with no session file yet is the pane's thread
// when a Session bound to this very process incarnation already names it:
// the transition that made that Session proved the thread, and its
// rollout is merely unwritten. Without this, a follow send after Codex
// closed the old thread's rollout would see a virgin pane, make a second
// Session, and then fail to bind the thread the first one holds.
func (s *Service) identify(ctx context.Context, a Agent, p Pane) (Identity, error) {
	id, err := a.Identify(ctx, p)
	if err != nil || id.ThreadID != "" || id.Locked == "" {
		return id, err
	}
	list, err := s.o.Store.SessionsByTerminal(ctx, p.Key)
	if err != nil {
		return Identity{}, fmt.Errorf("identify: sessions of the terminal: %w", err)
	}
	for _, c := range list {
		b := c.Binding
		if c.Status == store.SessionBound && b != nil && b.NativeProcess.PID == p.PID && b.NativeProcess.ProcessBirth == p.Birth &&
			strings.EqualFold(b.NativeThreadID, id.Locked) {
			id.ThreadID = b.NativeThreadID
			return id, nil
		}
	}
	return id, nil
}

// followTarget resolves a terminal_follow_current send to its live pane.
func (s *Service) followTarget(ctx context.Context, terminalID string) (Pane, Agent, Identity, error) {
	if host, ok := s.foreign(terminalID); ok {
		return Pane{}, nil, Identity{}, fmt.Errorf("%w: terminal %s runs on terminal host %s; this operation runs only there", ErrRefused, terminalID, host)
	}
	terminalID = s.ownID(terminalID)
	panes, err := s.o.Terminals.Discover(ctx)
	if err != nil {
		return Pane{}, nil, Identity{}, fmt.Errorf("discover panes: %w", err)
	}
	var found []Pane
	for _, p := range panes {
		if p.TerminalID == terminalID {
			found = append(found, p)
		}
	}
	switch {
	case len(found) == 0:
		return Pane{}, nil, Identity{}, fmt.Errorf("%w: no live agent pane has terminal id %s (the pane is gone or its process changed); run `clawconnect terminal list`", ErrNotFound, terminalID)
	case len(found) > 1:
		return Pane{}, nil, Identity{}, fmt.Errorf("%w: terminal id %s is ambiguous (%d panes on several sockets); stop one of them", ErrRefused, terminalID, len(found))
	}
	p := found[0]
	if p.NotControllable {
		return Pane{}, nil, Identity{}, fmt.Errorf("%w: the pane is not controllable now (%s)", ErrRefused, p.Reason)
	}
	a, err := s.agent(p.Agent)
	if err != nil {
		return Pane{}, nil, Identity{}, err
	}
	id, err := s.identify(ctx, a, p)
	if err != nil {
		return Pane{}, nil, Identity{}, fmt.Errorf("identify the pane's native session: %w", err)
	}
	return p, a, id, nil
}

// followSession returns the Session that owns the pane's current native
// context, binding (or rebinding) it to this pane and process.
func (s *Service) followSession(ctx context.Context, p Pane, id Identity) (*store.TermSession, error) {
	now := nowMs()
	binding := func(gen int64) *store.Binding {
		return &store.Binding{BindingID: newBindingID(), Generation: gen, TerminalID: p.TerminalID, TerminalKey: p.Key,
			NativeThreadID: id.ThreadID, NativeProcess: store.NativeProcess{PID: p.PID, ProcessBirth: p.Birth, Rollout: id.File},
			BoundAt: now, LastVerifiedAt: now}
	}
	var sess *store.TermSession
	if id.ThreadID != "" {
		got, err := s.o.Store.SessionByThread(ctx, p.Agent, id.ThreadID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		sess = got
	} else {
		// A virgin pane: reuse a Session already bound to this very
		// process whose thread is still unknown.
		list, err := s.o.Store.SessionsByTerminal(ctx, p.Key)
		if err != nil {
			return nil, err
		}
		for _, c := range list {
			if b := c.Binding; b != nil && b.NativeThreadID == "" && b.NativeProcess.PID == p.PID && b.NativeProcess.ProcessBirth == p.Birth {
				sess = c
				break
			}
		}
	}
	if sess == nil {
		sess = &store.TermSession{SessionID: newSessionID(time.Now()), Agent: p.Agent, Workspace: p.Cwd,
			Status: store.SessionBound, Binding: binding(1), Lineage: store.Lineage{CreatedBy: "attach"}, CreatedAt: now, UpdatedAt: now}
		if err := s.o.Store.CreateTermSession(ctx, sess); err != nil {
			return nil, fmt.Errorf("bind session: %w", err)
		}
		return sess, nil
	}
	b := sess.Binding
	if b != nil && b.TerminalKey == p.Key && b.NativeProcess.PID == p.PID && b.NativeProcess.ProcessBirth == p.Birth && sess.Status == store.SessionBound {
		return sess, nil
	}
	gen := int64(1)
	if b != nil {
		gen = b.Generation + 1
	}
	sess.Binding, sess.Status, sess.UpdatedAt = binding(gen), store.SessionBound, now
	if err := s.o.Store.SaveTermSession(ctx, sess); err != nil {
		return nil, fmt.Errorf("rebind session %s: %w", sess.SessionID, err)
	}
	return sess, nil
}

func event(ts int64, typ string, data any) store.TurnEvent {
	b, _ := json.Marshal(data)
	return store.TurnEvent{TS: ts, Type: typ, Data: b}
}

// advance writes turn with the ledger moved to status (and fields set by
// f), retrying nothing: a conflict is returned.
func (s *Service) advance(ctx context.Context, turn *store.Turn, d *store.Dispatch, status store.DispatchStatus, evType string, data any) error {
	now := nowMs()
	prev := d.GenerationID
	nd := *d
	nd.Status = status
	switch status {
	case store.DispatchTextInjected:
		nd.TextInjectedAt = now
	case store.DispatchEnterDispatched:
		nd.EnterDispatchedAt = now
	case store.DispatchAgentAccepted:
		nd.AgentAcceptedAt = now
	case store.DispatchNotAccepted:
		nd.NotAcceptedAt = now
	case store.DispatchUncertain:
		nd.UncertainAt = now
	}
	turn.Takeover.Submission.Status = status
	turn.UpdatedAt = now
	err := s.o.Store.WriteTurn(ctx, store.TurnWrite{Turn: turn,
		Dispatch: &store.DispatchAdvance{TerminalKey: d.TerminalKey, GenerationID: prev, Update: &nd},
		Events:   []store.TurnEvent{event(now, evType, data)}})
	if err != nil {
		return err
	}
	*d = nd
	s.notify(turn.TurnID)
	return nil
}

// failSubmission ends a submission that never reached the agent: the
// ledger records status, the Turn fails with reason.
func (s *Service) failSubmission(ctx context.Context, turn *store.Turn, d *store.Dispatch, status store.DispatchStatus, outcome, reason string, cause error) (string, error) {
	ctx = context.WithoutCancel(ctx)
	d.Error = reason
	if status == store.DispatchAborted && outcome == OutcomeNotSent {
		d.SafeToRetry = true
	}
	failTurn(turn, "submission_"+outcome, reason)
	turn.Takeover.Submission.Outcome = outcome
	if err := s.advance(ctx, turn, d, status, "terminal_message_"+outcome, map[string]any{"reason": reason}); err != nil {
		return outcome, errors.Join(cause, err)
	}
	return outcome, fmt.Errorf("%s: %w", reason, cause)
}

// senderLeaseTTL bounds how long a send keeps the Turn's monitor lease; a
// sender that dies mid-send leaves the Turn to a monitor after it.
const senderLeaseTTL = 60 * time.Second

// senderLease takes the Turn's monitor lease for a send, before the write
// that makes the Turn one a monitor follows: while a sender holds it no
// monitor (of any process) writes the Turn.
func (s *Service) senderLease(ctx context.Context, turnID string) (store.MonitorLease, error) {
	now := time.Now()
	l, err := s.o.Store.ClaimWork(ctx, store.LeaseMonitor, turnID, "send-"+uuid(), now.UnixMilli(), now.Add(senderLeaseTTL).UnixMilli())
	if errors.Is(err, store.ErrLeaseLost) {
		return l, fmt.Errorf("%w: a monitor is still following this Turn; retry in a moment: %w", ErrRefused, err)
	}
	return l, err
}

// dispatch types msg into the pane, presses Enter and waits for acceptance
// under the sender's lease, then releases it and hands the Turn to the
// host. Nothing past prepared is retried.
func (s *Service) dispatch(ctx context.Context, lease store.MonitorLease, turn *store.Turn, d *store.Dispatch, p Pane, a Agent, token string, msg Message) (string, error) {
	outcome, err := s.dispatchLocked(ctx, turn, d, p, a, token, msg)
	_ = s.o.Store.ReleaseWork(context.WithoutCancel(ctx), lease)
	if outcome == OutcomeAccepted || outcome == OutcomePendingAcceptance {
		s.startMonitor(ctx, turn.TurnID)
	}
	return outcome, err
}

func (s *Service) dispatchLocked(ctx context.Context, turn *store.Turn, d *store.Dispatch, p Pane, a Agent, token string, msg Message) (string, error) {
	text := turn.Takeover.RequestText
	if msg.Type == MsgAnswer {
		text = msg.Body
	}
	if err := s.o.Terminals.SendText(ctx, p, text); err != nil {
		if errors.Is(err, ErrInputNotSent) {
			return s.failSubmission(ctx, turn, d, store.DispatchAborted, OutcomeNotSent, "the terminal refused the text; nothing was typed", err)
		}
		return s.failSubmission(ctx, turn, d, store.DispatchUncertain, OutcomeUncertain,
			"typing the text may or may not have reached the pane; it is never sent again — look at the pane, then close the Turn", err)
	}
	if err := s.advance(ctx, turn, d, store.DispatchTextInjected, "terminal_message_text_injected", map[string]any{"message_id": msg.ID}); err != nil {
		return OutcomeUncertain, err
	}
	// Enter submits whatever the composer holds, so it is pressed only once
	// the composer shows exactly the text typed: not a mode the text
	// switched on, a command it turned into, or a human's keys mixed in.
	if !s.waitDraft(ctx, a, p, text) {
		return s.failSubmission(ctx, turn, d, store.DispatchAborted, OutcomeNotAccepted,
			"the draft did not show in the "+agentName(p.Agent)+" composer as typed, so Enter was not pressed; the text is left in the composer — clear it in the terminal", ErrRefused)
	}
	if err := s.revalidate(ctx, turn, p, a, token); err != nil {
		return s.failSubmission(ctx, turn, d, store.DispatchAborted, OutcomeNotAccepted,
			"the pane changed before Enter; the text is left in the composer", err)
	}
	if err := s.o.Terminals.SendKeys(ctx, p, "Enter"); err != nil {
		status, outcome := store.DispatchUncertain, OutcomeUncertain
		if errors.Is(err, ErrInputNotSent) {
			status, outcome = store.DispatchAborted, OutcomeNotAccepted
		}
		return s.failSubmission(ctx, turn, d, status, outcome, "pressing Enter failed; the request is not resent", err)
	}
	ApplyMessage(turn, msg)
	if err := s.advance(ctx, turn, d, store.DispatchEnterDispatched, "message", msg); err != nil {
		return OutcomeUncertain, err
	}
	return s.awaitAcceptance(ctx, turn, d, p, a, text)
}

// agentName is the product name of an agent kind, for messages.
func agentName(kind string) string {
	switch kind {
	case AgentCodex:
		return "Codex"
	case AgentClaude:
		return "Claude Code"
	}
	return kind
}

// waitDraft polls the screen until the composer shows the draft on two
// consecutive captures at least 120 ms apart, within DraftTimeout.
func (s *Service) waitDraft(ctx context.Context, a Agent, p Pane, text string) bool {
	deadline := time.Now().Add(s.o.DraftTimeout)
	var firstSeen time.Time
	for {
		screen, err := s.o.Terminals.Capture(ctx, p)
		if err == nil && a.DraftVisible(screen, text) {
			if firstSeen.IsZero() {
				firstSeen = time.Now()
			} else if time.Since(firstSeen) >= 120*time.Millisecond {
				return true
			}
		} else {
			firstSeen = time.Time{}
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(30 * time.Millisecond):
		}
	}
}

// revalidate re-derives the freshness token from the live pane.
func (s *Service) revalidate(ctx context.Context, turn *store.Turn, p Pane, a Agent, token string) error {
	sess, err := s.o.Store.GetTermSession(ctx, turn.SessionID)
	if err != nil {
		return err
	}
	live, err := s.findPane(ctx, p.Key, p.PID, p.Birth)
	if err != nil {
		return err
	}
	id, err := s.identify(ctx, a, live)
	if err != nil {
		return err
	}
	if freshness(sess, live, id) != token {
		return fmt.Errorf("%w: the session binding or native context changed during the send", ErrRefused)
	}
	return nil
}

// awaitAcceptance polls native acceptance every 50 ms up to the acceptance
// timeout.
func (s *Service) awaitAcceptance(ctx context.Context, turn *store.Turn, d *store.Dispatch, p Pane, a Agent, text string) (string, error) {
	deadline := time.Now().Add(s.o.AcceptanceTimeout)
	var lastErr error
	for {
		// A detector error may be transient (a file being rotated or
		// opened); it decides only if it persists to the deadline.
		acc, err := a.Accepted(ctx, p, turn.Takeover.Submission.Anchor, text)
		lastErr = err
		if err == nil && acc != nil {
			return OutcomeAccepted, s.accept(ctx, turn, d, *acc)
		}
		if time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return OutcomePendingAcceptance, nil
		case <-time.After(50 * time.Millisecond):
		}
	}
	if lastErr != nil {
		return s.failSubmission(ctx, turn, d, store.DispatchUncertain, OutcomeUncertain,
			"the session file could not prove whether the agent took the request ("+Redact(lastErr.Error())+")", lastErr)
	}
	if screen, err := s.o.Terminals.Capture(ctx, p); err == nil && a.DraftVisible(screen, text) {
		return s.failSubmission(ctx, turn, d, store.DispatchNotAccepted, OutcomeNotAccepted,
			"the agent did not take the request: it is still in the composer", ErrRefused)
	}
	turn.Takeover.Submission.Outcome = OutcomePendingAcceptance
	if err := s.o.Store.WriteTurn(context.WithoutCancel(ctx), store.TurnWrite{Turn: turn}); err != nil {
		return OutcomePendingAcceptance, err
	}
	return OutcomePendingAcceptance, nil
}

// accept records acceptance evidence and, for a virgin pane, binds the
// Session to the native thread that took the request. A respond types
// while the Turn's monitor still follows it, so the monitor may have
// written the Turn meanwhile (often recording this very acceptance): on a
// conflict the Turn is read again, and the acceptance is recorded on the
// fresh copy unless it is there already.
func (s *Service) accept(ctx context.Context, turn *store.Turn, d *store.Dispatch, acc Acceptance) error {
	ctx = context.WithoutCancel(ctx)
	msgID := turn.Takeover.Submission.MessageID
	for range 3 {
		err := s.recordAcceptance(ctx, turn, d, acc)
		if !errors.Is(err, store.ErrConflict) {
			return err
		}
		fresh, gerr := s.o.Store.GetTurn(ctx, turn.TurnID)
		if gerr != nil {
			return errors.Join(err, gerr)
		}
		fd, gerr := s.o.Store.GetDispatch(ctx, turn.Takeover.TerminalKey)
		if gerr != nil {
			return errors.Join(err, gerr)
		}
		if fresh.Takeover.Submission.MessageID != msgID || fd.MessageID != msgID {
			return err // another message took the Turn or the terminal
		}
		*turn, *d = *fresh, *fd
		if sub := fresh.Takeover.Submission; sub.Status != store.DispatchEnterDispatched {
			return nil // the monitor recorded the acceptance (or an end) first
		}
	}
	return store.ErrConflict
}

func (s *Service) recordAcceptance(ctx context.Context, turn *store.Turn, d *store.Dispatch, acc Acceptance) error {
	turn.Takeover.Submission.Outcome = OutcomeAccepted
	turn.Takeover.Submission.NativeTurnID = acc.NativeTurnID
	turn.Takeover.Submission.AcceptanceEvidence = acc.Evidence
	turn.Takeover.Submission.AcceptedAt = nowMs()
	if turn.NativeThreadID == "" && acc.ThreadID != "" {
		turn.NativeThreadID = acc.ThreadID
		if err := s.refineThread(ctx, turn.SessionID, turn.TerminalBindingID, acc.ThreadID); err != nil {
			s.log.Warn("bind the native thread", "turn_id", turn.TurnID, "err", err)
		}
	}
	return s.advance(ctx, turn, d, store.DispatchAgentAccepted, "terminal_message_agent_accepted",
		map[string]any{"native_turn_id": acc.NativeTurnID})
}

func (s *Service) refineThread(ctx context.Context, sessionID, bindingID, thread string) error {
	for range 3 {
		sess, err := s.o.Store.GetTermSession(ctx, sessionID)
		if err != nil {
			return err
		}
		if sess.Binding == nil || sess.Binding.BindingID != bindingID || sess.Binding.NativeThreadID != "" {
			return nil
		}
		sess.Binding.NativeThreadID = thread
		sess.UpdatedAt = nowMs()
		if err := s.o.Store.SaveTermSession(ctx, sess); !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
	return store.ErrConflict
}
