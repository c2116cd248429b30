package terminal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	"github.com/clawconnect/clawconnect/internal/terminal/agentproc"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/internal/terminal/screen"
	"github.com/clawconnect/clawconnect/internal/testbed/poll"
	"github.com/clawconnect/clawconnect/termapi"
)

// fakeAgent is one scripted coding agent in one pane: its screen state and
// its native session file (a list of records).
type fakeAgent struct {
	mu       sync.Mutex
	pane     agents.Pane
	alive    bool
	thread   string // "" until the first prompt (a virgin pane)
	activity string // idle | working
	draft    string
	approval *agents.ScreenApproval
	// pending is what the session file holds of the approval's command
	// (fakeCommandReader); pendingErr why it cannot be told.
	pending    *agents.PendingCommand
	pendingErr error
	// question is the agent's own question dialog; a digit picks its row
	// (the free-text row takes the cursor, then typed text and Enter);
	// answers are what it was answered.
	question *screen.Question
	answers  []string
	// linger is how many more captures show a dialog answered with typed
	// text (redrawn with the text, another fingerprint), as Claude Code
	// does until it takes the Enter.
	linger int
	// stickyApproval keeps the prompt drawn after its key, as a TUI does
	// until it redraws; captures counts the screen reads.
	stickyApproval bool
	captures       int
	dialog         bool
	records        []fakeRecord
	// history holds the threads the pane left (resumable).
	history []string
	keys    []string
	wake    chan struct{}
	// acceptPrompts, when false, leaves typed prompts in the composer.
	acceptPrompts bool
	// shown, if set, is what the composer shows for the typed draft (a
	// composer the text switched into another mode, say).
	shown   func(typed string) string
	sendErr error
	// scanErr makes the completion scan fail (a malformed session-file
	// line).
	scanErr error
	// lockOnly makes Identify name the thread only as Locked (no session
	// file yet), as Codex does after /new once the old rollout is closed,
	// until the next prompt writes the file.
	lockOnly bool
	// afterKeys, if set, runs after SendKeys applied keys (outside the
	// lock), to interleave another party with the sender.
	afterKeys func(keys []string)
}

type fakeRecord struct {
	kind   string // prompt | complete | human
	hash   string
	turn   string
	text   string
	failed bool
	// interrupted: the agent's session file records that its turn was
	// interrupted (Esc in the terminal).
	interrupted bool
}

func newFakeAgent(agent string, pid int) *fakeAgent {
	return &fakeAgent{
		pane: agents.Pane{TerminalID: agentproc.FormatTerminalID(agentproc.Agent(agent), "work:0.0", pid),
			Key: fmt.Sprintf("socket:/tmp/s:pane-id:%%%d", pid), Agent: agent, PID: pid, Birth: "birth-1", Cwd: "/w"},
		alive: true, thread: "thread-" + fmt.Sprint(pid), activity: "idle", acceptPrompts: true,
		wake: make(chan struct{}, 1),
	}
}

func (f *fakeAgent) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// finish writes the completion record of the running native turn.
func (f *fakeAgent) finish(text string, failed bool) {
	f.mu.Lock()
	last := ""
	for _, r := range f.records {
		if r.kind == "prompt" {
			last = r.turn
		}
	}
	f.records = append(f.records, fakeRecord{kind: "complete", turn: last, text: text, failed: failed})
	f.activity, f.approval = "idle", nil
	f.mu.Unlock()
	f.poke()
}

// interrupt records that the running native turn was interrupted in the
// terminal.
func (f *fakeAgent) interrupt() {
	f.mu.Lock()
	last := ""
	for _, r := range f.records {
		if r.kind == "prompt" {
			last = r.turn
		}
	}
	f.records = append(f.records, fakeRecord{kind: "complete", turn: last, interrupted: true})
	f.activity, f.approval = "idle", nil
	f.mu.Unlock()
	f.poke()
}

// human types a prompt directly in the pane.
func (f *fakeAgent) human(text string) {
	f.mu.Lock()
	f.records = append(f.records, fakeRecord{kind: "human", text: text})
	f.mu.Unlock()
	f.poke()
}

func (f *fakeAgent) set(fn func(f *fakeAgent)) {
	f.mu.Lock()
	fn(f)
	f.mu.Unlock()
	f.poke()
}

