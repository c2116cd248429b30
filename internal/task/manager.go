package task

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"hash/maphash"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/clawconnect/clawconnect/agentsession"
	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/owner"
	"github.com/clawconnect/clawconnect/taskapi"
)

// Errors callers branch on.
var (
	// ErrInvalidInput: a request argument was rejected; nothing was written.
	ErrInvalidInput = errors.New("invalid input")
	// ErrPayloadNotStored: the payload could not be written; nothing runs.
	ErrPayloadNotStored = errors.New("payload could not be stored")
	// ErrClosed: the manager was closed.
	ErrClosed = errors.New("task manager closed")
)

// Manager runs and answers for the tasks of one agent. It is safe for
// concurrent use. Start it once; Close stops its goroutines and leaves
// running tasks running in the store for the next process.
type Manager struct {
	o    Options
	st   store.Store
	gw   Gateway
	book *agentsession.Book
	self owner.Identity // this process, registered under o.Owner

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	live    map[string]*live
	closed  bool
	started bool

	seed        maphash.Seed
	submitLocks [64]sync.Mutex

	recheckMu   sync.Mutex
	recheckLast map[string]time.Time
	recheckBusy map[string]bool
}

// New returns a manager; call Start to rehydrate and follow running tasks.
func New(o Options) (*Manager, error) {
	if o.Agent == "" || o.Store == nil || o.Gateway == nil {
		return nil, errors.New("new task manager: Agent, Store and Gateway are required")
	}
	o = o.withDefaults()
	self := owner.Self()
	if o.Owner == "" {
		o.Owner = self.ID
	}
	self.ID = o.Owner
	ctx, cancel := context.WithCancel(context.Background())
	return &Manager{
		o: o, st: o.Store, gw: o.Gateway, book: o.Book, self: self,
		ctx: ctx, cancel: cancel,
		live: map[string]*live{}, seed: maphash.MakeSeed(),
		recheckLast: map[string]time.Time{}, recheckBusy: map[string]bool{},
	}, nil
}

// Agent returns the agent id the manager serves.
func (m *Manager) Agent() string { return m.o.Agent }

// newUpstream is a new task's upstream state: "connected" when the gateway
// says its connection is up, else "connecting" (the first dial, or a
// gateway that cannot tell). "reconnecting" is kept for a connection that
// was lost.
func (m *Manager) newUpstream() string {
	if c, ok := m.gw.(connReporter); ok && c.Connected() {
		return "connected"
	}
	return "connecting"
}

func (m *Manager) now() time.Time { return m.o.Now() }
func (m *Manager) nowMs() int64   { return m.o.Now().UnixMilli() }

// Start registers the process in the store, releases the leases of
// processes on this host that are provably dead, claims the agent's
// running tasks whose lease is free or expired and follows each again;
// then, until Close, it renews the leases of the tasks it follows, takes
// over expired ones and sweeps old tasks. With NoClaim it claims nothing
// and only keeps the leases of the tasks it submits. ctx bounds only the
// initial claim.
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	if m.started {
		m.mu.Unlock()
		return errors.New("start task manager: already started")
	}
	m.started = true
	m.mu.Unlock()
	// A store busy with another process's write (or one stopped while
	// writing) delays the registration and the first claim to the next
	// renewal tick; anything else fails the start.
	if err := m.st.Heartbeat(ctx, m.self.Process(m.o.Role, m.nowMs())); err != nil {
		if !errors.Is(err, store.ErrBusy) {
			return fmt.Errorf("start task manager: %w", err)
		}
		m.o.Logger.Warn("the store is busy; registering at the next renewal", "err", err)
	}
	if !m.o.NoClaim {
		if _, err := m.claim(ctx, m.reapDead(ctx), true); err != nil {
			if !errors.Is(err, store.ErrBusy) {
				return fmt.Errorf("start task manager: %w", err)
			}
			m.o.Logger.Warn("the store is busy; claiming at the next renewal", "err", err)
		}
	}
	m.wg.Add(1)
	go m.maintain()
	return nil
}

