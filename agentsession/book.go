package agentsession

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// ResultTextMax caps the stored text of an attachment (lastResult.summary,
// latestResponse, error messages), in characters.
const ResultTextMax = 2000

// CapText returns t unchanged when it has at most [ResultTextMax] characters,
// and otherwise its first ResultTextMax-1 characters followed by "…" (exactly
// ResultTextMax characters).
func CapText(t string) string {
	if utf8.RuneCountInString(t) <= ResultTextMax {
		return t
	}
	n := 0
	for i := range t {
		if n == ResultTextMax-1 {
			return t[:i] + "…"
		}
		n++
	}
	return t
}

// ErrEmptySessionKey is returned by Book methods given an empty session key.
var ErrEmptySessionKey = errors.New("empty session key")

// BookOptions configures a [Book]. The zero value is valid.
type BookOptions struct {
	// Registry holds the runtimes the book may call. Nil means none is
	// registered: every read then records unknown_runtime.
	Registry *Registry
	// CallTimeout bounds each runtime callback; zero means
	// [DefaultCallTimeout]. Hosts pass the value of [ParseCallTimeout].
	CallTimeout time.Duration
	// Logger receives background-operation outcomes; nil discards.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// NewID mints record ids; nil means random UUIDv4 strings.
	NewID func() string
}

// Book is the attachment book: per OpenClaw session key, at most one current
// [Attachment] plus every record it ever superseded or detached. All writes
// of attachment state go through it, and every observation write-back is a
// three-way compare-and-set (see [Book.WriteBack]).
//
// A Book is safe for concurrent use. It serializes writes per session key in
// process and relies on the [Store]'s version check across processes. It
// keeps no per-session state in memory: every call is a keyed load of one
// session. Operations that a transition fires without waiting (a continue
// prompt, a passive inspect, an explicit detach with stopRuntime) run on
// goroutines owned by the Book; [Book.Close] stops and waits for them.
type Book struct {
	store   Store
	reg     *Registry
	timeout time.Duration
	log     *slog.Logger
	now     func() time.Time
	newID   func() string

	seq   atomic.Int64 // observation-token high-water mark
	seed  maphash.Seed
	locks [64]sync.Mutex

	bgMu     sync.Mutex
	bgClosed bool
	bgWG     sync.WaitGroup
	bgCtx    context.Context
	bgCancel context.CancelFunc
}

// NewBook opens a book over store. It reads the store's highest observation
// token so that tokens stay monotonic across restarts. ctx bounds that read
// only.
func NewBook(ctx context.Context, store Store, opts BookOptions) (*Book, error) {
	hw, err := store.MaxObservationToken(ctx)
	if err != nil {
		return nil, fmt.Errorf("open attachment book: %w", err)
	}
	b := &Book{
		store:   store,
		reg:     opts.Registry,
		timeout: opts.CallTimeout,
		log:     opts.Logger,
		now:     opts.Now,
		newID:   opts.NewID,
		seed:    maphash.MakeSeed(),
	}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	if b.now == nil {
		b.now = time.Now
	}
	if b.newID == nil {
		b.newID = newUUID
	}
	b.seq.Store(hw)
	b.bgCtx, b.bgCancel = context.WithCancel(context.Background())
	return b, nil
}

// Close cancels the operations the book fired in the background and waits
// for them to return (each is bounded by the call timeout, and a callback
// that ignores cancellation is abandoned). Later transitions fire nothing.
// Close is idempotent and does not close the store.
func (b *Book) Close() {
	b.bgMu.Lock()
	b.bgClosed = true
	b.bgMu.Unlock()
	b.bgCancel()
	b.bgWG.Wait()
}

// NextToken takes the next observation token. Take it before calling a
// runtime and pass it to [Book.WriteBack] with the result.
func (b *Book) NextToken() int64 { return b.seq.Add(1) }

// HighWaterToken returns the highest observation token taken or seen so far.
func (b *Book) HighWaterToken() int64 { return b.seq.Load() }

func (b *Book) observeToken(t int64) {
	for {
		cur := b.seq.Load()
		if t <= cur || b.seq.CompareAndSwap(cur, t) {
			return
		}
	}
}

