package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// HistoryRequest reads a session transcript with chat.history.
type HistoryRequest struct {
	SessionKey string // required
	Limit      int    // 0 = gateway default
	// MaxChars bounds each message's text; 0 means 200000 (the gateway
	// otherwise truncates each message to 8k characters).
	MaxChars int
}

// History is a transcript read.
type History struct {
	SessionKey string
	SessionID  string
	Messages   []HistoryMessage
	Session    SessionInfo
	HasMore    bool
}

// HistoryMessage is one transcript row.
type HistoryMessage struct {
	Role  string
	Text  string // visible text (text blocks joined, or string content)
	RunID string // __openclaw.runId, on assistant rows
	Seq   int64  // __openclaw.seq
	ID    string // __openclaw.id
	// IdempotencyKey is set on user rows: "<runId>:user".
	IdempotencyKey string
	Timestamp      int64 // ms since epoch
	Raw            json.RawMessage
}

// SessionInfo is the liveness part of a history read.
type SessionInfo struct {
	Status       string
	HasActiveRun bool
	ActiveRunIDs []string
	LastRunID    string
}

// RunText returns the text of the newest assistant row produced by runID,
// or "".
func (h *History) RunText(runID string) string {
	for i := len(h.Messages) - 1; i >= 0; i-- {
		m := h.Messages[i]
		if m.Role == "assistant" && m.RunID == runID && m.Text != "" {
			return m.Text
		}
	}
	return ""
}

// RecoveryPrefix starts the user rows the gateway itself adds to a
// transcript, such as the note of OpenClaw's restart recovery ("[System]
// Your previous turn was interrupted by a gateway restart …") before it
// re-runs an interrupted turn. AnswerAfter looks past them.
const RecoveryPrefix = "[System] "

// AnswerAfter finds the user row of a run — by its idempotency key
// ("<runID>:user"), else the newest user row whose text is message — and
// returns the visible text of the assistant rows that follow it up to the
// next user row not written by the gateway itself (see RecoveryPrefix); the
// newest non-empty one wins. found reports whether such a
// user row is in h at all. It finds answers that the gateway produced under
// another run id, as after a restart.
func (h *History) AnswerAfter(runID, message string) (text string, found bool) {
	idx := -1
	for i, m := range h.Messages {
		if m.Role == "user" && m.IdempotencyKey == runID+":user" {
			idx = i
		}
	}
	if idx < 0 && message != "" {
		want := strings.TrimSpace(message)
		for i, m := range h.Messages {
			if m.Role == "user" && (strings.TrimSpace(m.Text) == want || strings.HasSuffix(strings.TrimSpace(m.Text), want)) {
				idx = i
			}
		}
	}
	if idx < 0 {
		return "", false
	}
	for _, n := range h.Messages[idx+1:] {
		if n.Role == "user" && !strings.HasPrefix(n.Text, RecoveryPrefix) {
			break
		}
		if n.Role == "assistant" && n.Text != "" {
			text = n.Text
		}
	}
	return text, true
}

// TrailingAssistantText returns the text of the trailing assistant rows
// (newest first, skipping rows without visible text) up to the first
// non-assistant row: the newest visible answer in the session.
func (h *History) TrailingAssistantText() string {
	for i := len(h.Messages) - 1; i >= 0; i-- {
		m := h.Messages[i]
		if m.Role != "assistant" {
			return ""
		}
		if m.Text != "" {
			return m.Text
		}
	}
	return ""
}

type historyWire struct {
	SessionKey  string            `json:"sessionKey"`
	SessionID   string            `json:"sessionId"`
	Messages    []json.RawMessage `json:"messages"`
	HasMore     bool              `json:"hasMore"`
	SessionInfo sessionInfoWire   `json:"sessionInfo"`
}

type sessionInfoWire struct {
	Status       string   `json:"status"`
	HasActiveRun bool     `json:"hasActiveRun"`
	ActiveRunIDs []string `json:"activeRunIds"`
	LastRunID    string   `json:"lastRunId"`
}

func (w sessionInfoWire) info() SessionInfo {
	return SessionInfo(w)
}

