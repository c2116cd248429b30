// Package bridge wires the task bridge behind the MCP server: the agent
// configuration, the store (SQLite or PostgreSQL), one lazily dialled
// gateway connection and one task manager per agent. It is internal so that
// importing the public server package links neither SQLite nor pgx; the
// clawconnect commands and the dashboard open it, and hand it to server.New
// as the Tasks service.
package bridge

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/clawconnect/clawconnect/agentsession"
	"github.com/clawconnect/clawconnect/gateway"
	"github.com/clawconnect/clawconnect/internal/config"
	"github.com/clawconnect/clawconnect/internal/settings"
	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/owner"
	"github.com/clawconnect/clawconnect/internal/store/postgres"
	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	"github.com/clawconnect/clawconnect/internal/task"
	"github.com/clawconnect/clawconnect/server"
	"github.com/clawconnect/clawconnect/taskapi"
)

// Options configures Open.
type Options struct {
	// Settings are the effective settings (agents.json location,
	// OPENCLAW_*, the task timings, AGENT_SESSION_CALL_TIMEOUT_MS,
	// CLAWCONNECT_DATABASE_URL, CLAWCONNECT_GATEWAY_HEADERS), read by the
	// caller with settings.Load; nil means settings.Defaults().
	Settings *settings.Values
	// Runtimes are the agent-session runtimes the attachment book may call;
	// nil means none.
	Runtimes *agentsession.Registry
	// Logger receives operational logs; nil discards them.
	Logger *slog.Logger
	// Follow says which running tasks this process follows; the zero
	// value is FollowAll. Every process shares the store (and its tasks)
	// whatever it follows.
	Follow Follow
	// Role names the process in the store's process registry ("serve",
	// "mcp", "run"); "" means "bridge".
	Role string
	// DialTimeout bounds each lazy gateway connect; zero means 15 s.
	DialTimeout time.Duration
}

// Follow says which running tasks a bridge's task managers follow (hold
// leases on and drive to an outcome).
type Follow int

const (
	// FollowAll follows the tasks this process submits and takes over any
	// running task whose lease is free or expired (serve, mcp).
	FollowAll Follow = iota
	// FollowOwn follows only the tasks this process submits, releasing
	// them when it exits (one-shot commands such as run).
	FollowOwn
	// FollowNone follows nothing and starts no task manager: reads only
	// (status, logs, sessions). A wait on a running task is woken by the
	// store's change feed.
	FollowNone
)

// Bridge is the running task bridge: the agent configuration, the store,
// one lazily dialled gateway connection and one task manager per agent. It
// implements Tasks (plus StatusCounter and GatewayStater) over all agents
// and is safe for concurrent use. Close it when done.
type Bridge struct {
	registry *taskapi.Registry
	timeouts config.Timeouts
	st       store.Store
	managers map[string]*task.Manager
	gateways map[string]*lazyGateway
	order    []string
}

var (
	_ server.Tasks         = (*Bridge)(nil)
	_ server.StatusCounter = (*Bridge)(nil)
	_ server.GatewayStater = (*Bridge)(nil)
)

