package terminal

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"

	"github.com/clawconnect/clawconnect/internal/terminal/transition"
	"github.com/clawconnect/clawconnect/internal/terminal/watch"
	"github.com/clawconnect/clawconnect/termapi"
)

// Defaults of Options.
const (
	DefaultInactivityTimeout = 60 * time.Minute
	DefaultHardTimeout       = 720 * time.Minute
	DefaultAcceptanceTimeout = 5 * time.Second
	DefaultDraftTimeout      = 2 * time.Second
	// DefaultScanGrace is Options.ScanGrace's default: long enough for a
	// session file swapped and put back by a tool to read again, short
	// next to the inactivity timeout a Turn would otherwise wait out.
	DefaultScanGrace = 30 * time.Second
)

// Send scopes: what a send is bound to (docs/GLOSSARY.md).
const (
	ScopeSessionExact          = "session_exact"
	ScopeTerminalFollowCurrent = "terminal_follow_current"
)

// Options configures a Service. Zero values are the documented defaults.
type Options struct {
	// Store holds the records; required.
	Store store.Store
	// Terminals finds panes and does their I/O; required.
	Terminals Terminals
	// Agents maps an agent kind ("codex", "claude") to its reader.
	Agents map[string]agents.Agent
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
	// ScanGrace is how long a Turn's session-file scan may keep failing
	// (a *native.ScanError: a malformed line, a truncated or replaced
	// file, a symbolic link or FIFO at its path) before the Turn stalls
	// with the scan's code as the reason; DefaultScanGrace. Such a
	// failure does not mend by waiting, and file activity would keep the
	// inactivity timeout from ever firing; the grace only lets a file
	// that is put back at once (a rename dance, a permission change)
	// recover without a stall.
	ScanGrace time.Duration
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
	// host is this process's monitor host (Attach); nil when none runs
	// here.
	host *hostpkg.Host

	// transitionHook, if set, is called after each transition step is
	// stored (tests stop a transition there).
	transitionHook func(status string)
	// transitions are the native thread transitions of the panes.
	transitions *transition.Service

	// inv is the last pane inventory, shared by monitors so that many
	// open Turns cost one tmux list and /proc scan per interval, and
	// indexed by pane key so that each finds its pane without scanning
	// every other.
	invMu    sync.Mutex
	invAt    time.Time
	invByKey map[string][]agents.Pane
	invErr   error

	// inputs caches List's human-input scans per pane (inputscan.go).
	inputs inputScans

	// keySockets holds the recorded sockets followKey checked already.
	keySockets sync.Map

	// watches are the watches of tasks humans run in panes.
	watches *watch.Service
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
	if o.ScanGrace <= 0 {
		o.ScanGrace = DefaultScanGrace
	}
	s := &Service{o: o, log: o.Logger, changed: make(chan struct{}), waiters: map[string]map[chan struct{}]struct{}{}}
	s.watches = watch.New(watch.Options{Store: o.Store, Panes: watchPanes{s}, Announcer: watchPanes{s}, Agents: o.Agents,
		CallbackGateway: o.CallbackGateway, Logger: o.Logger})
	s.transitions = transition.New(transition.Options{Store: o.Store, Panes: transitionPanes{s}, Keyboard: transitionPanes{s},
		Announcer: transitionPanes{s}, Agents: o.Agents, Logger: o.Logger, Stepped: func(status string) {
			if h := s.transitionHook; h != nil {
				h(status)
			}
		}})
	return s
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
	h := s.host
	s.mu.Unlock()
	if h != nil {
		h.Changed()
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

// startMonitor hands a Turn (or a "watch-" id) that needs following to
// this process's running host, or, when none runs here, announces it on
// the store's feed so the host of another process takes it at once. The
// announcement is made even if ctx ends: the work is already stored.
func (s *Service) startMonitor(ctx context.Context, turnID string) {
	s.mu.Lock()
	h := s.host
	s.mu.Unlock()
	if h != nil && h.Watch(turnID) {
		return
	}
	s.o.Store.AnnounceTerminalWork(context.WithoutCancel(ctx))
}

func nowMs() int64 { return time.Now().UnixMilli() }

func (s *Service) agent(kind string) (agents.Agent, error) {
	a, ok := s.o.Agents[kind]
	if !ok {
		return nil, fmt.Errorf("%w: no reader for agent %q in this build", termapi.ErrRefused, kind)
	}
	return a, nil
}

func event(ts int64, typ string, data any) store.TurnEvent {
	b, _ := json.Marshal(data)
	return store.TurnEvent{TS: ts, Type: typ, Data: b}
}