func (b *Book) lock(sessionKey string) *sync.Mutex {
	return &b.locks[maphash.String(b.seed, sessionKey)%uint64(len(b.locks))]
}

// session is a loaded key's state with helpers.
type session struct {
	SessionAttachments
	dirty map[string]bool
}

func (s *session) current() *Attachment {
	if s.CurrentID == "" {
		return nil
	}
	for i := range s.Records {
		if s.Records[i].ID == s.CurrentID {
			return &s.Records[i]
		}
	}
	return nil
}

func (s *session) touch(id string) {
	if s.dirty == nil {
		s.dirty = map[string]bool{}
	}
	s.dirty[id] = true
}

func (b *Book) load(ctx context.Context, sessionKey string) (*session, error) {
	if sessionKey == "" {
		return nil, ErrEmptySessionKey
	}
	sa, err := b.store.LoadAttachments(ctx, sessionKey)
	if err != nil {
		return nil, fmt.Errorf("load attachments: %w", err)
	}
	for _, r := range sa.Records {
		b.observeToken(r.ObservationToken)
	}
	return &session{SessionAttachments: sa}, nil
}

// maxConflictRetries bounds the reload-and-retry loop on version conflicts.
const maxConflictRetries = 8

// update loads sessionKey under its lock, lets mutate change it, and saves
// the records mutate touched. mutate reports whether anything changed. It
// retries on a version conflict.
func (b *Book) update(ctx context.Context, sessionKey string, mutate func(s *session) bool) (*session, error) {
	mu := b.lock(sessionKey)
	mu.Lock()
	defer mu.Unlock()
	for range maxConflictRetries {
		s, err := b.load(ctx, sessionKey)
		if err != nil {
			return nil, err
		}
		if !mutate(s) {
			return s, nil
		}
		w := AttachmentWrite{SessionKey: sessionKey, ExpectVersion: s.Version, CurrentID: s.CurrentID}
		for _, r := range s.Records {
			if s.dirty[r.ID] {
				w.Records = append(w.Records, r)
			}
		}
		err = b.store.SaveAttachments(ctx, w)
		if errors.Is(err, ErrVersionConflict) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("save attachments: %w", err)
		}
		return s, nil
	}
	return nil, fmt.Errorf("save attachments: %w (gave up after %d attempts)", ErrVersionConflict, maxConflictRetries)
}

// Current returns a copy of the current attachment of sessionKey, or nil
// when none is current. It is one keyed load.
func (b *Book) Current(ctx context.Context, sessionKey string) (*Attachment, error) {
	s, err := b.load(ctx, sessionKey)
	if err != nil {
		return nil, err
	}
	if c := s.current(); c != nil {
		a := c.Clone()
		return &a, nil
	}
	return nil, nil
}

// Lineage returns every record of sessionKey (current, superseded and
// detached) in creation order; empty when the key never attached.
func (b *Book) Lineage(ctx context.Context, sessionKey string) ([]Attachment, error) {
	s, err := b.load(ctx, sessionKey)
	if err != nil {
		return nil, err
	}
	return s.Records, nil
}

// RefOf returns the neutral view of a handed to runtime callbacks. Its
// LastKnownState is a's status unless a is superseded or detached.
func RefOf(a *Attachment) Ref {
	ref := Ref{
		Runtime:           a.Runtime,
		Provider:          a.Provider,
		SessionID:         a.Handle,
		ProviderSessionID: a.ProviderSessionID,
		Host:              a.Host,
		RemoteURL:         a.RemoteURL,
		Metadata:          maps.Clone(a.Metadata),
	}
	if st, ok := a.Status.State(); ok {
		ref.LastKnownState = st
	}
	return ref
}

// redelegationReset clears what a previous turn's delegation left on a
// record, so it cannot answer the new turn.
func redelegationReset(a *Attachment) {
	a.LastResult = nil
	a.Termination = nil
	a.LatestResponse = ""
	a.Alive = nil
	a.Error = nil
	if st, ok := a.Status.State(); ok && st.IsTerminal() {
		a.Status = AttachmentStatus(StateStarting)
	}
}