// claim leases claimable running tasks in pages and follows each; own
// also takes back tasks this owner holds with a live lease. prev is who
// followed which task before the claim, for the takeover's log entry.
func (m *Manager) claim(ctx context.Context, prev map[string]predecessor, own bool) (int, error) {
	now := m.now()
	until := now.Add(m.o.Lease).UnixMilli()
	// A claim is not cut short by ctx: a driver that sees the cancel after
	// the rows were written reports the cancel, and the tasks would stay
	// leased here, followed by no one, until the lease ran out. The
	// lease's time bounds it instead.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.o.Lease)
	defer cancel()
	total := 0
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		ts, err := m.st.ClaimTasks(cctx, store.Claim{Agent: m.o.Agent, Owner: m.o.Owner, Now: now.UnixMilli(), Until: until, Limit: store.MaxPage, IncludeOwn: own})
		if err != nil {
			return total, err
		}
		var closing []string
		for _, t := range ts {
			switch m.adopt(t, prev[t.ID]) {
			case adopted:
				total++
			case refusedClosing:
				closing = append(closing, t.ID)
			}
		}
		if len(closing) > 0 {
			// Claimed as the manager closes: given back at once, as
			// Close gives back the tasks it followed.
			if _, err := m.st.ReleaseLeases(cctx, m.o.Owner, closing); err != nil {
				m.o.Logger.Warn("release leases claimed at close failed; they expire after the lease", "err", err)
			}
			return total, ErrClosed
		}
		if len(ts) < store.MaxPage {
			return total, nil
		}
	}
}

// adoption is what adopt did with a claimed task.
type adoption int

const (
	adopted        adoption = iota // a follower started
	alreadyHere                    // followed here already: its follower took the new fence
	refusedClosing                 // the manager is closing: nothing follows it
)

// adopt starts following a claimed running task. A task already followed
// here (its lease lapsed during a store outage and this process claimed it
// again) keeps its follower, which takes the new fencing token. prev is
// the task's previous follower as the registry showed it before the claim.
func (m *Manager) adopt(t *store.Task, prev predecessor) adoption {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return refusedClosing
	}
	if l := m.live[t.ID]; l != nil {
		l.mu.Lock()
		l.t.Owner, l.t.LeaseUntil, l.t.Fence = t.Owner, t.LeaseUntil, t.Fence
		l.mu.Unlock()
		return alreadyHere
	}
	if t.Transcript == "live" || t.Transcript == "detached" {
		t.Transcript = "replaying"
	}
	t.Upstream = "reconnecting"
	l := newLive(t)
	m.live[t.ID] = l
	m.wg.Add(1)
	go m.follow(l, &prev, nil)
	m.o.Logger.Info("rehydrated running task", "job_id", t.ID, "session_key", t.SessionKey)
	return adopted
}

// maintain renews leases, takes over expired ones and sweeps, until Close.
func (m *Manager) maintain() {
	defer m.wg.Done()
	renew := time.NewTicker(max(m.o.Lease/3, 10*time.Millisecond))
	defer renew.Stop()
	var sweepC <-chan time.Time
	if m.o.Retention > 0 && !m.o.NoClaim {
		sweep := time.NewTicker(m.o.SweepInterval)
		defer sweep.Stop()
		sweepC = sweep.C
		m.sweep()
	}
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-renew.C:
			m.renew()
		case <-sweepC:
			m.sweep()
		}
	}
}

// followed returns the followers of tasks not yet finished.
func (m *Manager) followed() []*live {
	m.mu.Lock()
	defer m.mu.Unlock()
	ls := make([]*live, 0, len(m.live))
	for _, l := range m.live {
		if !l.isDone() {
			ls = append(ls, l)
		}
	}
	return ls
}

