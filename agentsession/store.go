package agentsession

import (
	"context"
	"errors"
	"maps"
	"sync"
)

// Attachment is ClawConnect's record of one managed session attached to an
// OpenClaw session key. Records are never deleted: a superseded or detached
// record stays in the key's lineage. Timestamps are epoch milliseconds, 0
// when absent. The JSON form is the persisted and emitted form (agentSession
// on task snapshots); a store may keep each record as one JSON document.
type Attachment struct {
	ID                   string           `json:"id"` // ClawConnect's id (not the handle)
	Runtime              string           `json:"runtime"`
	Provider             string           `json:"provider,omitempty"`
	Handle               string           `json:"handle"` // the session id in the runtime's namespace
	ProviderSessionID    string           `json:"providerSessionId,omitempty"`
	Host                 string           `json:"host,omitempty"`
	Worktree             string           `json:"worktree,omitempty"`
	RemoteURL            string           `json:"remoteUrl,omitempty"`
	AttachedAt           int64            `json:"attachedAt"`
	LastObservedAt       int64            `json:"lastObservedAt,omitempty"`
	Status               AttachmentStatus `json:"status"`
	ReplacesAttachmentID string           `json:"replacesAttachmentId,omitempty"`
	// DelegatedTurnID is the job id of the parent turn that delegated to the
	// session; only that turn may take an answer from it.
	DelegatedTurnID string  `json:"delegatedTurnId,omitempty"`
	Reason          string  `json:"reason,omitempty"` // why it was superseded or detached
	LastResult      *Result `json:"lastResult,omitempty"`
	// LatestResponse is what the session says now (capped); never the answer.
	LatestResponse string            `json:"latestResponse,omitempty"`
	Alive          *bool             `json:"alive,omitempty"` // nil = unknown (not false)
	StartedAt      int64             `json:"startedAt,omitempty"`
	LastEventAt    int64             `json:"lastEventAt,omitempty"`
	Error          *Error            `json:"error,omitempty"` // the last failed read; cleared by the next successful one
	Termination    *Termination      `json:"termination,omitempty"`
	Metadata       map[string]string `json:"metadata,omitempty"`
	// ObservationToken is the monotonic token of the last accepted write of
	// observed or stated state; 0 when none.
	ObservationToken int64 `json:"observationToken,omitempty"`
}

// Result is the last final answer taken from a completed turn.
type Result struct {
	Summary    string `json:"summary,omitempty"` // capped at ResultTextMax characters
	OutputRef  string `json:"outputRef,omitempty"`
	ObservedAt int64  `json:"observedAt"`
}

// Clone returns a deep copy of a.
func (a Attachment) Clone() Attachment {
	c := a
	if a.LastResult != nil {
		r := *a.LastResult
		c.LastResult = &r
	}
	if a.Alive != nil {
		c.Alive = Bool(*a.Alive)
	}
	if a.Error != nil {
		e := *a.Error
		c.Error = &e
	}
	if a.Termination != nil {
		t := *a.Termination
		if t.ExitCode != nil {
			n := *t.ExitCode
			t.ExitCode = &n
		}
		c.Termination = &t
	}
	c.Metadata = maps.Clone(a.Metadata)
	return c
}

// SessionAttachments is the persisted attachment state of one OpenClaw
// session key.
type SessionAttachments struct {
	// CurrentID is the id of the current record, or "" when none is current.
	// An id with no matching record reads as "no current attachment".
	CurrentID string
	// Records holds every record ever saved for the key, in the order each
	// was first saved.
	Records []Attachment
	// Version is the store's version of the key's state: 0 when the key was
	// never saved, and different after every successful save.
	Version int64
}

// AttachmentWrite is one atomic change to a session key's state.
type AttachmentWrite struct {
	SessionKey string
	// ExpectVersion is the Version the change was computed from; the write
	// fails with ErrVersionConflict when the stored version differs.
	ExpectVersion int64
	// CurrentID is the new current record id ("" for none).
	CurrentID string
	// Records are the new or changed records (one or two), upserted by ID.
	Records []Attachment
}

// ErrVersionConflict is returned by [Store.SaveAttachments] when the key's
// stored version is not the expected one. The [Book] then reloads and
// recomputes its change.
var ErrVersionConflict = errors.New("attachment state changed concurrently")

// Store persists attachment state for a [Book]. Every method addresses one
// session key (or one aggregate); none needs a scan of all sessions.
//
// Contract, pinned by [MemoryStore] and by the durable stores' conformance
// suites:
//
//   - LoadAttachments returns the key's current id, every record ever saved
//     for it in first-save order, and its version. A key never saved yields
//     the zero SessionAttachments and a nil error.
//   - SaveAttachments applies one AttachmentWrite atomically: either every
//     record is upserted (by ID, replacing all of its fields), the current id
//     set and the version changed, or nothing changes. It fails with
//     ErrVersionConflict (possibly wrapped) when the stored version is not
//     w.ExpectVersion. Records are never deleted.
//   - MaxObservationToken returns the largest ObservationToken of any record
//     of any key, current, superseded or detached (0 when none). It is read
//     once when a Book opens, so tokens stay monotonic across restarts.
//   - Everything a save wrote survives a process restart (for durable
//     stores) with every Attachment field intact: a JSON round trip of the
//     record is sufficient.
//   - Methods are safe for concurrent use and honour ctx.
type Store interface {
	LoadAttachments(ctx context.Context, sessionKey string) (SessionAttachments, error)
	SaveAttachments(ctx context.Context, w AttachmentWrite) error
	MaxObservationToken(ctx context.Context) (int64, error)
}

// MemoryStore is an in-memory [Store]: the default for an embedding host
// that configures no durable store. Its zero value is ready to use and it is
// safe for concurrent use. Nothing survives the process.
type MemoryStore struct {
	mu       sync.Mutex
	sessions map[string]*memSession
	maxToken int64
}

type memSession struct {
	version int64
	current string
	order   []string
	records map[string]Attachment
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{} }

// LoadAttachments implements [Store].
func (m *MemoryStore) LoadAttachments(ctx context.Context, sessionKey string) (SessionAttachments, error) {
	if err := ctx.Err(); err != nil {
		return SessionAttachments{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.sessions[sessionKey]
	if s == nil {
		return SessionAttachments{}, nil
	}
	out := SessionAttachments{CurrentID: s.current, Version: s.version, Records: make([]Attachment, 0, len(s.order))}
	for _, id := range s.order {
		out.Records = append(out.Records, s.records[id].Clone())
	}
	return out, nil
}

// SaveAttachments implements [Store].
func (m *MemoryStore) SaveAttachments(ctx context.Context, w AttachmentWrite) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.sessions[w.SessionKey]
	version := int64(0)
	if s != nil {
		version = s.version
	}
	if version != w.ExpectVersion {
		return ErrVersionConflict
	}
	if s == nil {
		if m.sessions == nil {
			m.sessions = map[string]*memSession{}
		}
		s = &memSession{records: map[string]Attachment{}}
		m.sessions[w.SessionKey] = s
	}
	for _, r := range w.Records {
		if _, ok := s.records[r.ID]; !ok {
			s.order = append(s.order, r.ID)
		}
		s.records[r.ID] = r.Clone()
		m.maxToken = max(m.maxToken, r.ObservationToken)
	}
	s.current = w.CurrentID
	s.version++
	return nil
}

// MaxObservationToken implements [Store].
func (m *MemoryStore) MaxObservationToken(ctx context.Context) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.maxToken, nil
}