func (f *fakeAgent) sentKeys() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.keys...)
}

// fakeTerminals serves a set of fake agents.
type fakeTerminals struct {
	mu           sync.Mutex
	agents       []*fakeAgent
	failDiscover error
	// byKey indexes indexed (the agents it was built from) by pane key,
	// so a benchmark following a thousand panes measures the host, not
	// a linear search per capture.
	byKey   map[string]*fakeAgent
	indexed []*fakeAgent
}

func (ft *fakeTerminals) Discover(context.Context) ([]agents.Pane, error) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	if ft.failDiscover != nil {
		return nil, ft.failDiscover
	}
	var out []agents.Pane
	for _, a := range ft.agents {
		a.mu.Lock()
		if a.alive {
			out = append(out, a.pane)
		}
		a.mu.Unlock()
	}
	return out, nil
}

func (ft *fakeTerminals) find(p agents.Pane) *fakeAgent {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	// Tests append to and truncate agents, and may re-key a pane: the
	// index is rebuilt when the slice changed and checked on every hit.
	if len(ft.agents) != len(ft.indexed) || (len(ft.agents) > 0 && &ft.agents[0] != &ft.indexed[0]) {
		ft.byKey, ft.indexed = nil, ft.agents
	}
	if a := ft.byKey[p.Key]; a != nil && a.pane.Key == p.Key {
		return a
	}
	ft.byKey = make(map[string]*fakeAgent, len(ft.agents))
	for _, a := range slices.Backward(ft.agents) { // the first agent of a key wins
		ft.byKey[a.pane.Key] = a
	}
	return ft.byKey[p.Key]
}