// renew extends the leases of the tasks followed here (and only those),
// stops following the ones another process took over, writes log entries
// a store outage held back, refreshes the process's heartbeat, releases
// the leases of dead processes on this host and claims expired leases.
func (m *Manager) renew() {
	ctx, cancel := context.WithTimeout(m.ctx, m.o.Lease)
	defer cancel()
	ls := m.followed()
	if len(ls) > 0 {
		ids := make([]string, len(ls))
		for i, l := range ls {
			ids[i] = l.id
		}
		lost, err := m.st.RenewLeases(ctx, m.o.Owner, m.now().Add(m.o.Lease).UnixMilli(), ids)
		if err != nil {
			m.o.Logger.Warn("renew leases failed", "err", err)
		} else {
			m.dropLost(lost)
		}
		for _, l := range ls {
			l.mu.Lock()
			m.persistRunLocked(ctx, l)
			l.mu.Unlock()
		}
	}
	if err := m.st.Heartbeat(ctx, m.self.Process(m.o.Role, m.nowMs())); err != nil && ctx.Err() == nil {
		m.o.Logger.Warn("process heartbeat failed", "err", err)
	}
	if m.o.NoClaim {
		return
	}
	if _, err := m.claim(ctx, m.reapDead(ctx), false); err != nil && ctx.Err() == nil {
		m.o.Logger.Warn("claim expired leases failed", "err", err)
	}
}

// dropLost stops following the tasks whose lease this process no longer
// holds: another process took them over, or they ended elsewhere.
func (m *Manager) dropLost(ids []string) {
	for _, id := range ids {
		if l := m.getLive(id); l != nil && !l.isDone() {
			m.o.Logger.Warn("lease lost; another process follows the task now", "job_id", id)
			l.abandon()
		}
	}
}

// reapDead releases every lease of the registered processes on this host
// that are provably dead (their pid gone or reused), so their running
// tasks are claimed at once instead of after their leases expire, and
// removes them (and long-silent rows of other hosts) from the registry.
// It returns who held each running task in the registry it read, so a
// takeover can say why the previous follower stopped.
func (m *Manager) reapDead(ctx context.Context) map[string]predecessor {
	// A row that has not beaten for ten leases (a process on another host
	// that died) holds no live lease any more: its row goes too.
	stale := m.now().Add(-10 * m.o.Lease).UnixMilli()
	ps, _ := m.self.ReapDead(ctx, m.st, stale, m.o.Logger)
	prev := map[string]predecessor{}
	for _, p := range ps {
		pr := predecessor{known: true, self: p.ID == m.o.Owner, role: p.Role, pid: p.PID,
			dead: m.self.Dead(p), silent: p.HeartbeatAt < stale}
		for _, id := range p.Tasks {
			prev[id] = pr
		}
	}
	return prev
}

func (m *Manager) sweep() {
	ctx, cancel := context.WithTimeout(m.ctx, time.Minute)
	defer cancel()
	cutoff := m.now().Add(-m.o.Retention).UnixMilli()
	for {
		res, err := m.st.Sweep(ctx, cutoff, store.MaxPage)
		if err != nil {
			if ctx.Err() == nil {
				m.o.Logger.Warn("retention sweep failed", "err", err)
			}
			return
		}
		if res.Tasks < store.MaxPage {
			break
		}
	}
	m.sweepPayloads()
}

func (m *Manager) sweepPayloads() {
	if m.o.PayloadDir == "" {
		return
	}
	ents, err := os.ReadDir(m.o.PayloadDir)
	if err != nil {
		return
	}
	cutoff := m.now().Add(-m.o.PayloadTTL)
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".payload") {
			continue
		}
		if info, err := e.Info(); err == nil && info.ModTime().Before(cutoff) {
			_ = os.Remove(filepath.Join(m.o.PayloadDir, e.Name()))
		}
	}
}