// Apply applies the transition d, stated by the parent turn turnID (the job
// id), to sessionKey's attachments and returns the current record after it
// (nil when none). A nil d changes nothing. Apply persists before it
// returns; the runtime calls some transitions imply (a continue prompt, a
// passive inspect, a detach with StopRuntime) are fired in the background
// and never delay or fail Apply.
//
//   - attach naming the current record's runtime and handle folds into a
//     refresh: no new lineage; a different turnID resets what the previous
//     delegation left; stated fields are copied, metadata merged, a stated
//     status written with a new token.
//   - any other attach, and every replace, mints a new current record; the
//     previous one becomes superseded and is chained by ReplacesAttachmentID.
//   - detach marks the current record detached (local only unless
//     StopRuntime) and leaves no current record.
//   - continue re-delegates the current record to turnID (resetting when the
//     turn changed), writes a stated status, and sends a prompt if any.
//   - inspect writes a stated status, or asks the runtime when one is
//     registered.
func (b *Book) Apply(ctx context.Context, sessionKey, turnID string, d *Directive) (*Attachment, error) {
	if d == nil {
		return b.Current(ctx, sessionKey)
	}
	var fire []func(context.Context)
	var refused error
	s, err := b.update(ctx, sessionKey, func(s *session) bool {
		fire, refused = nil, nil
		now := b.now().UnixMilli()
		cur := s.current()
		switch d.Op {
		case DirectiveAttach, DirectiveReplace:
			if d.Op == DirectiveAttach && cur != nil && cur.Runtime == d.Runtime && cur.Handle == d.Handle {
				// Refreshes merge metadata, so repeated attaches could grow
				// it like a runtime's replies could.
				if len(d.Metadata) > 0 {
					if p := metadataProblem(mergeMetadata(cur.Metadata, d.Metadata)); p != "" {
						refused = fmt.Errorf("%w: %s; nothing was applied and the stored metadata is kept", ErrMalformedHandoff, p)
						return false
					}
				}
				b.refresh(cur, turnID, d, now)
				s.touch(cur.ID)
				return true
			}
			rec := Attachment{
				ID:                b.newID(),
				Runtime:           d.Runtime,
				Provider:          d.Provider,
				Handle:            d.Handle,
				ProviderSessionID: d.ProviderSessionID,
				Host:              d.Host,
				Worktree:          d.Worktree,
				RemoteURL:         d.RemoteURL,
				Metadata:          maps.Clone(d.Metadata),
				AttachedAt:        now,
				Status:            d.Status,
				DelegatedTurnID:   turnID,
			}
			if rec.Status == "" {
				rec.Status = AttachmentStatus(StateStarting)
			}
			if cur != nil {
				rec.ReplacesAttachmentID = cur.ID
				cur.Status = AttachmentSuperseded
				cur.Reason = firstNonEmpty(d.Reason, "superseded by a new attachment")
				s.touch(cur.ID)
			}
			s.Records = append(s.Records, rec)
			s.CurrentID = rec.ID
			s.touch(rec.ID)
			return true
		case DirectiveDetach:
			if cur == nil {
				return false
			}
			if d.StopRuntime {
				ref, reason := RefOf(cur), d.Reason
				fire = append(fire, func(ctx context.Context) {
					st := b.reg.Dispatch(ctx, ref, Request{Op: OpDetach, Reason: reason}, b.callOpts())
					b.logStatus("detach in runtime", sessionKey, st)
				})
			}
			cur.Status = AttachmentDetached
			cur.Reason = d.Reason
			s.CurrentID = ""
			s.touch(cur.ID)
			return true
		case DirectiveContinue:
			if cur == nil {
				return false
			}
			if d.Prompt != "" {
				prompt := d.Prompt
				fire = append(fire, func(ctx context.Context) {
					if _, err := b.Observe(ctx, sessionKey, Request{Op: OpContinue, Prompt: prompt}); err != nil {
						b.log.Warn("agent-session continue", "session_key", sessionKey, "err", err)
					}
				})
			}
			changed := turnID != cur.DelegatedTurnID
			if d.Status == "" && !changed {
				return false
			}
			if changed {
				redelegationReset(cur)
			}
			if d.Status != "" {
				cur.Status = d.Status
				cur.ObservationToken = b.NextToken()
			}
			cur.DelegatedTurnID = turnID
			cur.LastObservedAt = now
			s.touch(cur.ID)
			return true
		case DirectiveInspect:
			if cur == nil {
				return false
			}
			if d.Status == "" {
				if b.reg.Has(cur.Runtime) {
					fire = append(fire, func(ctx context.Context) {
						if _, err := b.Observe(ctx, sessionKey, Request{Op: OpInspect}); err != nil {
							b.log.Warn("agent-session inspect", "session_key", sessionKey, "err", err)
						}
					})
				}
				return false
			}
			cur.Status = d.Status
			cur.ObservationToken = b.NextToken()
			cur.LastObservedAt = now
			s.touch(cur.ID)
			return true
		}
		return false
	})
	if err == nil {
		err = refused
	}
	if err != nil {
		return nil, fmt.Errorf("apply %s: %w", d.Op, err)
	}
	for _, f := range fire {
		b.background(f)
	}
	if c := s.current(); c != nil {
		a := c.Clone()
		return &a, nil
	}
	return nil, nil
}

