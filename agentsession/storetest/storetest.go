// Package storetest is the conformance suite for implementations of
// agentsession.Store: every store (the in-memory one, SQLite, PostgreSQL)
// runs Run against itself so that the Book behaves the same over each.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/agentsession"
)

// Options tunes [Run].
type Options struct {
	// Reopen, when set, closes s and returns a new Store over the same
	// durable state, so the suite can check what survives a restart. Leave
	// it nil for stores that keep nothing (the in-memory one).
	Reopen func(t *testing.T, s agentsession.Store) agentsession.Store
}

// Run runs the conformance suite. newStore must return an empty store for
// each call (a fresh database or schema); the suite never shares one store
// between subtests.
func Run(t *testing.T, newStore func(t *testing.T) agentsession.Store, opts Options) {
	t.Run("UnknownKeyIsEmpty", func(t *testing.T) {
		s := newStore(t)
		got, err := s.LoadAttachments(t.Context(), "nobody")
		if err != nil {
			t.Fatal(err)
		}
		if got.Version != 0 || got.CurrentID != "" || len(got.Records) != 0 {
			t.Errorf("LoadAttachments(unknown) = %+v, want the zero value", got)
		}
		if hw, err := s.MaxObservationToken(t.Context()); err != nil || hw != 0 {
			t.Errorf("MaxObservationToken() on an empty store = %d, %v", hw, err)
		}
	})
	t.Run("RoundTripsEveryField", func(t *testing.T) {
		s := newStore(t)
		rec := fullRecord("a1", 7)
		save(t, s, agentsession.AttachmentWrite{SessionKey: "k", CurrentID: "a1", Records: []agentsession.Attachment{rec}})
		got := load(t, s, "k")
		if diff := cmp.Diff([]agentsession.Attachment{rec}, got.Records); diff != "" {
			t.Errorf("record mismatch (-want +got):\n%s", diff)
		}
		if got.CurrentID != "a1" || got.Version == 0 {
			t.Errorf("current %q version %d", got.CurrentID, got.Version)
		}
	})
	t.Run("VersionCheck", func(t *testing.T) {
		s := newStore(t)
		ctx := t.Context()
		w := agentsession.AttachmentWrite{SessionKey: "k", ExpectVersion: 5, CurrentID: "a", Records: []agentsession.Attachment{{ID: "a"}}}
		if err := s.SaveAttachments(ctx, w); !errors.Is(err, agentsession.ErrVersionConflict) {
			t.Fatalf("save to a new key expecting version 5 = %v, want ErrVersionConflict", err)
		}
		if got := load(t, s, "k"); got.Version != 0 || len(got.Records) != 0 {
			t.Fatalf("a refused save changed the key: %+v", got)
		}
		w.ExpectVersion = 0
		save(t, s, w)
		v1 := load(t, s, "k").Version
		w.Records[0].Reason = "second"
		if err := s.SaveAttachments(ctx, w); !errors.Is(err, agentsession.ErrVersionConflict) {
			t.Fatalf("save with a stale version = %v, want ErrVersionConflict", err)
		}
		w.ExpectVersion = v1
		save(t, s, w)
		got := load(t, s, "k")
		if got.Version == v1 || got.Records[0].Reason != "second" {
			t.Errorf("after the second save: %+v (version was %d)", got, v1)
		}
	})
	t.Run("UpsertKeepsFirstSaveOrderAndNeverDeletes", func(t *testing.T) {
		s := newStore(t)
		save(t, s, agentsession.AttachmentWrite{SessionKey: "k", CurrentID: "a",
			Records: []agentsession.Attachment{{ID: "a", Status: "running"}}})
		v := load(t, s, "k").Version
		save(t, s, agentsession.AttachmentWrite{SessionKey: "k", ExpectVersion: v, CurrentID: "b",
			Records: []agentsession.Attachment{{ID: "b", ReplacesAttachmentID: "a"}, {ID: "a", Status: "superseded"}}})
		v = load(t, s, "k").Version
		save(t, s, agentsession.AttachmentWrite{SessionKey: "k", ExpectVersion: v, CurrentID: "",
			Records: []agentsession.Attachment{{ID: "b", Status: "detached", ReplacesAttachmentID: "a"}}})
		got := load(t, s, "k")
		want := []agentsession.Attachment{{ID: "a", Status: "superseded"}, {ID: "b", Status: "detached", ReplacesAttachmentID: "a"}}
		if diff := cmp.Diff(want, got.Records); diff != "" {
			t.Errorf("records mismatch (-want +got):\n%s", diff)
		}
		if got.CurrentID != "" {
			t.Errorf("current = %q, want none", got.CurrentID)
		}
	})
	t.Run("KeysAreIndependentAndTokenIsGlobal", func(t *testing.T) {
		s := newStore(t)
		save(t, s, agentsession.AttachmentWrite{SessionKey: "k1", CurrentID: "x",
			Records: []agentsession.Attachment{{ID: "x", ObservationToken: 40}}})
		save(t, s, agentsession.AttachmentWrite{SessionKey: "k2", CurrentID: "y",
			Records: []agentsession.Attachment{{ID: "y", ObservationToken: 12}}})
		v := load(t, s, "k1").Version
		// The highest token now sits on a superseded record.
		save(t, s, agentsession.AttachmentWrite{SessionKey: "k1", ExpectVersion: v, CurrentID: "z",
			Records: []agentsession.Attachment{{ID: "x", ObservationToken: 41, Status: "superseded"}, {ID: "z"}}})
		if got := load(t, s, "k2"); len(got.Records) != 1 || got.CurrentID != "y" {
			t.Errorf("k2 = %+v", got)
		}
		if hw, err := s.MaxObservationToken(t.Context()); err != nil || hw != 41 {
			t.Errorf("MaxObservationToken() = %d, %v; want 41", hw, err)
		}
	})
	t.Run("ConcurrentSavesOneWinner", func(t *testing.T) {
		s := newStore(t)
		save(t, s, agentsession.AttachmentWrite{SessionKey: "k", CurrentID: "a", Records: []agentsession.Attachment{{ID: "a"}}})
		v := load(t, s, "k").Version
		const writers = 8
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for i := range writers {
			wg.Go(func() {
				errs <- s.SaveAttachments(t.Context(), agentsession.AttachmentWrite{SessionKey: "k", ExpectVersion: v,
					CurrentID: "a", Records: []agentsession.Attachment{{ID: "a", Reason: fmt.Sprint(i)}}})
			})
		}
		wg.Wait()
		close(errs)
		wins := 0
		for err := range errs {
			switch {
			case err == nil:
				wins++
			case !errors.Is(err, agentsession.ErrVersionConflict):
				t.Errorf("concurrent save: %v", err)
			}
		}
		if wins != 1 {
			t.Errorf("%d concurrent saves from one version won, want exactly 1", wins)
		}
	})
	t.Run("BookOverStore", func(t *testing.T) {
		s := newStore(t)
		ctx := t.Context()
		book, err := agentsession.NewBook(ctx, s, agentsession.BookOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer book.Close()
		marker := func(id string) *agentsession.Directive {
			return agentsession.ParseHandoff(`<agent-session>{"runtime":"rt","sessionId":"` + id + `","state":"running"}</agent-session>`).Directive
		}
		first, err := book.Apply(ctx, "k", "job1", marker("s1"))
		if err != nil {
			t.Fatal(err)
		}
		g, _, _, err := book.Begin(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := book.WriteBack(ctx, "k", g, agentsession.Status{State: agentsession.StateCompleted, FinalResponse: "done", LastEventAt: 9}); !ok || err != nil {
			t.Fatalf("WriteBack = %v, %v", ok, err)
		}
		if _, err := book.Apply(ctx, "k", "job2", marker("s2")); err != nil {
			t.Fatal(err)
		}
		lineage, err := book.Lineage(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if len(lineage) != 2 || lineage[0].ID != first.ID || lineage[0].Status != agentsession.AttachmentSuperseded ||
			lineage[0].LastResult == nil || lineage[1].ReplacesAttachmentID != first.ID {
			t.Errorf("lineage = %+v", lineage)
		}
	})
	if opts.Reopen != nil {
		t.Run("SurvivesReopen", func(t *testing.T) {
			s := newStore(t)
			rec := fullRecord("a1", 99)
			save(t, s, agentsession.AttachmentWrite{SessionKey: "k", CurrentID: "a1",
				Records: []agentsession.Attachment{rec, {ID: "a0", Status: "superseded"}}})
			before := load(t, s, "k")
			s = opts.Reopen(t, s)
			after := load(t, s, "k")
			if diff := cmp.Diff(before, after); diff != "" {
				t.Errorf("state changed across reopen (-want +got):\n%s", diff)
			}
			if hw, err := s.MaxObservationToken(t.Context()); err != nil || hw != 99 {
				t.Errorf("MaxObservationToken() after reopen = %d, %v", hw, err)
			}
			book, err := agentsession.NewBook(t.Context(), s, agentsession.BookOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer book.Close()
			if tok := book.NextToken(); tok <= 99 {
				t.Errorf("token after reopen = %d, not above the high-water mark 99", tok)
			}
		})
	}
}

func fullRecord(id string, token int64) agentsession.Attachment {
	exit := 3
	return agentsession.Attachment{
		ID: id, Runtime: "rt", Provider: "p", Handle: "h", ProviderSessionID: "ps", Host: "box", Worktree: "/wt",
		RemoteURL: "https://example.test/s", AttachedAt: 1, LastObservedAt: 2, Status: "completed",
		ReplacesAttachmentID: "a0", DelegatedTurnID: "job", Reason: "why",
		LastResult:     &agentsession.Result{Summary: "answer ✓", OutputRef: "h:/wt", ObservedAt: 3},
		LatestResponse: "now", Alive: agentsession.Bool(false), StartedAt: 4, LastEventAt: 5,
		Error:       &agentsession.Error{Code: agentsession.CodeSessionNotFound, Message: "m"},
		Termination: &agentsession.Termination{Reason: agentsession.ReasonCompleted, At: 6, ExitCode: &exit, Message: "bye"},
		Metadata:    map[string]string{"k": "v", "n": "2"}, ObservationToken: token,
	}
}

func save(t *testing.T, s agentsession.Store, w agentsession.AttachmentWrite) {
	t.Helper()
	if err := s.SaveAttachments(context.WithoutCancel(t.Context()), w); err != nil {
		t.Fatalf("SaveAttachments(%+v) = %v", w, err)
	}
}

func load(t *testing.T, s agentsession.Store, key string) agentsession.SessionAttachments {
	t.Helper()
	got, err := s.LoadAttachments(t.Context(), key)
	if err != nil {
		t.Fatalf("LoadAttachments(%q) = %v", key, err)
	}
	return got
}
