package agentsession

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// bookBundle is a book over a memory store with a fixed clock and
// deterministic record ids.
type bookBundle struct {
	ids   atomic.Int64
	book  *Book
	store *MemoryStore
	reg   *Registry
	now   atomic.Int64
}

func newBookBundle(t *testing.T, reg *Registry) *bookBundle {
	t.Helper()
	bb := &bookBundle{store: NewMemoryStore(), reg: reg}
	bb.now.Store(1000)
	bb.book = bb.open(t)
	return bb
}

func (bb *bookBundle) open(t *testing.T) *Book {
	t.Helper()
	b, err := NewBook(t.Context(), bb.store, BookOptions{
		Registry: bb.reg,
		Now:      func() time.Time { return time.UnixMilli(bb.now.Load()) },
		NewID:    func() string { return fmt.Sprintf("att-%d", bb.ids.Add(1)) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

func (bb *bookBundle) apply(t *testing.T, key, turn, context string) *Attachment {
	t.Helper()
	h := ParseHandoff(context)
	if h.Directive == nil {
		t.Fatalf("no directive in %q: %v", context, h.Err)
	}
	a, err := bb.book.Apply(t.Context(), key, turn, h.Directive)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (bb *bookBundle) lineage(t *testing.T, key string) []Attachment {
	t.Helper()
	l, err := bb.book.Lineage(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

const (
	markerS1 = `<agent-session>{"runtime":"rt","sessionId":"s1","state":"running"}</agent-session>`
	markerS2 = `<agent-session>{"runtime":"rt","sessionId":"s2"}</agent-session>`
)

func TestBookAttachMintsAndRefreshFolds(t *testing.T) {
	bb := newBookBundle(t, nil)
	a := bb.apply(t, "k", "job1", markerS1)
	want := &Attachment{ID: "att-1", Runtime: "rt", Handle: "s1", AttachedAt: 1000, Status: "running", DelegatedTurnID: "job1"}
	if diff := cmp.Diff(want, a); diff != "" {
		t.Fatalf("first attach mismatch (-want +got):\n%s", diff)
	}
	// Re-sending the same marker on the same turn is a refresh: no new lineage.
	bb.now.Store(2000)
	a = bb.apply(t, "k", "job1", `<agent-session>{"runtime":"rt","sessionId":"s1","host":"box","metadata":{"a":"1"}}</agent-session>`)
	if a.ID != "att-1" || a.Host != "box" || a.LastObservedAt != 2000 || a.Metadata["a"] != "1" {
		t.Errorf("refresh did not fold: %+v", a)
	}
	if n := len(bb.lineage(t, "k")); n != 1 {
		t.Errorf("lineage has %d records after a refresh, want 1", n)
	}
	// A different session mints, supersedes and chains.
	bb.now.Store(3000)
	b := bb.apply(t, "k", "job2", markerS2)
	if b.ID != "att-2" || b.ReplacesAttachmentID != "att-1" || b.Status != "starting" {
		t.Errorf("new record: %+v", b)
	}
	l := bb.lineage(t, "k")
	if len(l) != 2 || l[0].Status != AttachmentSuperseded || l[0].Reason != "superseded by a new attachment" {
		t.Errorf("lineage: %+v", l)
	}
	// replace always mints, even for the current session, and records the reason.
	c := bb.apply(t, "k", "job2", block(`{"op":"replace","runtime":"rt","handle":"s2","host":"h","reason":"restarted"}`))
	if c.ReplacesAttachmentID != b.ID {
		t.Errorf("replace chain: %+v", c)
	}
	l = bb.lineage(t, "k")
	if len(l) != 3 || l[1].Status != AttachmentSuperseded || l[1].Reason != "restarted" {
		t.Errorf("lineage after replace: %+v", l)
	}
	// Other keys are independent.
	if cur, _ := bb.book.Current(t.Context(), "other"); cur != nil {
		t.Errorf("other key has %+v", cur)
	}
}

func TestBookRedelegationReset(t *testing.T) {
	bb := newBookBundle(t, nil)
	bb.apply(t, "k", "job1", markerS1)
	g, _, _, _ := bb.book.Begin(t.Context(), "k")
	ok, err := bb.book.WriteBack(t.Context(), "k", g, Status{State: StateCompleted, Alive: Bool(false),
		LatestResponse: "said", FinalResponse: "answer", LastEventAt: 900,
		Termination: &Termination{Reason: ReasonCompleted, At: 900}})
	if err != nil || !ok {
		t.Fatalf("WriteBack = %v, %v", ok, err)
	}
	// Same turn: the refresh keeps what the turn produced.
	a := bb.apply(t, "k", "job1", `<agent-session>{"runtime":"rt","sessionId":"s1"}</agent-session>`)
	if a.LastResult == nil || a.Status != "completed" {
		t.Fatalf("same-turn refresh reset the record: %+v", a)
	}
	// A new turn resets: terminal status back to starting, results cleared.
	a = bb.apply(t, "k", "job2", `<agent-session>{"runtime":"rt","sessionId":"s1"}</agent-session>`)
	want := &Attachment{ID: a.ID, Runtime: "rt", Handle: "s1", AttachedAt: 1000, LastObservedAt: 1000,
		Status: "starting", DelegatedTurnID: "job2", StartedAt: 0, LastEventAt: 900, ObservationToken: a.ObservationToken}
	if diff := cmp.Diff(want, a); diff != "" {
		t.Errorf("re-delegated record mismatch (-want +got):\n%s", diff)
	}
	// A stated status on the refresh is written with a new token.
	before := a.ObservationToken
	a = bb.apply(t, "k", "job2", `<agent-session>{"runtime":"rt","sessionId":"s1","state":"needs_input"}</agent-session>`)
	if a.Status != "needs_input" || a.ObservationToken <= before {
		t.Errorf("stated status: %+v", a)
	}
}

func TestBookDetachContinueInspect(t *testing.T) {
	var (
		mu       sync.Mutex
		calls    []string
		detached = make(chan string, 1)
	)
	reg := NewRegistry()
	mustRegister(t, reg, Runtime{ID: "rt", Provider: "prov",
		Inspect: func(_ context.Context, r Ref) (*Observation, error) {
			mu.Lock()
			calls = append(calls, "inspect "+r.SessionID)
			mu.Unlock()
			return &Observation{State: "running", LatestResponse: "working"}, nil
		},
		Continue: func(_ context.Context, r Ref, p string) (*Observation, error) {
			mu.Lock()
			calls = append(calls, "continue "+p)
			mu.Unlock()
			return &Observation{State: "running"}, nil
		},
		Detach: func(_ context.Context, r Ref, reason string) (*Observation, error) {
			detached <- r.SessionID + ":" + reason
			return &Observation{State: "dead"}, nil
		},
	})
	bb := newBookBundle(t, reg)
	ctx := t.Context()

	t.Run("without a current record nothing happens", func(t *testing.T) {
		for _, d := range []string{`{"op":"continue","prompt":"x"}`, `{"op":"inspect"}`, `{"op":"detach","reason":"r"}`} {
			if a := bb.apply(t, "empty", "j", block(d)); a != nil {
				t.Errorf("%s created %+v", d, a)
			}
		}
		if l := bb.lineage(t, "empty"); len(l) != 0 {
			t.Errorf("lineage %+v", l)
		}
	})

	bb.apply(t, "k", "job1", markerS1)
	t.Run("continue re-delegates, writes a stated status, sends the prompt", func(t *testing.T) {
		a := bb.apply(t, "k", "job2", block(`{"op":"continue","status":"running","prompt":"next step"}`))
		if a.DelegatedTurnID != "job2" || a.Status != "running" || a.ObservationToken == 0 {
			t.Errorf("continue record: %+v", a)
		}
		bb.book.bgWG.Wait() // the fired continue
		mu.Lock()
		defer mu.Unlock()
		if diff := cmp.Diff([]string{"continue next step"}, calls); diff != "" {
			t.Errorf("calls mismatch (-want +got):\n%s", diff)
		}
		calls = nil
	})
	t.Run("continue on the same turn without status only sends", func(t *testing.T) {
		before, _ := bb.book.Current(ctx, "k")
		a := bb.apply(t, "k", "job2", block(`{"op":"continue"}`))
		if diff := cmp.Diff(before, a); diff != "" {
			t.Errorf("no-op continue changed the record (-want +got):\n%s", diff)
		}
	})
	t.Run("inspect without status asks the runtime", func(t *testing.T) {
		bb.apply(t, "k", "job2", block(`{"op":"inspect"}`))
		bb.book.bgWG.Wait()
		cur, _ := bb.book.Current(ctx, "k")
		if cur.LatestResponse != "working" || cur.Provider != "prov" {
			t.Errorf("passive inspect did not land: %+v", cur)
		}
	})
	t.Run("inspect with a stated status never re-stamps the turn", func(t *testing.T) {
		a := bb.apply(t, "k", "job9", block(`{"op":"inspect","status":"stale"}`))
		if a.Status != "stale" || a.DelegatedTurnID != "job2" {
			t.Errorf("inspect status: %+v", a)
		}
	})
	t.Run("detach is local unless stopRuntime", func(t *testing.T) {
		a := bb.apply(t, "k", "job2", block(`{"op":"detach","reason":"not needed"}`))
		if a != nil {
			t.Fatalf("still current: %+v", a)
		}
		l := bb.lineage(t, "k")
		if last := l[len(l)-1]; last.Status != AttachmentDetached || last.Reason != "not needed" {
			t.Errorf("detached record: %+v", last)
		}
		select {
		case d := <-detached:
			t.Errorf("runtime detach called without stopRuntime: %s", d)
		default:
		}
		// A new attach after a detach mints with no chain.
		b := bb.apply(t, "k", "job3", markerS2)
		if b.ReplacesAttachmentID != "" {
			t.Errorf("attach after detach chained to %q", b.ReplacesAttachmentID)
		}
		bb.apply(t, "k", "job3", block(`{"op":"detach","reason":"stop it","stopRuntime":true}`))
		if got := <-detached; got != "s2:stop it" {
			t.Errorf("runtime detach = %q", got)
		}
		if n := len(bb.lineage(t, "k")); n != 2 {
			t.Errorf("records were deleted: %d left", n)
		}
	})
	t.Run("a closed book fires nothing", func(t *testing.T) {
		bb.apply(t, "k2", "j", markerS1)
		bb.book.Close()
		bb.apply(t, "k2", "j", block(`{"op":"continue","prompt":"late"}`))
		mu.Lock()
		defer mu.Unlock()
		for _, c := range calls {
			if c == "continue late" {
				t.Error("closed book fired a continue")
			}
		}
	})
}

func TestBookWriteBackCAS(t *testing.T) {
	bb := newBookBundle(t, nil)
	ctx := t.Context()
	bb.apply(t, "k", "job1", markerS1)
	cur, _ := bb.book.Current(ctx, "k")
	good := Guard{AttachmentID: cur.ID, DelegatedTurnID: "job1"}
	running := Status{State: StateRunning}

	g1 := good
	g1.Token = bb.book.NextToken()
	g2 := good
	g2.Token = bb.book.NextToken()
	if ok, _ := bb.book.WriteBack(ctx, "k", g2, Status{State: StateNeedsInput}); !ok {
		t.Fatal("newer write refused")
	}
	tests := []struct {
		name string
		g    Guard
	}{
		{"older token", g1},
		{"same token", g2},
		{"different attachment", Guard{AttachmentID: "other", DelegatedTurnID: "job1", Token: bb.book.NextToken()}},
		{"different turn", Guard{AttachmentID: cur.ID, DelegatedTurnID: "job0", Token: bb.book.NextToken()}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ok, err := bb.book.WriteBack(ctx, "k", tc.g, running)
			if err != nil || ok {
				t.Errorf("WriteBack = %v, %v; want refused", ok, err)
			}
		})
	}
	if a, _ := bb.book.Current(ctx, "k"); a.Status != "needs_input" {
		t.Errorf("a refused write changed the status to %q", a.Status)
	}
	if ok, _ := bb.book.WriteBack(ctx, "nobody", g2, running); ok {
		t.Error("write to a key with no record accepted")
	}
}

func TestBookWriteBackFields(t *testing.T) {
	long := strings.Repeat("é", 2500)
	capped := strings.Repeat("é", 1999) + "…"
	tests := []struct {
		name   string
		start  string // marker state
		status Status
		check  func(t *testing.T, a *Attachment)
	}{
		{"failed read writes only the error", "running",
			Status{State: StateUnavailable, Alive: Bool(false), LatestResponse: "x", Error: &Error{Code: "inspect_timeout", Message: long}},
			func(t *testing.T, a *Attachment) {
				if a.Status != "running" || a.Alive != nil || a.LatestResponse != "" {
					t.Errorf("failed read touched the session state: %+v", a)
				}
				if a.Error == nil || a.Error.Code != "inspect_timeout" || a.Error.Message != capped {
					t.Errorf("error = %+v", a.Error)
				}
			}},
		{"bare liveness promotes starting", "",
			Status{State: StateUnknown, Alive: Bool(true)},
			func(t *testing.T, a *Attachment) {
				if a.Status != "running" || a.Alive == nil || !*a.Alive {
					t.Errorf("%+v", a)
				}
			}},
		{"bare liveness never overwrites a stated status", "needs_input",
			Status{State: StateUnknown, Alive: Bool(true)},
			func(t *testing.T, a *Attachment) {
				if a.Status != "needs_input" {
					t.Errorf("status = %q", a.Status)
				}
			}},
		{"completed turn records a capped result", "running",
			Status{State: StateCompleted, Provider: "p", ProviderSessionID: "ps", Host: "h", RemoteURL: "u",
				Metadata: map[string]string{"a": "b"}, StartedAt: 5, LatestResponse: long, FinalResponse: long,
				Termination: &Termination{Reason: ReasonCompleted, At: 77}},
			func(t *testing.T, a *Attachment) {
				want := &Result{Summary: capped, OutputRef: "s1:/wt", ObservedAt: 77}
				if diff := cmp.Diff(want, a.LastResult); diff != "" {
					t.Errorf("result mismatch (-want +got):\n%s", diff)
				}
				if a.LatestResponse != capped || a.Provider != "p" || a.Host != "h" || a.StartedAt != 5 ||
					a.Metadata["a"] != "b" || a.Termination.At != 77 || a.Status != "completed" {
					t.Errorf("%+v", a)
				}
			}},
		{"an undated answer is stamped now", "running",
			Status{State: StateIdle, FinalResponse: "ok"},
			func(t *testing.T, a *Attachment) {
				if a.LastResult == nil || a.LastResult.ObservedAt != 1000 {
					t.Errorf("%+v", a.LastResult)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bb := newBookBundle(t, nil)
			state := ""
			if tc.start != "" {
				state = `,"state":"` + tc.start + `"`
			}
			bb.apply(t, "k", "j", `<agent-session>{"runtime":"rt","sessionId":"s1","metadata":{"worktreePath":"/wt"}`+state+`}</agent-session>`)
			g, _, ok, err := bb.book.Begin(t.Context(), "k")
			if !ok || err != nil {
				t.Fatal(ok, err)
			}
			if ok, err := bb.book.WriteBack(t.Context(), "k", g, tc.status); !ok || err != nil {
				t.Fatalf("WriteBack = %v, %v", ok, err)
			}
			a, _ := bb.book.Current(t.Context(), "k")
			if a.ObservationToken != g.Token || a.LastObservedAt != 1000 {
				t.Errorf("token %d lastObservedAt %d", a.ObservationToken, a.LastObservedAt)
			}
			tc.check(t, a)
		})
	}
}

func TestBookTokenHighWaterSurvivesReload(t *testing.T) {
	bb := newBookBundle(t, nil)
	ctx := t.Context()
	bb.apply(t, "k", "j", markerS1)
	for range 5 {
		g, _, _, _ := bb.book.Begin(ctx, "k")
		if ok, _ := bb.book.WriteBack(ctx, "k", g, Status{State: StateRunning}); !ok {
			t.Fatal("write refused")
		}
	}
	high, _ := bb.book.Current(ctx, "k")
	// The highest token now sits on a superseded record.
	bb.apply(t, "k", "j", markerS2)
	bb.book.Close()

	reopened := bb.open(t)
	if got := reopened.NextToken(); got <= high.ObservationToken {
		t.Fatalf("token after reload = %d, not above the high-water mark %d", got, high.ObservationToken)
	}
	if reopened.HighWaterToken() <= high.ObservationToken {
		t.Error("HighWaterToken went backwards")
	}
}

func TestCapText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{strings.Repeat("a", 2000), strings.Repeat("a", 2000)},
		{strings.Repeat("a", 2001), strings.Repeat("a", 1999) + "…"},
	} {
		if got := CapText(tc.in); got != tc.want {
			t.Errorf("CapText(len %d) has length %d", len(tc.in), len(got))
		}
	}
}

// flakyStore fails or conflicts on demand.
type flakyStore struct {
	*MemoryStore
	conflicts atomic.Int32 // conflicts to inject before saving
	failLoad  atomic.Bool
	failSave  atomic.Bool
	failMax   bool
}

var errBroken = errors.New("store broken")

func (f *flakyStore) LoadAttachments(ctx context.Context, k string) (SessionAttachments, error) {
	if f.failLoad.Load() {
		return SessionAttachments{}, errBroken
	}
	return f.MemoryStore.LoadAttachments(ctx, k)
}

func (f *flakyStore) SaveAttachments(ctx context.Context, w AttachmentWrite) error {
	if f.failSave.Load() {
		return errBroken
	}
	if f.conflicts.Add(-1) >= 0 {
		return fmt.Errorf("wrapped: %w", ErrVersionConflict)
	}
	return f.MemoryStore.SaveAttachments(ctx, w)
}

func (f *flakyStore) MaxObservationToken(ctx context.Context) (int64, error) {
	if f.failMax {
		return 0, errBroken
	}
	return f.MemoryStore.MaxObservationToken(ctx)
}

func TestBookStoreFailures(t *testing.T) {
	ctx := t.Context()
	if _, err := NewBook(ctx, &flakyStore{MemoryStore: NewMemoryStore(), failMax: true}, BookOptions{}); !errors.Is(err, errBroken) {
		t.Errorf("NewBook error = %v", err)
	}
	fs := &flakyStore{MemoryStore: NewMemoryStore()}
	b, err := NewBook(ctx, fs, BookOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	d := ParseHandoff(markerS1).Directive

	fs.conflicts.Store(3)
	if a, err := b.Apply(ctx, "k", "j", d); err != nil || a == nil || len(a.ID) != 36 {
		t.Fatalf("Apply after conflicts = %+v, %v", a, err)
	}
	fs.conflicts.Store(100)
	if _, err := b.Apply(ctx, "k", "j2", d); !errors.Is(err, ErrVersionConflict) {
		t.Errorf("Apply under endless conflicts = %v", err)
	}
	fs.conflicts.Store(0)
	fs.failSave.Store(true)
	if _, err := b.Apply(ctx, "k", "j3", d); !errors.Is(err, errBroken) {
		t.Errorf("Apply with a failing save = %v", err)
	}
	g, _, _, _ := b.Begin(ctx, "k")
	if _, err := b.WriteBack(ctx, "k", g, Status{State: StateRunning}); !errors.Is(err, errBroken) {
		t.Errorf("WriteBack with a failing save = %v", err)
	}
	if st, err := b.Observe(ctx, "k", Request{Op: OpInspect}); !errors.Is(err, errBroken) || st == nil {
		t.Errorf("Observe with a failing save = %v, %v", st, err)
	}
	fs.failLoad.Store(true)
	for name, f := range map[string]func() error{
		"Current": func() error { _, err := b.Current(ctx, "k"); return err },
		"Lineage": func() error { _, err := b.Lineage(ctx, "k"); return err },
		"Apply":   func() error { _, err := b.Apply(ctx, "k", "j", d); return err },
		"Apply nil": func() error {
			_, err := b.Apply(ctx, "k", "j", nil)
			return err
		},
		"Observe": func() error { _, err := b.Observe(ctx, "k", Request{Op: OpInspect}); return err },
		"Recover": func() error { _, err := b.Recover(ctx, "k", "j", 0); return err },
	} {
		if err := f(); !errors.Is(err, errBroken) {
			t.Errorf("%s with a failing load = %v", name, err)
		}
	}
	if _, err := b.Current(ctx, ""); !errors.Is(err, ErrEmptySessionKey) {
		t.Errorf("empty key = %v", err)
	}
}

func TestMemoryStoreContract(t *testing.T) {
	ctx := t.Context()
	m := NewMemoryStore()
	if s, err := m.LoadAttachments(ctx, "k"); err != nil || s.Version != 0 || s.Records != nil {
		t.Fatalf("empty load = %+v, %v", s, err)
	}
	rec := Attachment{ID: "a", Metadata: map[string]string{"x": "1"}, ObservationToken: 7}
	if err := m.SaveAttachments(ctx, AttachmentWrite{SessionKey: "k", ExpectVersion: 1, Records: []Attachment{rec}}); !errors.Is(err, ErrVersionConflict) {
		t.Errorf("save with a wrong version = %v", err)
	}
	if err := m.SaveAttachments(ctx, AttachmentWrite{SessionKey: "k", CurrentID: "a", Records: []Attachment{rec}}); err != nil {
		t.Fatal(err)
	}
	rec.Metadata["x"] = "mutated after save"
	s, _ := m.LoadAttachments(ctx, "k")
	s.Records[0].Metadata["x"] = "mutated after load"
	s2, _ := m.LoadAttachments(ctx, "k")
	if s2.Records[0].Metadata["x"] != "1" || s2.CurrentID != "a" || s2.Version != 1 {
		t.Errorf("store aliases caller memory: %+v", s2)
	}
	if hw, _ := m.MaxObservationToken(ctx); hw != 7 {
		t.Errorf("high water = %d", hw)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := m.LoadAttachments(cancelled, "k"); err == nil {
		t.Error("load honoured no ctx")
	}
	if err := m.SaveAttachments(cancelled, AttachmentWrite{SessionKey: "k"}); err == nil {
		t.Error("save honoured no ctx")
	}
	if _, err := m.MaxObservationToken(cancelled); err == nil {
		t.Error("max honoured no ctx")
	}
	full := Attachment{ID: "f", LastResult: &Result{}, Alive: Bool(true), Error: &Error{}, Termination: &Termination{ExitCode: intPtr(1)}}
	if diff := cmp.Diff(full, full.Clone()); diff != "" {
		t.Errorf("Clone mismatch (-want +got):\n%s", diff)
	}
}