// History reads a session's transcript with chat.history.
func (c *Client) History(ctx context.Context, req HistoryRequest) (*History, error) {
	if req.SessionKey == "" {
		return nil, fmt.Errorf("history: %w: sessionKey is required", ErrInvalidRunRequest)
	}
	p := map[string]any{"sessionKey": c.CanonicalSessionKey(req.SessionKey)}
	if req.Limit > 0 {
		p["limit"] = req.Limit
	}
	if req.MaxChars <= 0 {
		req.MaxChars = 200000
	}
	p["maxChars"] = req.MaxChars
	raw, err := c.Call(ctx, "chat.history", p)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return parseHistory(raw)
}

func parseHistory(raw json.RawMessage) (*History, error) {
	var w historyWire
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, fmt.Errorf("history: decode: %w", err)
	}
	h := &History{SessionKey: w.SessionKey, SessionID: w.SessionID, HasMore: w.HasMore, Session: w.SessionInfo.info()}
	for _, m := range w.Messages {
		var row struct {
			Role      string `json:"role"`
			Timestamp int64  `json:"timestamp"`
			IdemKey   string `json:"idempotencyKey"`
			Meta      struct {
				RunID string `json:"runId"`
				ID    string `json:"id"`
				Seq   int64  `json:"seq"`
			} `json:"__openclaw"`
		}
		if json.Unmarshal(m, &row) != nil {
			continue
		}
		h.Messages = append(h.Messages, HistoryMessage{Role: row.Role, Text: contentText(m), RunID: row.Meta.RunID,
			Seq: row.Meta.Seq, ID: row.Meta.ID, Timestamp: row.Timestamp, IdempotencyKey: row.IdemKey, Raw: m})
	}
	return h, nil
}

// WaitResult is the answer of agent.wait.
type WaitResult struct {
	RunID      string
	Status     string // ok | error | timeout | pending
	Error      string // for status error; "aborted" after an abort
	StopReason string
	ReplyText  string // terminalReply.text
	EndedAt    int64
}

func parseWait(raw json.RawMessage) (WaitResult, error) {
	var w struct {
		RunID         string `json:"runId"`
		Status        string `json:"status"`
		Error         string `json:"error"`
		StopReason    string `json:"stopReason"`
		EndedAt       int64  `json:"endedAt"`
		TerminalReply *struct {
			Text string `json:"text"`
		} `json:"terminalReply"`
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		return WaitResult{}, fmt.Errorf("agent.wait: decode: %w", err)
	}
	r := WaitResult{RunID: w.RunID, Status: w.Status, Error: w.Error, StopReason: w.StopReason, EndedAt: w.EndedAt}
	if w.TerminalReply != nil {
		r.ReplyText = w.TerminalReply.Text
	}
	return r, nil
}

// WaitRun asks the gateway to wait up to timeout (server side; 0 means
// the gateway default of 30s) for runID to end (agent.wait). Status
// "timeout" means not ended in time or unknown to this gateway process; it
// does not cancel the run.
func (c *Client) WaitRun(ctx context.Context, runID string, timeout time.Duration) (WaitResult, error) {
	p := map[string]any{"runId": runID}
	callTimeout := 40 * time.Second
	if timeout > 0 {
		p["timeoutMs"] = timeout.Milliseconds()
		callTimeout = timeout + 10*time.Second
	}
	raw, err := c.CallWith(ctx, "agent.wait", p, CallOptions{Timeout: callTimeout})
	if err != nil {
		return WaitResult{}, fmt.Errorf("wait run: %w", err)
	}
	return parseWait(raw)
}

// AbortRequest aborts a run or a session's active run.
type AbortRequest struct {
	SessionKey string // session of the run; required unless RunID is set
	RunID      string // the run; empty aborts the session's active run
	// ClearQueued also drops queued follow-up messages of the session.
	ClearQueued bool
	// UseChatAbort uses chat.abort instead of sessions.abort.
	UseChatAbort bool
}

// AbortResult is what the gateway said about an abort.
type AbortResult struct {
	Aborted bool     // the gateway aborted something
	RunIDs  []string // the aborted run ids
	Raw     json.RawMessage
}

