package storetest

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/store"
)

// RunTerminalHosts runs the suite of the terminal host directory and its
// operation queue: publication replaces a host's row, an operation is
// pending until finished, one claim holds it at a time, only the claimer
// finishes it, and only once.
func RunTerminalHosts(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Run("PublishReplaces", func(t *testing.T) {
		s, ctx := newStore(t), t.Context()
		for _, h := range []store.TerminalHost{
			{Host: "b", Owner: "b/1/x", PublishedAt: 10, Panes: json.RawMessage(`[{"id":"one"}]`)},
			{Host: "a", Owner: "a/1/x", PublishedAt: 11},
			{Host: "b", Owner: "b/2/y", PublishedAt: 20, Panes: json.RawMessage(`[]`)},
		} {
			if err := s.PublishTerminalHost(ctx, h); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.TerminalHostList(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := []store.TerminalHost{
			{Host: "a", Owner: "a/1/x", PublishedAt: 11, Panes: json.RawMessage(`[]`)},
			{Host: "b", Owner: "b/2/y", PublishedAt: 20, Panes: json.RawMessage(`[]`)},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("hosts (-want +got):\n%s", diff)
		}
	})
	t.Run("OpClaimFinish", func(t *testing.T) {
		s, ctx := newStore(t), t.Context()
		op := &store.HostOp{OpID: "op-1", Host: "b", Op: "send", Args: json.RawMessage(`{"request":"hi"}`), RequestedBy: "a/1/x", CreatedAt: 5}
		if err := s.PutHostOp(ctx, op); err != nil {
			t.Fatal(err)
		}
		if err := s.PutHostOp(ctx, &store.HostOp{OpID: "op-1", Host: "b", Op: "send"}); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("second put of op-1: %v, want ErrConflict", err)
		}
		if err := s.PutHostOp(ctx, &store.HostOp{OpID: "op-2", Host: "c", Op: "send", CreatedAt: 6}); err != nil {
			t.Fatal(err)
		}
		pending, err := s.PendingHostOps(ctx, "b", 100, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(pending) != 1 || pending[0].OpID != "op-1" || string(pending[0].Args) != `{"request":"hi"}` || pending[0].Status != store.HostOpPending {
			t.Fatalf("pending ops of b = %+v, want op-1 alone", pending)
		}
		if err := s.ClaimHostOp(ctx, "op-1", "b/1/x", 100, 200); err != nil {
			t.Fatal(err)
		}
		if err := s.ClaimHostOp(ctx, "op-1", "b/2/y", 150, 250); !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("claim of a claimed op: %v, want ErrLeaseLost", err)
		}
		if pending, _ := s.PendingHostOps(ctx, "b", 150, 10); len(pending) != 0 {
			t.Fatalf("a claimed op is still offered: %+v", pending)
		}
		done := *pending[0]
		done.Result, done.DoneAt = json.RawMessage(`{"turn_id":"turn-1"}`), 160
		if err := s.FinishHostOp(ctx, &done, "b/2/y"); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("finish by a process that did not claim: %v, want ErrConflict", err)
		}
		if err := s.FinishHostOp(ctx, &done, "b/1/x"); err != nil {
			t.Fatal(err)
		}
		if err := s.FinishHostOp(ctx, &done, "b/1/x"); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("second finish: %v, want ErrConflict", err)
		}
		if err := s.ClaimHostOp(ctx, "op-1", "b/2/y", 1000, 2000); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("claim of a done op: %v, want ErrConflict", err)
		}
		got, err := s.GetHostOp(ctx, "op-1")
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != store.HostOpDone || string(got.Result) != `{"turn_id":"turn-1"}` || got.DoneAt != 160 {
			t.Fatalf("done op = %+v", got)
		}
		if _, err := s.GetHostOp(ctx, "op-9"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("get of an unknown op: %v, want ErrNotFound", err)
		}
	})
	t.Run("ExpiredClaimIsFree", func(t *testing.T) {
		s, ctx := newStore(t), t.Context()
		if err := s.PutHostOp(ctx, &store.HostOp{OpID: "op-1", Host: "b", Op: "approve", CreatedAt: 1}); err != nil {
			t.Fatal(err)
		}
		if err := s.ClaimHostOp(ctx, "op-1", "b/1/x", 10, 20); err != nil {
			t.Fatal(err)
		}
		if pending, _ := s.PendingHostOps(ctx, "b", 21, 10); len(pending) != 1 {
			t.Fatalf("an op whose claim expired is not offered again: %+v", pending)
		}
		if err := s.ClaimHostOp(ctx, "op-1", "b/2/y", 21, 40); err != nil {
			t.Fatalf("claim after the first expired: %v", err)
		}
	})
}