// Open loads the configuration, opens the store (SQLite under
// CLAWCONNECT_HOME, or PostgreSQL at CLAWCONNECT_DATABASE_URL) and starts
// one task manager per agent, which resumes that agent's running tasks.
// Gateways are dialled on first use, so Open does not wait for them.
func Open(ctx context.Context, o Options) (*Bridge, error) {
	sv := settings.Defaults()
	if o.Settings != nil {
		sv = *o.Settings
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	reg, err := config.LoadRegistry(sv)
	if err != nil {
		return nil, err
	}
	b := &Bridge{
		registry: reg, timeouts: config.TimeoutsFrom(sv),
		managers: map[string]*task.Manager{}, gateways: map[string]*lazyGateway{},
	}
	st, err := b.openStore(ctx, sv, o.Role)
	if err != nil {
		return nil, err
	}
	// One lease owner for the whole process, whatever its agents.
	self := owner.Self()
	role := cmp.Or(o.Role, "bridge")
	headers, _ := gateway.ParseHeaders(sv.GatewayHeaders) // checked by settings.Load
	home := sv.Home
	bookOpts := agentsession.BookOptions{Registry: o.Runtimes, Logger: logger, CallTimeout: sv.CallTimeout}
	for _, a := range reg.Agents {
		// As the reference client, the agent password is sent as both the
		// shared password and the shared token.
		gopts := gateway.Options{URL: a.URL, Token: a.Password, Password: a.Password, Headers: headers, Logger: logger.With("component", "gateway", "agent", a.ID)}
		if !loopbackURL(a.URL) {
			dev, err := gateway.LoadOrCreateDevice(home)
			if err != nil {
				b.Close()
				return nil, fmt.Errorf("open bridge: %w", err)
			}
			gopts.Device = dev
		}
		gw := &lazyGateway{opts: gopts, timeout: cmp.Or(o.DialTimeout, 15*time.Second)}
		book, err := agentsession.NewBook(ctx, task.AttachmentStore(st, a.ID), bookOpts)
		if err != nil {
			b.Close()
			return nil, fmt.Errorf("open bridge: %w", err)
		}
		var mo task.Options
		mo.ApplySettings(sv)
		mo.Agent, mo.OpenClawAgentID, mo.Store, mo.Gateway, mo.Book = a.ID, a.OpenClawAgentID, st, gw, book
		mo.PayloadDir, mo.Logger = filepath.Join(home, "payloads"), logger.With("component", "task", "agent", a.ID)
		mo.Owner, mo.Role, mo.NoClaim = self.ID, role, o.Follow == FollowOwn
		m, err := task.New(mo)
		if err != nil {
			b.Close()
			return nil, fmt.Errorf("open bridge: %w", err)
		}
		b.gateways[a.ID] = gw
		b.managers[a.ID] = m
		b.order = append(b.order, a.ID)
		if o.Follow == FollowNone {
			continue // the processes that follow them answer for running tasks
		}
		if err := m.Start(ctx); err != nil {
			b.Close()
			return nil, fmt.Errorf("open bridge: agent %s: %w", a.ID, err)
		}
	}
	return b, nil
}

func (b *Bridge) openStore(ctx context.Context, sv settings.Values, role string) (store.Store, error) {
	if u := sv.DatabaseURL; u != "" {
		if !postgres.IsURL(u) {
			return nil, errors.New("open bridge: CLAWCONNECT_DATABASE_URL must be a postgres:// or postgresql:// URL")
		}
		db, err := postgres.Open(ctx, postgres.Options{URL: u})
		if err != nil {
			return nil, fmt.Errorf("open bridge: %w", err)
		}
		b.st = db
		return db, nil
	}
	// Every clawconnect process on the machine opens the same file. The
	// page caches default to what an mcp process needs; serve, whose
	// dashboard lists and pages through many tasks, keeps 16 MiB per
	// connection.
	so := sqlite.Options{Path: filepath.Join(sv.Home, sqlite.FileName)}
	if role == "serve" {
		so.WriterCacheKiB, so.ReaderCacheKiB = 16384, 16384
	}
	db, err := sqlite.Open(ctx, so)
	if err != nil {
		return nil, fmt.Errorf("open bridge: %w", err)
	}
	b.st = db
	return db, nil
}

// Registry returns the agent configuration.
func (b *Bridge) Registry() *taskapi.Registry { return b.registry }

// Timeouts returns the effective timeouts.
func (b *Bridge) Timeouts() config.Timeouts { return b.timeouts }

// SharedStore returns the store the bridge opened, for a host that runs
// more services on the same database (clawconnect serve hosts the terminal
// monitors on it).
func (b *Bridge) SharedStore() store.Store { return b.st }

// Close stops the task managers (running tasks stay running in the store
// for the next process), closes the gateway connections and the store.
// It is idempotent.
func (b *Bridge) Close() {
	for _, m := range b.managers {
		m.Close()
	}
	for _, g := range b.gateways {
		g.close()
	}
	if b.st != nil {
		_ = b.st.Close()
		b.st = nil
	}
}

// loopbackURL reports whether a gateway URL points at this machine.
func loopbackURL(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		if h, _, err := net.SplitHostPort(raw); err == nil {
			return h == "localhost" || isLoopbackIP(h)
		}
		return false
	}
	return u.Hostname() == "localhost" || isLoopbackIP(u.Hostname())
}

func isLoopbackIP(h string) bool {
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// mapErr turns the task manager's not-found into ErrNotFound (they are the
// same sentinel) and drops the manager's operation prefix from messages
// meant for a model.
func mapErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var busy *store.SessionBusyError
	if errors.As(err, &busy) {
		return busy
	}
	if errors.Is(err, task.ErrInvalidInput) || errors.Is(err, task.ErrPayloadNotStored) {
		return errors.New(strings.TrimPrefix(err.Error(), op+": "))
	}
	if errors.Is(err, task.ErrStoreUnavailable) {
		// The detail (database, user, host, port) is in the server log.
		return task.ErrStoreUnavailable
	}
	return err
}

// each calls fn on the managers that may hold a task, in configuration
// order (only the named agent's when agent is set), until fn returns
// something other than ErrNotFound. A miss everywhere is ErrNotFound. Each
// manager reads only its own agent's scope, so trying them in turn costs one
// indexed store read per miss and no extra read on a hit.
func (b *Bridge) each(agent string, fn func(m *task.Manager) error) error {
	if agent != "" {
		m, ok := b.managers[agent]
		if !ok {
			return server.ErrNotFound
		}
		return fn(m)
	}
	for _, id := range b.order {
		if err := fn(b.managers[id]); !errors.Is(err, server.ErrNotFound) {
			return err
		}
	}
	return server.ErrNotFound
}