func (ft *fakeTerminals) Capture(_ context.Context, p agents.Pane) (string, error) {
	a := ft.find(p)
	if a == nil {
		return "", fmt.Errorf("no pane")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.captures++
	if a.linger > 0 {
		if a.linger--; a.linger == 0 {
			a.question = nil
		}
	}
	draft := a.draft
	if a.shown != nil {
		draft = a.shown(draft)
	}
	b, _ := json.Marshal(map[string]any{"activity": a.activity, "draft": draft, "approval": a.approval, "question": a.question, "answers": a.answers, "dialog": a.dialog, "n": len(a.records)})
	return string(b), nil
}

func (ft *fakeTerminals) SendText(_ context.Context, p agents.Pane, text string) error {
	a := ft.find(p)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sendErr != nil {
		return a.sendErr
	}
	if a.question != nil && a.question.FreeText > 0 && a.question.Selected == a.question.FreeText {
		a.question.Options = nil // the row holds the text: the dialog redraws
		a.answers = append(a.answers, text)
		return nil
	}
	a.draft += text
	return nil
}

func (ft *fakeTerminals) SendKeys(_ context.Context, p agents.Pane, keys ...string) error {
	a := ft.find(p)
	a.mu.Lock()
	a.keys = append(a.keys, keys...)
	for _, k := range keys {
		if q := a.question; q != nil {
			switch n, err := strconv.Atoi(k); {
			case err == nil && n == q.FreeText:
				q.Selected, q.Typing = n, true
				q.Fingerprint += "-typing"
				continue
			case err == nil:
				for _, o := range q.Options {
					if o.Number == n {
						a.answers, a.question = append(a.answers, o.Label), nil
					}
				}
				continue
			case k == "Enter" && q.Selected == q.FreeText && len(a.answers) > 0:
				q.Fingerprint += "-submitted"
				a.linger = 3
				continue
			}
		}
		switch k {
		case "Enter":
			if cmd, ok := strings.CutPrefix(a.draft, "/"); ok && a.acceptPrompts {
				// The fake's native thread controls: /clear starts a new
				// thread, /resume <id> switches to id.
				a.history = append(a.history, a.thread)
				if id, ok := strings.CutPrefix(cmd, "resume "); ok {
					a.thread = id
				} else {
					a.thread = fmt.Sprintf("%08x-0000-4000-8000-%012x", a.pane.PID, len(a.history))
				}
				a.draft = ""
			} else if a.draft != "" && a.acceptPrompts {
				sum := sha256.Sum256([]byte(a.draft))
				if a.thread == "" {
					a.thread = "thread-new"
				}
				a.lockOnly = false
				a.records = append(a.records, fakeRecord{kind: "prompt", hash: hex.EncodeToString(sum[:]), turn: fmt.Sprintf("native-%d", len(a.records))})
				a.draft, a.activity = "", "working"
			}
		case "C-c", "Escape":
			a.activity, a.approval, a.question = "idle", nil, nil
		case "y":
			if !a.stickyApproval {
				a.approval = nil
			}
		}
	}
	hook := a.afterKeys
	a.mu.Unlock()
	a.poke()
	if hook != nil {
		hook(keys)
	}
	return nil
}

// fakeReader is the Agent over the fake's records; the anchor is a record
// count.
type fakeReader struct{ ft *fakeTerminals }

type fakeAnchor struct {
	Offset int    `json:"offset"`
	Thread string `json:"thread"`
}

func (r fakeReader) agentOf(p agents.Pane) *fakeAgent { return r.ft.find(p) }

func (r fakeReader) Identify(_ context.Context, p agents.Pane) (agents.Identity, error) {
	a := r.agentOf(p)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.lockOnly {
		return agents.Identity{Locked: a.thread}, nil
	}
	return agents.Identity{ThreadID: a.thread}, nil
}

func (r fakeReader) Anchor(_ context.Context, p agents.Pane, id agents.Identity) (json.RawMessage, error) {
	a := r.agentOf(p)
	a.mu.Lock()
	defer a.mu.Unlock()
	return json.Marshal(fakeAnchor{Offset: len(a.records), Thread: id.ThreadID})
}

func (r fakeReader) Accepted(_ context.Context, p agents.Pane, anchor json.RawMessage, text string) (*agents.Acceptance, error) {
	sum := sha256.Sum256([]byte(text))
	hash := hex.EncodeToString(sum[:])
	var an fakeAnchor
	if err := json.Unmarshal(anchor, &an); err != nil {
		return nil, err
	}
	a := r.agentOf(p)
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, rec := range a.records[an.Offset:] {
		if rec.kind == "prompt" && rec.hash == hash {
			return &agents.Acceptance{NativeTurnID: rec.turn, ThreadID: a.thread}, nil
		}
	}
	return nil, nil
}

// Completion resumes at acc.Resume, a fakeAnchor at the record count the
// last pending check saw, as the real readers resume at a byte offset.
func (r fakeReader) Completion(_ context.Context, p agents.Pane, anchor json.RawMessage, acc agents.Acceptance) (*agents.Completion, json.RawMessage, error) {
	var an fakeAnchor
	if err := json.Unmarshal(anchor, &an); err != nil {
		return nil, nil, err
	}
	a := r.agentOf(p)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.scanErr != nil {
		return nil, nil, a.scanErr
	}
	from := an.Offset
	var res fakeAnchor
	if len(acc.Resume) > 0 && json.Unmarshal(acc.Resume, &res) == nil && res.Thread == an.Thread && res.Offset >= from && res.Offset <= len(a.records) {
		from = res.Offset
	}
	for _, rec := range a.records[from:] {
		if rec.kind == "complete" && rec.turn == acc.NativeTurnID {
			if rec.interrupted {
				return &agents.Completion{Outcome: agents.OutcomeCancelled, Match: "fake_interrupted", ID: rec.turn}, nil, nil
			}
			out := "completed"
			if rec.failed {
				out = "failed"
			}
			return &agents.Completion{Outcome: out, Text: rec.text, Match: "fake_complete", ID: rec.turn}, nil, nil
		}
	}
	resume, _ := json.Marshal(fakeAnchor{Offset: len(a.records), Thread: an.Thread})
	return nil, resume, nil
}

func (r fakeReader) UserInputSince(_ context.Context, p agents.Pane, checkpoint json.RawMessage) (bool, error) {
	var an fakeAnchor
	if err := json.Unmarshal(checkpoint, &an); err != nil {
		return false, err
	}
	a := r.agentOf(p)
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, rec := range a.records[min(an.Offset, len(a.records)):] {
		if rec.kind == "human" || rec.kind == "prompt" {
			return true, nil
		}
	}
	return false, nil
}

func (r fakeReader) WatchPaths(p agents.Pane, _ json.RawMessage) []string { return []string{p.Key} }

func (r fakeReader) Screen(text string) agents.Screen {
	var s struct {
		Activity string
		Draft    string
		Approval *agents.ScreenApproval
		Question *screen.Question
		Dialog   bool
	}
	_ = json.Unmarshal([]byte(text), &s)
	if s.Question != nil {
		s.Activity = string(screen.AwaitingAnswer)
	}
	return agents.Screen{Activity: s.Activity, Approval: s.Approval, Question: s.Question, Dialog: s.Dialog, ComposerEmpty: s.Draft == "" && s.Activity == "idle"}
}

func (r fakeReader) DraftVisible(text, request string) bool {
	var s struct{ Draft string }
	_ = json.Unmarshal([]byte(text), &s)
	return s.Draft == request
}

func (r fakeReader) Keys() ([]string, []string) { return []string{"y"}, []string{"C-c"} }

// rig is a Service + Host over a real SQLite store and fake panes.
type rig struct {
	t    testing.TB
	st   store.Store
	ft   *fakeTerminals
	svc  *Service
	stop context.CancelFunc
	done chan struct{}
}

func newRig(t testing.TB, fakes ...*fakeAgent) *rig {
	t.Helper()
	st, err := sqlite.Open(t.Context(), sqlite.Options{Path: filepath.Join(t.TempDir(), sqlite.FileName)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	ft := &fakeTerminals{agents: fakes}
	r := &rig{t: t, st: st, ft: ft}
	r.svc = r.service()
	return r
}

func (r *rig) service() *Service {
	return NewService(Options{Store: r.st, Terminals: r.ft,
		Agents: map[string]agents.Agent{termapi.AgentCodex: fakeReader{r.ft}, termapi.AgentClaude: fakeReader{r.ft}}, DraftTimeout: time.Second})
}

// start runs a Host for svc until the test ends.
func (r *rig) start(svc *Service, o hostpkg.Options) *hostpkg.Host {
	r.t.Helper()
	if o.Watch == nil {
		o.Watch = r.fakeWatch
	}
	if o.Store == nil {
		o.Store = svc.o.Store
	}
	h := hostpkg.New(svc, o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = h.Run(ctx); close(done) }()
	stop := func() { cancel(); <-done }
	r.t.Cleanup(stop)
	r.stop, r.done = cancel, done
	return h
}

// fakeWatch wakes a monitor when its fake agent changes.
func (r *rig) fakeWatch(_ context.Context, paths []string) (<-chan struct{}, error) {
	for _, a := range r.ft.agents {
		if a.pane.Key == paths[0] {
			return a.wake, nil
		}
	}
	return nil, fmt.Errorf("no fake pane %s", paths[0])
}

// waitStatus waits (bounded) until the Turn has status.
func (r *rig) waitStatus(id string, status termapi.TurnStatus) termapi.TurnView {
	r.t.Helper()
	var v termapi.TurnView
	if !poll.WithinOn(10*time.Second, nextChangeOf(r.svc), func() bool {
		var err error
		if v, err = r.svc.Status(r.t.Context(), id); err != nil {
			r.t.Fatal(err)
		}
		return v.Status == status
	}) {
		r.t.Fatalf("turn %s is %s, want %s (%+v)", id, v.Status, status, v)
	}
	return v
}

// until waits (bounded) for cond, re-checking at every change the service
// announces and every poll.Tick.
func (r *rig) until(what string, cond func() bool) {
	r.t.Helper()
	if !poll.WithinOn(10*time.Second, nextChangeOf(r.svc), cond) {
		r.t.Fatalf("timed out waiting until %s", what)
	}
}

// completionClaims counts the Turn's completion-claimed events: one per
// Turn, however many hosts raced for it.
func completionClaims(t testing.TB, st store.Store, turnID string) int {
	t.Helper()
	ev, err := st.TurnEvents(t.Context(), turnID, 0, store.MaxPage)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ev {
		if e.Type == "terminal_bridge_completion_claimed" {
			n++
		}
	}
	return n
}

// nextChangeOf returns, for poll.WithinOn, a func that gives the channel s
// closes at its next change: a test is woken by it instead of polling.
func nextChangeOf(s *Service) func() <-chan struct{} {
	return func() <-chan struct{} {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.changed
	}
}