func (b *Book) refresh(cur *Attachment, turnID string, d *Directive, now int64) {
	if turnID != cur.DelegatedTurnID {
		redelegationReset(cur)
	}
	cur.DelegatedTurnID = turnID
	cur.LastObservedAt = now
	for _, f := range []struct {
		dst *string
		v   string
	}{
		{&cur.Provider, d.Provider}, {&cur.ProviderSessionID, d.ProviderSessionID}, {&cur.Host, d.Host},
		{&cur.Worktree, d.Worktree}, {&cur.RemoteURL, d.RemoteURL},
	} {
		if f.v != "" {
			*f.dst = f.v
		}
	}
	if len(d.Metadata) > 0 {
		if cur.Metadata == nil {
			cur.Metadata = map[string]string{}
		}
		maps.Copy(cur.Metadata, d.Metadata)
	}
	if d.Status != "" {
		cur.Status = d.Status
		cur.ObservationToken = b.NextToken()
	}
}

func (b *Book) callOpts() CallOptions { return CallOptions{Timeout: b.timeout, Now: b.now()} }

func (b *Book) logStatus(what, sessionKey string, st Status) {
	if st.Error != nil {
		b.log.Warn("agent-session "+what, "session_key", sessionKey, "runtime", st.Runtime,
			"code", st.Error.Code, "err", st.Error.Message)
		return
	}
	b.log.Info("agent-session "+what, "session_key", sessionKey, "runtime", st.Runtime, "state", st.State)
}

// background runs f on a goroutine owned by the book, unless it is closed.
func (b *Book) background(f func(context.Context)) {
	b.bgMu.Lock()
	defer b.bgMu.Unlock()
	if b.bgClosed {
		return
	}
	b.bgWG.Go(func() { f(b.bgCtx) })
}

// Guard captures what an observation write-back is conditional on: the
// record it read, the turn it was delegated to at the time, and the token
// taken before the call.
type Guard struct {
	AttachmentID    string
	DelegatedTurnID string
	Token           int64
}

// Begin captures the guard for a read of sessionKey's current record and
// returns it with the record's ref; ok is false when nothing is current.
// It takes a new token.
func (b *Book) Begin(ctx context.Context, sessionKey string) (g Guard, ref Ref, ok bool, err error) {
	cur, err := b.Current(ctx, sessionKey)
	if err != nil || cur == nil {
		return Guard{}, Ref{}, false, err
	}
	return Guard{AttachmentID: cur.ID, DelegatedTurnID: cur.DelegatedTurnID, Token: b.NextToken()}, RefOf(cur), true, nil
}

// Observe sends req to the current record of sessionKey through the
// registry and writes the result back (see [Book.WriteBack]). It returns the
// status, also when the write was refused, or nil when nothing is attached.
// It dispatches even when no runtime is registered, so that an
// unknown_runtime error lands on the record. The error is a store failure
// only.
func (b *Book) Observe(ctx context.Context, sessionKey string, req Request) (*Status, error) {
	g, ref, ok, err := b.Begin(ctx, sessionKey)
	if err != nil || !ok {
		return nil, err
	}
	st := b.reg.Dispatch(ctx, ref, req, b.callOpts())
	if _, err := b.WriteBack(ctx, sessionKey, g, st); err != nil {
		return &st, err
	}
	return &st, nil
}