// Run implements Tasks.
func (b *Bridge) Run(ctx context.Context, req server.RunRequest) (taskapi.RunResult, error) {
	m, ok := b.managers[req.Agent]
	if !ok {
		return taskapi.RunResult{}, fmt.Errorf("unknown agent %q", req.Agent)
	}
	res, err := m.Submit(ctx, task.SubmitRequest{Task: req.Task, Context: req.Context, SessionKey: req.SessionKey, SenderName: req.SenderName, Payload: req.Payload,
		Principal: req.Principal, AnySession: req.AnySession})
	if err != nil {
		return taskapi.RunResult{}, mapErr("submit", err)
	}
	return *res, nil
}

// Check implements Tasks. When onUpdate is set in wait mode it waits in poll
// mode steps, reporting each intermediate snapshot, until the task ends or
// the wait elapses.
func (b *Bridge) Check(ctx context.Context, req server.CheckRequest, onUpdate func(taskapi.Snapshot)) (taskapi.Snapshot, error) {
	ms := func(d time.Duration) *float64 { v := float64(d.Milliseconds()); return &v }
	creq := task.CheckRequest{JobID: req.JobID, SessionKey: req.SessionKey, KnownLogCount: req.KnownLogCount, Mode: task.CheckMode(req.Mode), WaitMs: ms(req.Wait)}
	if onUpdate == nil || req.Mode != server.ModeWait {
		var out taskapi.Snapshot
		err := b.each(req.Agent, func(m *task.Manager) error {
			s, err := m.Check(ctx, creq)
			if err == nil {
				out = *s
			}
			return err
		})
		return out, mapErr("check task", err)
	}
	var m *task.Manager
	if err := b.each(req.Agent, func(c *task.Manager) error {
		_, err := c.GetTask(ctx, req.JobID, taskapi.DetailCore, 0)
		if err != nil && req.SessionKey != "" && errors.Is(err, server.ErrNotFound) {
			_, err = c.GetSession(ctx, task.SessionRequest{SessionID: req.SessionKey, Mode: taskapi.ModeSnapshot, Limit: 1})
		}
		if err == nil {
			m = c
		}
		return err
	}); err != nil {
		return taskapi.Snapshot{}, mapErr("check task", err)
	}
	deadline := time.Now().Add(req.Wait)
	creq.Mode = task.CheckMode(server.ModePoll)
	for {
		creq.WaitMs = ms(max(time.Until(deadline), 0))
		s, err := m.Check(ctx, creq)
		if err != nil {
			return taskapi.Snapshot{}, mapErr("check task", err)
		}
		if s.IsTerminal || !time.Now().Before(deadline) {
			return *s, nil
		}
		if s.LogCursor > creq.KnownLogCount {
			onUpdate(*s)
		}
		creq.JobID, creq.KnownLogCount = s.JobID, max(creq.KnownLogCount, s.LogCursor)
	}
}

// GetTask implements Tasks.
func (b *Bridge) GetTask(ctx context.Context, taskID string, detail taskapi.Detail, knownLogCount int64) (taskapi.TaskDetail, error) {
	var out taskapi.TaskDetail
	err := b.each("", func(m *task.Manager) error {
		d, err := m.GetTask(ctx, taskID, detail, knownLogCount)
		if err == nil {
			out = *d
		}
		return err
	})
	return out, mapErr("get task", err)
}

// GetPrompt implements Tasks.
func (b *Bridge) GetPrompt(ctx context.Context, taskID string) (taskapi.PromptResult, error) {
	var out taskapi.PromptResult
	err := b.each("", func(m *task.Manager) error {
		p, err := m.GetPrompt(ctx, taskID)
		if err == nil {
			out = *p
		}
		return err
	})
	return out, mapErr("get prompt", err)
}

// ListTasks implements Tasks: each agent's latest page, merged by recent
// activity.
func (b *Bridge) ListTasks(ctx context.Context, view taskapi.ListView, only *string) ([]taskapi.TaskSummary, error) {
	var out []taskapi.TaskSummary
	for _, id := range b.order {
		rows, err := b.managers[id].ListTasks(ctx, view, 0, only)
		if err != nil {
			return nil, mapErr("list tasks", err)
		}
		out = append(out, rows...)
	}
	slices.SortStableFunc(out, func(x, y taskapi.TaskSummary) int { return cmp.Compare(y.LastEventAt, x.LastEventAt) })
	return out, nil
}

