package agentsession

import (
	"context"
	"strings"
)

// Result sources and terminal reasons the task service stamps on a job whose
// outcome came through this seam.
const (
	// ResultSourceParent marks a result from the OpenClaw agent itself.
	ResultSourceParent = "parent"
	// ResultSourceAgentSession marks a result recovered from an attached
	// session rather than from the OpenClaw agent.
	ResultSourceAgentSession = "agent-session"
	// TerminalReasonRecovery is the terminal reason of a job completed by
	// [Book.Recover] ("<resultSource>-recovery").
	TerminalReasonRecovery = ResultSourceAgentSession + "-recovery"
	// DelegateBlockedPrefix starts the terminal reason of a job whose turn
	// produced nothing because its delegated session waits for a human.
	DelegateBlockedPrefix = "delegate-blocked"
)

// DelegateBlockedReason returns "delegate-blocked:<state>".
func DelegateBlockedReason(s State) string { return DelegateBlockedPrefix + ":" + string(s) }

// IsDelegateBlockedReason reports whether reason starts with
// "delegate-blocked".
func IsDelegateBlockedReason(reason string) bool {
	return strings.HasPrefix(reason, DelegateBlockedPrefix)
}

// Recovery is an answer taken from the attached session for a job whose
// parent turn produced none (tier 3).
type Recovery struct {
	Summary      string // the session's final response
	AttachmentID string
	ResultSource string // always ResultSourceAgentSession
}

// Recover is tier-3 recovery: after the parent's live stream and transcript
// both gave up on job jobID (started at jobStartedAt, epoch ms), ask the
// session attached to sessionKey for the turn's answer. It returns nil
// (and no error) unless every check passes:
//
//  1. a record is current and was delegated by jobID (an attachment left
//     over from an earlier turn never answers a later one);
//  2. its status is not needs_input, needs_permission or failed;
//  3. an inspect, dispatched with a fresh token, reports a completed turn
//     with a final response (an error is written to the record; another
//     state is folded into it, so a needs_input found this way is visible);
//  4. the answer is datable (lastEventAt, else termination.at) and not
//     older than jobStartedAt (otherwise the observation is still recorded,
//     dated by the time it was made, and a warning says why it was not
//     taken);
//  5. the compare-and-set write of the result succeeds.
//
// When no runtime is registered for the record, the read records
// unknown_runtime on it and keeps its status. The error is a store failure
// only; a delegation never fails a task.
func (b *Book) Recover(ctx context.Context, sessionKey, jobID string, jobStartedAt int64) (*Recovery, error) {
	cur, err := b.Current(ctx, sessionKey)
	if err != nil || cur == nil || cur.DelegatedTurnID != jobID {
		return nil, err
	}
	switch cur.Status {
	case AttachmentStatus(StateNeedsInput), AttachmentStatus(StateNeedsPermission), AttachmentStatus(StateFailed):
		return nil, nil
	}
	g := Guard{AttachmentID: cur.ID, DelegatedTurnID: cur.DelegatedTurnID, Token: b.NextToken()}
	st := b.reg.Dispatch(ctx, RefOf(cur), Request{Op: OpInspect}, b.callOpts())
	if st.Error != nil || !st.State.IsCompletedTurn() || st.FinalResponse == "" {
		_, err := b.WriteBack(ctx, sessionKey, g, st)
		return nil, err
	}
	resultAt := st.LastEventAt
	if resultAt == 0 && st.Termination != nil {
		resultAt = st.Termination.At
	}
	if resultAt == 0 || resultAt < jobStartedAt {
		// Not this turn's answer, or not provably: record what the session
		// reports (its final response dated by the observation time) and
		// say why it does not answer the job, instead of dropping it.
		why := "it carries neither lastEventAt nor termination.at, so it cannot be told apart from an earlier turn's answer; the runtime should report lastEventAt"
		if resultAt != 0 {
			why = "it is dated before the job started, so it belongs to an earlier turn"
		}
		b.log.Warn("Ignored the attached agent session's final response for tier-3 recovery: "+why,
			"session_key", sessionKey, "job_id", jobID, "attachment_id", cur.ID, "runtime", cur.Runtime)
		_, err := b.WriteBack(ctx, sessionKey, g, st)
		return nil, err
	}
	ok, err := b.WriteBack(ctx, sessionKey, g, st)
	if err != nil || !ok {
		return nil, err
	}
	b.log.Info("Recovered the final response from the attached agent session ("+short(cur.ID)+
		") after the parent transcript produced nothing", "session_key", sessionKey, "job_id", jobID)
	return &Recovery{Summary: st.FinalResponse, AttachmentID: cur.ID, ResultSource: ResultSourceAgentSession}, nil
}

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// BlockedDelegation describes a job whose delegated session waits for a
// human: the job cannot progress until someone answers that session.
type BlockedDelegation struct {
	Runtime   string `json:"runtime"`
	Handle    string `json:"handle"`
	State     State  `json:"state"` // needs_input or needs_permission
	RemoteURL string `json:"remoteUrl,omitempty"`
	Active    bool   `json:"active"` // the job is still running
	Notice    string `json:"notice"`
}

// BlockedDelegationFor reports whether the attachment a (normally the
// current one) blocks job jobID: it was delegated by jobID and its status is
// needs_input or needs_permission. jobRunning selects the notice's form.
func BlockedDelegationFor(jobID string, jobRunning bool, a *Attachment) (BlockedDelegation, bool) {
	if a == nil || a.DelegatedTurnID != jobID {
		return BlockedDelegation{}, false
	}
	st, ok := a.Status.State()
	if !ok || !st.IsBlocked() {
		return BlockedDelegation{}, false
	}
	return BlockedDelegation{
		Runtime:   a.Runtime,
		Handle:    a.Handle,
		State:     st,
		RemoteURL: a.RemoteURL,
		Active:    jobRunning,
		Notice:    blockedNotice(a, st, jobRunning),
	}, true
}

// blockedNotice renders the exact notice text of a blocked delegation.
func blockedNotice(a *Attachment, st State, active bool) string {
	word := "input"
	if st == StateNeedsPermission {
		word = "permission"
	}
	var sb strings.Builder
	if active {
		sb.WriteString("This task is not progressing: the delegated session ")
	} else {
		sb.WriteString("This turn produced no result of its own: the delegated session ")
	}
	sb.WriteString(a.Runtime + "/" + a.Handle + " is waiting for " + word + ".")
	if a.LatestResponse != "" {
		sb.WriteString(" It last said: " + a.LatestResponse)
	}
	if a.RemoteURL != "" {
		sb.WriteString(" Open it at " + a.RemoteURL + ".")
	}
	if active {
		sb.WriteString(" Polling cannot advance it — answer it through that session, then keep polling.")
	} else {
		sb.WriteString(" Answer it through that session — the task is not finished.")
	}
	return sb.String()
}