// Close stops every goroutine of the manager and waits for them. Running
// tasks stay running in the store; their leases are released, so another
// live process (or the next one to start) follows them at once. It also
// removes the process from the registry. Idempotent.
func (m *Manager) Close() {
	m.mu.Lock()
	already, started := m.closed, m.started
	m.closed = true
	m.mu.Unlock()
	ls := m.followed()
	m.cancel()
	m.wg.Wait()
	if already || !started {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if len(ls) > 0 {
		ids := make([]string, len(ls))
		for i, l := range ls {
			ids[i] = l.id
			m.appendLog(ctx, l, logHandoff, fmt.Sprintf("Released on exit by %s; the next clawconnect process to follow the task takes it over.", m.describeSelf()), false)
		}
		if _, err := m.st.ReleaseLeases(ctx, m.o.Owner, ids); err != nil {
			m.o.Logger.Warn("release leases at close failed; they expire after the lease", "err", err)
		}
	}
	if err := m.st.RemoveProcess(ctx, m.o.Owner); err != nil {
		m.o.Logger.Warn("leave the process registry failed", "err", err)
	}
}

// ---------------------------------------------------------------- submit

// SubmitRequest is run_task's input.
type SubmitRequest struct {
	Task       string
	Context    string
	SessionKey string
	SenderName string
	// Payload is an opaque blob written to a 0600 file; only its path
	// reaches the agent. Empty means none.
	Payload string
	// Principal is who submits (the HTTP credential's name), recorded on
	// the task and, for a new session, on the session. "" is a single-user
	// caller (stdio, the CLI, an open server), which may continue any
	// session.
	Principal string
	// AnySession lets a caller with a Principal continue a session another
	// principal started (a team view). Otherwise a sessionKey of someone
	// else's session reads as not found.
	AnySession bool
}

var legacyPrefix = "agent:chatgpt:"

// validText rejects invalid UTF-8 and NUL bytes.
func validText(field, s string, maxBytes int) error {
	if len(s) > maxBytes {
		return fmt.Errorf("%w: %s is %d bytes; the limit is %d bytes. Shorten it (large material belongs in payload, or in a file the agent can read)",
			ErrInvalidInput, field, len(s), maxBytes)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidInput, field)
	}
	if strings.ContainsRune(s, 0) {
		return fmt.Errorf("%w: %s contains a NUL character", ErrInvalidInput, field)
	}
	return nil
}

// ValidateSessionKey rejects keys the gateway or a log line could
// misread: empty after trimming, over 512 bytes, invalid UTF-8, or
// containing control or whitespace-only characters.
func ValidateSessionKey(k string) error {
	if err := validText("sessionKey", k, MaxSessionKeyBytes); err != nil {
		return err
	}
	if strings.TrimSpace(k) != k || k == "" {
		return fmt.Errorf("%w: sessionKey must not be empty or have surrounding whitespace", ErrInvalidInput)
	}
	for _, r := range k {
		if unicode.IsControl(r) || r == utf8.RuneError || unicode.Is(unicode.Cf, r) {
			return fmt.Errorf("%w: sessionKey contains a control or format character (%U); pass the key exactly as a previous result returned it", ErrInvalidInput, r)
		}
	}
	return nil
}