// GetSession implements Tasks.
func (b *Bridge) GetSession(ctx context.Context, req server.SessionRequest) (taskapi.SessionResult, error) {
	var out taskapi.SessionResult
	err := b.each(req.Agent, func(m *task.Manager) error {
		r, err := m.GetSession(ctx, task.SessionRequest{SessionID: req.SessionID, Mode: req.Mode, Limit: req.Limit, After: int64(req.After)})
		if err == nil {
			out = *r
		}
		return err
	})
	return out, mapErr("get session", err)
}

// ListSessions implements Tasks.
func (b *Bridge) ListSessions(ctx context.Context, only *string) ([]taskapi.ContinuationState, error) {
	var out []taskapi.ContinuationState
	for _, id := range b.order {
		l, err := b.managers[id].ListSessions(ctx, 0, only)
		if err != nil {
			return nil, mapErr("list sessions", err)
		}
		out = append(out, l.Sessions...)
	}
	return out, nil
}

// Cancel implements Tasks.
func (b *Bridge) Cancel(ctx context.Context, jobID string) (taskapi.CancelResult, error) {
	var out taskapi.CancelResult
	err := b.each("", func(m *task.Manager) error {
		r, err := m.Cancel(ctx, jobID, "")
		if err == nil {
			out = *r
		}
		return err
	})
	return out, mapErr("cancel task", err)
}

// CountByStatus implements StatusCounter over each agent's most recently
// active sessions (one bounded page per agent, at scrape time only).
func (b *Bridge) CountByStatus(ctx context.Context) (map[string]int, error) {
	out := map[string]int{}
	for _, id := range b.order {
		rows, err := b.managers[id].ListTasks(ctx, taskapi.ViewAll, store.MaxPage, nil)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			out[string(r.Status)]++
		}
	}
	return out, nil
}

// StateNotConnectedYet is the gateway state (GatewayStates) of a gateway
// no task has needed yet: it is dialled on first use.
const StateNotConnectedYet = "not_connected_yet"

// GatewayStates implements GatewayStater.
func (b *Bridge) GatewayStates() map[string]string {
	out := make(map[string]string, len(b.gateways))
	for id, g := range b.gateways {
		out[id] = g.state()
	}
	return out
}

// lazyGateway is a task.Gateway that dials on first use and redials after
// a failed dial, so a server starts without waiting for its gateways. The
// dialled client reconnects by itself.
type lazyGateway struct {
	opts    gateway.Options
	timeout time.Duration

	mu     sync.Mutex
	c      *gateway.Client
	closed bool
	tried  bool // a dial has ended without a client
}

func (g *lazyGateway) client(ctx context.Context) (*gateway.Client, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, errors.New("gateway connection closed")
	}
	if g.c != nil {
		return g.c, nil
	}
	dctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	c, err := gateway.Dial(dctx, g.opts)
	if err != nil {
		g.tried = true
		return nil, err
	}
	g.c = c
	return c, nil
}

func (g *lazyGateway) state() string {
	if !g.mu.TryLock() {
		return "connecting" // a dial is in progress
	}
	defer g.mu.Unlock()
	switch {
	case g.c == nil && !g.tried:
		// Nothing has needed this gateway yet (dials are lazy): nothing
		// is known to be wrong with it.
		return StateNotConnectedYet
	case g.c == nil:
		return "unavailable"
	case g.c.Connected():
		return "connected"
	default:
		return "reconnecting"
	}
}

// Connected reports whether the dialled client is connected now, so a new
// task's upstream state says "connected" rather than "connecting".
func (g *lazyGateway) Connected() bool { return g.state() == "connected" }

func (g *lazyGateway) close() {
	g.mu.Lock()
	c := g.c
	g.c, g.closed = nil, true
	g.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}

// StartRun implements task.Gateway.
func (g *lazyGateway) StartRun(ctx context.Context, req task.RunRequest) (task.Run, error) {
	c, err := g.client(ctx)
	if err != nil {
		return nil, err
	}
	return task.GatewayClient(c).StartRun(ctx, req)
}

// PrepareSession lets a dialled client start subscribing to the session
// while the task is recorded; before the first dial there is nothing to
// prepare on (the task's StartRun dials).
func (g *lazyGateway) PrepareSession(sessionKey string) func() {
	g.mu.Lock()
	c := g.c
	g.mu.Unlock()
	if c == nil {
		return func() {}
	}
	return c.PrepareSession(sessionKey)
}

// History implements task.Gateway.
func (g *lazyGateway) History(ctx context.Context, sessionKey string) (*task.History, error) {
	c, err := g.client(ctx)
	if err != nil {
		return nil, err
	}
	return task.GatewayClient(c).History(ctx, sessionKey)
}

// Abort implements task.Gateway.
func (g *lazyGateway) Abort(ctx context.Context, sessionKey, runID string) (bool, error) {
	c, err := g.client(ctx)
	if err != nil {
		return false, err
	}
	return task.GatewayClient(c).Abort(ctx, sessionKey, runID)
}
