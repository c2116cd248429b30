package dashboard

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/clawconnect/clawconnect/agentsession"
	"github.com/clawconnect/clawconnect/internal/store"
)

// lineageWindow bounds the attachment records a task page shows (the
// newest ones; the page says how many earlier ones it left out).
const lineageWindow = 100

// AttachmentReader reads a session's attachment book: the current record
// and every record ever attached, oldest first (store.Store's
// LoadAttachments). With it, a task page shows its session's attachment
// lineage, not only the current record that get_task returns.
type AttachmentReader interface {
	LoadAttachments(ctx context.Context, agent, sessionKey string) (*store.AttachmentState, error)
}

// lineageRow is one attachment record of a task page's lineage.
type lineageRow struct {
	Seq          int64
	Record       agentsession.Attachment
	Current      bool
	ByThisTask   bool   // the record was delegated to by the task shown
	SupersededBy string // the id of the record that replaced it
	Unreadable   string // why the stored record could not be read
}

// lineageView is a task page's attachment lineage, oldest to newest.
type lineageView struct {
	Rows    []lineageRow
	Earlier int // older records not shown
	Err     string
}

// lineage reads the attachment lineage of the session of task taskID. The
// caller has already been allowed to see the task, and the lineage is that
// task's session's (whose principal is the task's), so owner isolation
// holds as for the task itself. A failed read is shown, not fatal.
func (d *Dashboard) lineage(ctx context.Context, agent, sessionKey, taskID string) *lineageView {
	if d.o.Attachments == nil || agent == "" || sessionKey == "" {
		return nil
	}
	st, err := d.o.Attachments.LoadAttachments(ctx, agent, sessionKey)
	if err != nil {
		d.o.Logger.Warn("dashboard: read attachment lineage", "job_id", taskID, "err", err)
		return &lineageView{Err: "the attachment lineage could not be read; see the server log"}
	}
	if len(st.Records) == 0 {
		return nil
	}
	v := &lineageView{}
	replacedBy := map[string]string{}
	rows := make([]lineageRow, 0, len(st.Records))
	for _, r := range st.Records {
		row := lineageRow{Seq: r.Seq, Current: r.ID == st.CurrentID}
		if err := json.Unmarshal(r.Data, &row.Record); err != nil {
			row.Record.ID = r.ID
			row.Unreadable = fmt.Sprintf("unreadable record: %v", err)
		}
		row.ByThisTask = row.Record.DelegatedTurnID != "" && row.Record.DelegatedTurnID == taskID
		if p := row.Record.ReplacesAttachmentID; p != "" {
			replacedBy[p] = row.Record.ID
		}
		rows = append(rows, row)
	}
	for i := range rows {
		rows[i].SupersededBy = replacedBy[rows[i].Record.ID]
	}
	if len(rows) > lineageWindow {
		v.Earlier = len(rows) - lineageWindow
		rows = rows[v.Earlier:]
	}
	v.Rows = rows
	return v
}