// Abort aborts a run (sessions.abort, or chat.abort with UseChatAbort).
// Confirmation arrives as the run's StatusAborted outcome.
func (c *Client) Abort(ctx context.Context, req AbortRequest) (AbortResult, error) {
	var method string
	p := map[string]any{}
	if req.UseChatAbort {
		if req.SessionKey == "" {
			return AbortResult{}, fmt.Errorf("abort: %w: chat.abort needs sessionKey", ErrInvalidRunRequest)
		}
		method = "chat.abort"
		p["sessionKey"] = c.CanonicalSessionKey(req.SessionKey)
	} else {
		if req.SessionKey == "" && req.RunID == "" {
			return AbortResult{}, fmt.Errorf("abort: %w: sessionKey or runId is required", ErrInvalidRunRequest)
		}
		method = "sessions.abort"
		if req.SessionKey != "" {
			p["key"] = c.CanonicalSessionKey(req.SessionKey)
		}
		if req.ClearQueued {
			p["clearQueued"] = true
		}
	}
	if req.RunID != "" {
		p["runId"] = req.RunID
	}
	raw, err := c.Call(ctx, method, p)
	if err != nil {
		return AbortResult{}, fmt.Errorf("abort: %w", err)
	}
	var w struct {
		Aborted      bool     `json:"aborted"`
		RunIDs       []string `json:"runIds"`
		AbortedRunID string   `json:"abortedRunId"`
		Status       string   `json:"status"`
	}
	_ = json.Unmarshal(raw, &w)
	res := AbortResult{Aborted: w.Aborted || w.Status == "aborted", RunIDs: w.RunIDs, Raw: raw}
	if w.AbortedRunID != "" {
		res.RunIDs = append(res.RunIDs, w.AbortedRunID)
	}
	return res, nil
}

// Session is one row of sessions.list / sessions.describe.
type Session struct {
	Key          string          `json:"key"`
	AgentID      string          `json:"agentId"`
	SessionID    string          `json:"sessionId"`
	Kind         string          `json:"kind"`
	Status       string          `json:"status"` // running, done, killed, ...
	DisplayName  string          `json:"displayName"`
	UpdatedAt    int64           `json:"updatedAt"`
	HasActiveRun bool            `json:"hasActiveRun"`
	ActiveRunIDs []string        `json:"activeRunIds"`
	LastRunID    string          `json:"lastRunId"`
	Model        string          `json:"model"`
	Raw          json.RawMessage `json:"-"`
}

// ListSessionsRequest filters sessions.list.
type ListSessionsRequest struct {
	Limit      int    // 0 = gateway default
	Offset     int    //
	AgentID    string // only this agent
	ActiveOnly bool   // only sessions with an active run
	Search     string // text search
}

// SessionList is a page of sessions.
type SessionList struct {
	Sessions   []Session
	TotalCount int
	HasMore    bool
}

// ListSessions lists sessions (sessions.list).
func (c *Client) ListSessions(ctx context.Context, req ListSessionsRequest) (*SessionList, error) {
	p := map[string]any{}
	if req.Limit > 0 {
		p["limit"] = req.Limit
	}
	if req.Offset > 0 {
		p["offset"] = req.Offset
	}
	if req.AgentID != "" {
		p["agentId"] = req.AgentID
	}
	if req.ActiveOnly {
		p["activeOnly"] = true
	}
	if req.Search != "" {
		p["search"] = req.Search
	}
	raw, err := c.Call(ctx, "sessions.list", p)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	var w struct {
		Sessions   []json.RawMessage `json:"sessions"`
		TotalCount int               `json:"totalCount"`
		HasMore    bool              `json:"hasMore"`
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, fmt.Errorf("list sessions: decode: %w", err)
	}
	out := &SessionList{TotalCount: w.TotalCount, HasMore: w.HasMore}
	for _, s := range w.Sessions {
		var row Session
		if json.Unmarshal(s, &row) != nil {
			continue
		}
		row.Raw = s
		out.Sessions = append(out.Sessions, row)
	}
	return out, nil
}

// DescribeSession returns one session (sessions.describe), or nil, nil when
// the gateway does not know the key.
func (c *Client) DescribeSession(ctx context.Context, key string) (*Session, error) {
	raw, err := c.Call(ctx, "sessions.describe", map[string]string{"key": c.CanonicalSessionKey(key)})
	if err != nil {
		return nil, fmt.Errorf("describe session: %w", err)
	}
	var w struct {
		Session json.RawMessage `json:"session"`
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, fmt.Errorf("describe session: decode: %w", err)
	}
	if len(w.Session) == 0 || string(w.Session) == "null" {
		return nil, nil
	}
	var s Session
	if err := json.Unmarshal(w.Session, &s); err != nil {
		return nil, fmt.Errorf("describe session: decode: %w", err)
	}
	s.Raw = w.Session
	return &s, nil
}
