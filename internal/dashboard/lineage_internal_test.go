package dashboard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/store"
)

// fakeBook is an AttachmentReader over one fixed state.
type fakeBook struct {
	st  *store.AttachmentState
	err error
}

func (f fakeBook) LoadAttachments(context.Context, string, string) (*store.AttachmentState, error) {
	return f.st, f.err
}

func TestLineageWindowAndLinks(t *testing.T) {
	t.Parallel()
	st := &store.AttachmentState{CurrentID: "a103"}
	for i := 1; i <= 103; i++ {
		data := fmt.Sprintf(`{"id":"a%d","runtime":"rt","handle":"h%d","status":"superseded","replacesAttachmentId":"a%d","delegatedTurnId":"job-%d"}`, i, i, i-1, i%2)
		if i == 102 {
			data = `{"id":`
		}
		if i == 103 {
			data = `{"id":"a103","runtime":"rt","handle":"h103","status":"running","replacesAttachmentId":"a102","delegatedTurnId":"job-1"}`
		}
		st.Records = append(st.Records, store.AttachmentRecord{ID: fmt.Sprintf("a%d", i), Seq: int64(i), Data: []byte(data)})
	}
	d := &Dashboard{o: Options{Attachments: fakeBook{st: st}, Logger: slog.New(slog.DiscardHandler)}}
	v := d.lineage(t.Context(), "alpha", "k", "job-1")
	if v == nil || v.Earlier != 3 || len(v.Rows) != lineageWindow {
		t.Fatalf("lineage of 103 records: %+v", v)
	}
	type row struct {
		Seq          int64
		ID           string
		Current      bool
		ByThisTask   bool
		SupersededBy string
		Unreadable   bool
	}
	var got []row
	for _, r := range v.Rows[len(v.Rows)-3:] {
		got = append(got, row{r.Seq, r.Record.ID, r.Current, r.ByThisTask, r.SupersededBy, r.Unreadable != ""})
	}
	want := []row{
		{101, "a101", false, true, "", false},     // its successor is unreadable: no link
		{102, "a102", false, false, "a103", true}, // unreadable, still linked by id
		{103, "a103", true, true, "", false},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("newest rows (-want +got):\n%s", diff)
	}
	if v.Rows[0].Seq != 4 {
		t.Errorf("oldest row shown is %d, want 4 (the three oldest left out)", v.Rows[0].Seq)
	}

	// A failed read is said on the page, and no lineage is an empty one.
	d.o.Attachments = fakeBook{err: errors.New("database gone")}
	if v := d.lineage(t.Context(), "alpha", "k", "job-1"); v == nil || v.Err == "" || len(v.Rows) != 0 {
		t.Errorf("failed read: %+v", v)
	}
	d.o.Attachments = fakeBook{st: &store.AttachmentState{}}
	if v := d.lineage(t.Context(), "alpha", "k", "job-1"); v != nil {
		t.Errorf("no records: %+v, want nil", v)
	}
	d.o.Attachments = nil
	if v := d.lineage(t.Context(), "alpha", "k", "job-1"); v != nil {
		t.Errorf("no reader: %+v, want nil", v)
	}
}