// WriteBack folds the status st, read under guard g, into sessionKey's
// current record. It is the only path by which observed state reaches a
// record, and it is refused (false, nil) when:
//
//   - g.AttachmentID is no longer the current record (detached or replaced
//     meanwhile);
//   - the record's DelegatedTurnID is no longer g.DelegatedTurnID;
//   - g.Token is not strictly greater than the record's ObservationToken (a
//     newer read already landed).
//
// A status carrying an Error writes only the error, the token and
// LastObservedAt: a failed read is not a failed session. Otherwise the
// reported state (unless unavailable or unknown) becomes the status — a bare
// alive:true may only promote starting to running — and the fields present
// on st are written, with text capped at [ResultTextMax] and a final answer
// recorded as LastResult. Metadata over [MetadataMaxKeys] or
// [MetadataMaxBytes] that differs from the stored metadata is never stored:
// such a status (which [Registry.Dispatch] never returns) writes only an
// error saying so. The error is a store failure only.
func (b *Book) WriteBack(ctx context.Context, sessionKey string, g Guard, st Status) (bool, error) {
	accepted := false
	_, err := b.update(ctx, sessionKey, func(s *session) bool {
		accepted = false
		cur := s.current()
		if cur == nil || cur.ID != g.AttachmentID || cur.DelegatedTurnID != g.DelegatedTurnID ||
			g.Token <= cur.ObservationToken {
			return false
		}
		now := b.now().UnixMilli()
		cur.ObservationToken = g.Token
		cur.LastObservedAt = now
		stErr := st.Error
		if stErr == nil {
			// Metadata stored before it was bounded may be echoed back
			// unchanged; only growth past the bounds is refused.
			if p := metadataProblem(st.Metadata); p != "" && !maps.Equal(st.Metadata, cur.Metadata) {
				stErr = &Error{Code: CodeRuntimeError, Message: fmt.Sprintf("%v: runtime %s: %s; the stored metadata is kept", ErrInvalidReply, st.Runtime, p)}
			}
		}
		if stErr != nil {
			cur.Error = &Error{Code: stErr.Code, Message: CapText(stErr.Message)}
		} else {
			cur.Error = nil
			reported := st.State
			if reported == StateUnavailable || reported == StateUnknown {
				reported = ""
			}
			if _, ok := ParseState(string(reported)); ok {
				cur.Status = AttachmentStatus(reported)
			} else if st.Alive != nil && *st.Alive && cur.Status == AttachmentStatus(StateStarting) {
				cur.Status = AttachmentStatus(StateRunning)
			}
			for _, f := range []struct {
				dst *string
				v   string
			}{
				{&cur.Provider, st.Provider}, {&cur.ProviderSessionID, st.ProviderSessionID},
				{&cur.Host, st.Host}, {&cur.RemoteURL, st.RemoteURL},
			} {
				if f.v != "" {
					*f.dst = f.v
				}
			}
			if st.Metadata != nil {
				cur.Metadata = maps.Clone(st.Metadata)
			}
			if st.Alive != nil {
				cur.Alive = Bool(*st.Alive)
			}
			if st.StartedAt != 0 {
				cur.StartedAt = st.StartedAt
			}
			if st.LastEventAt != 0 {
				cur.LastEventAt = st.LastEventAt
			}
			if st.Termination != nil {
				t := *st.Termination
				cur.Termination = &t
			}
			if st.LatestResponse != "" {
				cur.LatestResponse = CapText(st.LatestResponse)
			}
			if st.FinalResponse != "" {
				at := st.LastEventAt
				if at == 0 && st.Termination != nil {
					at = st.Termination.At
				}
				if at == 0 {
					at = now
				}
				cur.LastResult = &Result{Summary: CapText(st.FinalResponse), OutputRef: outputRef(cur), ObservedAt: at}
			}
		}
		s.touch(cur.ID)
		accepted = true
		return true
	})
	if err != nil {
		return false, fmt.Errorf("write back observation: %w", err)
	}
	return accepted, nil
}

func outputRef(a *Attachment) string {
	if a.Worktree != "" {
		return a.Handle + ":" + a.Worktree
	}
	return a.Handle
}

// newUUID returns a random RFC 4122 version-4 UUID string.
func newUUID() string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}