// safeID reports whether id is a safe task id, a plain path segment:
// ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$ (1 to 128 ASCII bytes). It is written
// by hand because that regular expression compiles into a program of
// hundreds of instructions at package init, on every start of the binary.
func safeID(id string) bool {
	if len(id) == 0 || len(id) > 128 || !isAlnum(id[0]) {
		return false
	}
	for i := 1; i < len(id); i++ {
		if c := id[i]; !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

func (m *Manager) validate(req *SubmitRequest) error {
	if strings.TrimSpace(req.Task) == "" {
		return fmt.Errorf("%w: task is required: say what the agent should do", ErrInvalidInput)
	}
	if err := validText("task", req.Task, MaxTaskBytes); err != nil {
		return err
	}
	if err := validText("context", req.Context, MaxContextBytes); err != nil {
		return err
	}
	if err := validText("senderName", req.SenderName, MaxSenderNameBytes); err != nil {
		return err
	}
	if len(req.Payload) > MaxPayloadBytes {
		return fmt.Errorf("%w: payload is %d bytes; the limit is %d bytes", ErrInvalidInput, len(req.Payload), MaxPayloadBytes)
	}
	if req.SessionKey != "" {
		if err := ValidateSessionKey(req.SessionKey); err != nil {
			return err
		}
	}
	return nil
}

func (m *Manager) lockSession(key string) func() {
	mu := &m.submitLocks[maphash.String(m.seed, key)%uint64(len(m.submitLocks))]
	mu.Lock()
	return mu.Unlock
}

// Submit is run_task: validate, resolve the session key, strip the handoff,
// refuse a busy session (applying nothing), write the payload, build the
// message, apply the attachment transition, persist, then dispatch — in
// that order, so a crash at any point leaves a state a restart finishes
// (the persisted task is re-sent under the same idempotency key). It
// returns as soon as the task is persisted.
func (m *Manager) Submit(ctx context.Context, req SubmitRequest) (_ *taskapi.RunResult, err error) {
	defer m.hideStoreErr(ctx, "submit", &err)
	if err := m.validate(&req); err != nil {
		return nil, fmt.Errorf("submit: %w", err)
	}
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("submit: %w", ErrClosed)
	}
	key, newThread := req.SessionKey, false
	if key == "" || strings.HasPrefix(key, legacyPrefix) {
		if key != "" {
			m.o.Logger.Info("Migrated legacy ChatGPT session to new thread", "session_key", key)
		}
		key, newThread = m.newThreadKey(), true
	} else {
		k, err := m.scopeSessionKey(key)
		if err != nil {
			return nil, fmt.Errorf("submit: %w", err)
		}
		key = k
	}
	h := agentsession.ParseHandoff(req.Context)
	if h.Err != nil {
		m.o.Logger.Warn("ignored a malformed agent-session handoff", "session_key", key, "err", h.Err)
	}
	unlock := m.lockSession(key)
	defer unlock()

	// Owner and busy guards, before anything is written or applied. The
	// owner guard comes first, so a busy notice never reveals someone
	// else's job id.
	if !newThread {
		if s, err := m.st.GetSession(ctx, m.o.Agent, key); err == nil {
			if req.Principal != "" && !req.AnySession && s.Principal != req.Principal {
				return nil, fmt.Errorf("submit: %w", &taskapi.NotFoundError{Message: taskapi.MsgForeignSession})
			}
			if last, err := m.st.GetTask(ctx, m.o.Agent, s.LastJobID); err == nil && last.Status == store.StatusRunning {
				return nil, fmt.Errorf("submit: %w", &store.SessionBusyError{JobID: last.ID})
			}
		} else if !errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("submit: %w", err)
		}
	}
	id := m.o.NewID()
	if !safeID(id) {
		return nil, fmt.Errorf("submit: generated task id %q is not safe", id)
	}
	var payloadPath string
	if req.Payload != "" {
		p, err := m.writePayload(id, req.Payload)
		if err != nil {
			return nil, fmt.Errorf("submit: %w", err)
		}
		payloadPath = p
	}
	message := buildMessage(req.Task, h.Text, req.SenderName, payloadPath)
	if h.Directive != nil && m.book != nil {
		if _, err := m.book.Apply(ctx, key, id, h.Directive); err != nil {
			// A delegation never fails a task.
			m.o.Logger.Warn("applying the agent-session directive failed", "session_key", key, "job_id", id, "err", err)
		}
	}
	now := m.nowMs()
	t := &store.Task{
		ID: id, Agent: m.o.Agent, SessionKey: key, Status: store.StatusRunning,
		Prompt:  taskapi.Prompt{Task: req.Task, Context: h.Text, SenderName: strings.TrimSpace(req.SenderName)},
		Message: message, StartedAt: now, LastEventAt: now, PayloadPath: payloadPath,
		Upstream: m.newUpstream(), Transcript: "detached", Cancellation: "none", NewThread: newThread,
		Artifacts: taskapi.Artifacts{FilesChanged: []string{}, CommandsRun: []string{}},
		Owner:     m.o.Owner, LeaseUntil: m.now().Add(m.o.Lease).UnixMilli(),
		Principal: req.Principal,
	}
	prepared := m.prepareSession(key)
	if err := m.st.CreateTask(ctx, t); err != nil {
		prepared()
		if payloadPath != "" {
			_ = os.Remove(payloadPath)
		}
		var busy *store.SessionBusyError
		if errors.As(err, &busy) {
			return nil, fmt.Errorf("submit: %w", busy)
		}
		return nil, fmt.Errorf("submit: %w", err)
	}
	l := newLive(t)
	if newThread {
		// Held for the run's first entry (or the outcome, or the next
		// lease renewal), which writes both in one transaction: one write
		// transaction fewer per task.
		l.mu.Lock()
		m.queueLogLocked(l, "lifecycle", "Started new thread session: "+key, false, "", nil)
		l.mu.Unlock()
	}
	result := runResult(t, m.o.Agent)
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		l.mu.Lock()
		_ = m.flushLogsLocked(ctx, l)
		l.mu.Unlock()
		prepared()
		// Persisted: the next process resumes it.
		return result, nil
	}
	m.live[id] = l
	m.wg.Add(1)
	m.mu.Unlock()
	go m.follow(l, nil, prepared)
	return result, nil
}

