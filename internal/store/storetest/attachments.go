package storetest

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/store"
)

func testAttachments(t *testing.T, s store.Store) {
	ctx := t.Context()
	empty, err := s.LoadAttachments(ctx, "main", "k")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&store.AttachmentState{Agent: "main", SessionKey: "k"}, empty); diff != "" {
		t.Fatalf("empty state (-want +got):\n%s", diff)
	}
	w := store.AttachmentWrite{Agent: "main", SessionKey: "k", CurrentID: "a1",
		Records: []store.AttachmentRecord{{ID: "a1", ObservationToken: 3, Data: []byte(`{"id":"a1"}`)}}}
	v, err := s.SaveAttachments(ctx, w)
	if err != nil || v != 1 {
		t.Fatalf("first save = %d, %v; want version 1", v, err)
	}
	if _, err := s.SaveAttachments(ctx, w); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second save from version 0 = %v, want ErrConflict", err)
	}
	// Replace: a1 superseded, a2 current; the write carries only the changed
	// records, and the lineage keeps both in first-save order.
	v, err = s.SaveAttachments(ctx, store.AttachmentWrite{Agent: "main", SessionKey: "k", ExpectVersion: 1, CurrentID: "a2",
		Records: []store.AttachmentRecord{
			{ID: "a2", ObservationToken: 9, Data: []byte(`{"id":"a2"}`)},
			{ID: "a1", ObservationToken: 3, Data: []byte(`{"id":"a1","status":"superseded"}`)},
		}})
	if err != nil || v != 2 {
		t.Fatalf("replace save = %d, %v; want version 2", v, err)
	}
	got, err := s.LoadAttachments(ctx, "main", "k")
	if err != nil {
		t.Fatal(err)
	}
	want := &store.AttachmentState{Agent: "main", SessionKey: "k", CurrentID: "a2", Version: 2, Records: []store.AttachmentRecord{
		{ID: "a1", Seq: 1, ObservationToken: 3, Data: []byte(`{"id":"a1","status":"superseded"}`)},
		{ID: "a2", Seq: 2, ObservationToken: 9, Data: []byte(`{"id":"a2"}`)},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("state (-want +got):\n%s", diff)
	}
	if n, err := s.MaxObservationToken(ctx); err != nil || n != 9 {
		t.Fatalf("MaxObservationToken = %d, %v; want 9", n, err)
	}
	// Another session's state is independent.
	if _, err := s.SaveAttachments(ctx, store.AttachmentWrite{Agent: "other", SessionKey: "k"}); err != nil {
		t.Fatalf("other agent's first save: %v", err)
	}
	// A detach leaves no current record but keeps the lineage.
	if _, err := s.SaveAttachments(ctx, store.AttachmentWrite{Agent: "main", SessionKey: "k", ExpectVersion: 2}); err != nil {
		t.Fatal(err)
	}
	again, err := s.LoadAttachments(ctx, "main", "k")
	if err != nil || again.CurrentID != "" || len(again.Records) != 2 || again.Version != 3 {
		t.Fatalf("after detach: %+v, %v", again, err)
	}
}
