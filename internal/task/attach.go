package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/clawconnect/clawconnect/agentsession"
	"github.com/clawconnect/clawconnect/internal/store"
)

// AttachmentStore adapts the store to agentsession.Store for one agent's
// scope, so the attachment book persists next to the tasks.
func AttachmentStore(s store.Store, agent string) agentsession.Store {
	return attachStore{s: s, agent: agent}
}

type attachStore struct {
	s     store.Store
	agent string
}

func (a attachStore) LoadAttachments(ctx context.Context, sessionKey string) (agentsession.SessionAttachments, error) {
	st, err := a.s.LoadAttachments(ctx, a.agent, sessionKey)
	if err != nil {
		return agentsession.SessionAttachments{}, err
	}
	out := agentsession.SessionAttachments{CurrentID: st.CurrentID, Version: st.Version}
	for _, r := range st.Records {
		var rec agentsession.Attachment
		if err := json.Unmarshal(r.Data, &rec); err != nil {
			return agentsession.SessionAttachments{}, fmt.Errorf("load attachments: record %s is unreadable (%v): %w",
				r.ID, err, store.ErrIncompatible)
		}
		out.Records = append(out.Records, rec)
	}
	return out, nil
}

func (a attachStore) SaveAttachments(ctx context.Context, w agentsession.AttachmentWrite) error {
	sw := store.AttachmentWrite{Agent: a.agent, SessionKey: w.SessionKey, ExpectVersion: w.ExpectVersion, CurrentID: w.CurrentID}
	for _, r := range w.Records {
		b, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("save attachments: %w", err)
		}
		sw.Records = append(sw.Records, store.AttachmentRecord{ID: r.ID, ObservationToken: r.ObservationToken, Data: b})
	}
	_, err := a.s.SaveAttachments(ctx, sw)
	if errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("%w: %w", agentsession.ErrVersionConflict, err)
	}
	return err
}

func (a attachStore) MaxObservationToken(ctx context.Context) (int64, error) {
	return a.s.MaxObservationToken(ctx)
}