// prepareSession asks the gateway to start subscribing to key's events
// (see sessionPreparer); the func it returns ends that interest.
func (m *Manager) prepareSession(key string) (release func()) {
	if p, ok := m.gw.(sessionPreparer); ok {
		return p.PrepareSession(key)
	}
	return func() {}
}

func runResult(t *store.Task, agent string) *taskapi.RunResult {
	return &taskapi.RunResult{
		JobID: t.ID, TaskID: t.ID, SessionKey: t.SessionKey, Status: "running", Execution: "running",
		Upstream: t.Upstream, Transcript: t.Transcript, Cancellation: t.Cancellation, Agent: agent,
		NextAction: &taskapi.NextAction{Tool: "check_task", Args: taskapi.NextActionArgs{JobID: t.ID, SessionKey: t.SessionKey}},
	}
}

// scopeSessionKey keeps a caller's session key inside this agent's
// namespace: "agent:<id>:..." must name this manager's OpenClaw agent, and a
// bare key is prefixed with "agent:<id>:" here, so a key can never run in
// another agent's sessions.
func (m *Manager) scopeSessionKey(key string) (string, error) {
	if len(key) < len("agent:") || !strings.EqualFold(key[:len("agent:")], "agent:") {
		return "agent:" + m.o.OpenClawAgentID + ":" + key, nil
	}
	id, rest, ok := strings.Cut(key[len("agent:"):], ":")
	if !ok || id == "" || rest == "" {
		return "", fmt.Errorf("%w: sessionKey %q is not agent:<agent id>:<session>; pass a sessionKey that run_task returned, or omit it to start a fresh thread",
			ErrInvalidInput, key)
	}
	if !strings.EqualFold(id, m.o.OpenClawAgentID) {
		return "", fmt.Errorf("%w: sessionKey %q belongs to OpenClaw agent %q, not to this agent (%q); "+
			"pass a sessionKey that run_task returned for this agent, or omit it to start a fresh thread",
			ErrInvalidInput, key, id, m.o.OpenClawAgentID)
	}
	return key, nil
}

func (m *Manager) newThreadKey() string {
	return fmt.Sprintf("agent:%s:main:thread:mcp-%d-%s", m.o.OpenClawAgentID, m.nowMs(), newUUID()[:8])
}

func (m *Manager) writePayload(id, payload string) (string, error) {
	fail := func(err error) (string, error) {
		return "", fmt.Errorf("%w: The task was not dispatched: its payload could not be stored. %v. "+
			"Nothing is running, so retrying is not a duplicate submit", ErrPayloadNotStored, err)
	}
	if m.o.PayloadDir == "" {
		return fail(errors.New("no payload directory is configured"))
	}
	if err := os.MkdirAll(m.o.PayloadDir, 0o700); err != nil {
		return fail(err)
	}
	path := filepath.Join(m.o.PayloadDir, id+".payload")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fail(err)
	}
	_, werr := f.WriteString(payload)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		_ = os.Remove(path)
		return fail(err)
	}
	return path, nil
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
