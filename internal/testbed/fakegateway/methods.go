package fakegateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

func (s *Server) canonical(key string) string {
	if key == "" || strings.HasPrefix(key, "agent:") {
		return key
	}
	return "agent:" + s.opts.DefaultAgentID + ":" + key
}

func (s *Server) dispatch(ctx context.Context, c *fconn, f reqFrame) {
	s.mu.Lock()
	h := s.handlers[f.Method]
	s.mu.Unlock()
	if h == nil {
		h = s.builtin(f.Method, c, f.ID)
	}
	if h == nil {
		c.send(resErr(f.ID, &Error{Code: "INVALID_REQUEST", Message: "unknown method: " + f.Method}))
		return
	}
	payload, err := h(ctx, f.Params)
	if errors.Is(err, ErrNoReply) {
		return
	}
	var e *Error
	if errors.As(err, &e) {
		c.send(resErr(f.ID, e))
		return
	}
	if err != nil {
		c.send(resErr(f.ID, &Error{Code: "UNAVAILABLE", Message: err.Error()}))
		return
	}
	c.send(resOK(f.ID, payload))
}

func invalid(method, msg string) error {
	return &Error{Code: "INVALID_REQUEST", Message: "invalid " + method + " params: " + msg}
}

func (s *Server) builtin(method string, c *fconn, reqID string) Handler {
	switch method {
	case "health":
		return func(context.Context, json.RawMessage) (any, error) {
			return map[string]any{"ok": true, "ts": time.Now().UnixMilli()}, nil
		}
	case "agents.list":
		return func(context.Context, json.RawMessage) (any, error) {
			return map[string]any{"defaultId": s.opts.DefaultAgentID, "mainKey": "main",
				"agents": []any{map[string]any{"id": s.opts.DefaultAgentID}}}, nil
		}
	case "agent", "chat.send":
		return func(ctx context.Context, params json.RawMessage) (any, error) {
			return s.submit(c, reqID, method, params)
		}
	case "agent.wait":
		return s.agentWait
	case "chat.abort", "sessions.abort":
		return func(_ context.Context, params json.RawMessage) (any, error) { return s.abort(method, params) }
	case "chat.history":
		return s.history
	case "sessions.list":
		return s.sessionsList
	case "sessions.describe":
		return func(_ context.Context, params json.RawMessage) (any, error) {
			var p struct {
				Key string `json:"key"`
			}
			_ = json.Unmarshal(params, &p)
			return map[string]any{"session": s.sessionRow(s.canonical(p.Key))}, nil
		}
	case "sessions.messages.subscribe", "sessions.messages.unsubscribe":
		if s.opts.Unscoped {
			return nil
		}
		return func(_ context.Context, params json.RawMessage) (any, error) {
			var p struct {
				Key string `json:"key"`
			}
			if err := json.Unmarshal(params, &p); err != nil || strings.TrimSpace(p.Key) == "" {
				return nil, invalid(method, "must have required property 'key'")
			}
			key, on := s.canonical(p.Key), method == "sessions.messages.subscribe"
			s.mu.Lock()
			if on {
				c.subs[key] = true
			} else {
				delete(c.subs, key)
			}
			s.mu.Unlock()
			return map[string]any{"subscribed": on, "key": key}, nil
		}
	}
	return nil
}

// submit implements agent and chat.send. For agent it answers twice: the
// "accepted" answer here and the final answer when the run ends.
func (s *Server) submit(c *fconn, reqID, method string, params json.RawMessage) (any, error) {
	var p struct {
		Message        *string `json:"message"`
		SessionKey     string  `json:"sessionKey"`
		IdempotencyKey string  `json:"idempotencyKey"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, invalid(method, err.Error())
	}
	if p.Message == nil {
		return nil, invalid(method, "must have required property 'message'")
	}
	if p.IdempotencyKey == "" {
		return nil, invalid(method, "must have required property 'idempotencyKey'")
	}
	if p.SessionKey == "" {
		if method == "chat.send" {
			return nil, invalid(method, "must have required property 'sessionKey'")
		}
		p.SessionKey = "main"
	}
	key := s.canonical(p.SessionKey)
	s.mu.Lock()
	if r := s.runs[p.IdempotencyKey]; r != nil {
		s.mu.Unlock()
		select {
		case <-r.done:
			if method == "agent" {
				return r.agentFinal(), nil
			}
			return map[string]any{"runId": r.id, "status": "ok"}, nil
		default:
			return map[string]any{"runId": r.id, "status": "in_flight"}, nil
		}
	}
	s.mu.Unlock()
	return s.startRun(c, reqID, method, key, *p.Message, p.IdempotencyKey, *p.Message)
}

// startRun creates and starts a run. c and reqID identify the submitting
// request (nil for a recovery run); userRow is the text of the user row
// written to the transcript.
func (s *Server) startRun(c *fconn, reqID, method, key, message, id, userRow string) (any, error) {
	s.mu.Lock()
	script := s.script
	if script == nil {
		script = Echo
	}
	sub := Submit{Method: method, SessionKey: key, Message: message, IdempotencyKey: id}
	s.mu.Unlock()
	turn := script(sub) // outside the lock: scripts may call the Server
	s.mu.Lock()
	if s.closed || s.ctx.Err() != nil {
		s.mu.Unlock()
		return nil, &Error{Code: "UNAVAILABLE", Message: "gateway shutting down"}
	}
	rctx, cancel := context.WithCancel(s.ctx)
	r := &frun{id: id, session: key, message: message, method: method, turn: turn,
		cancel: cancel, done: make(chan struct{}), release: make(chan struct{}), startedAt: time.Now().UnixMilli()}
	prev := s.lanes[key]
	busy := prev != nil && !isDone(prev)
	s.runs[r.id] = r
	sendRow := s.appendTranscript(key, map[string]any{"role": "user", "content": userRow, "timestamp": r.startedAt,
		"idempotencyKey": r.id + ":user"})
	if busy && method == "chat.send" {
		// Steer: fold into the active run; this run id ends at once, empty.
		r.status = "ok"
		close(r.done)
		close(s.startedCh(r.id))
		s.mu.Unlock()
		sendRow()
		cancel()
		s.broadcastEvent("chat", key, map[string]any{"runId": r.id, "sessionKey": key, "seq": 1, "state": "final"}, false)
		return map[string]any{"runId": r.id, "status": "started"}, nil
	}
	if busy {
		r.prev = prev
	}
	s.lanes[key] = r
	s.wg.Add(1) // under mu with closed false: see Server.closed
	s.mu.Unlock()
	sendRow()
	ack := map[string]any{"runId": r.id, "status": "started"}
	if method == "agent" {
		ack = map[string]any{"runId": r.id, "sessionKey": key, "agentId": s.opts.DefaultAgentID,
			"status": "accepted", "acceptedAt": r.startedAt}
	}
	if c != nil {
		c.send(resOK(reqID, ack))
	}
	go func() {
		defer s.wg.Done()
		defer cancel()
		s.execute(rctx, r)
		if method == "agent" && c != nil {
			final := r.agentFinal()
			if r.status == "error" && !r.aborted {
				c.send(map[string]any{"type": "res", "id": reqID, "ok": false, "payload": final,
					"error": map[string]any{"code": "UNAVAILABLE", "message": r.errMsg}})
			} else if r.status != "" {
				c.send(resOK(reqID, final))
			}
		}
	}()
	return nil, ErrNoReply
}

func isDone(r *frun) bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

func (r *frun) agentFinal() map[string]any {
	status := r.status
	if r.aborted {
		status = "timeout"
	}
	return map[string]any{"runId": r.id, "status": status, "summary": "completed", "error": r.errMsg,
		"result": map[string]any{"payloads": []any{map[string]any{"text": r.finalText(), "mediaUrl": nil}},
			"meta": map[string]any{"aborted": r.aborted}}}
}

func (r *frun) finalText() string {
	if r.turn.EmptyFinal || r.status != "ok" {
		return ""
	}
	return r.text
}

// appendTranscript adds row to key's transcript. s.mu held. Call the
// returned func after unlocking: it sends the row as a session.message
// event to the connections subscribed to key, as the real gateway does.
func (s *Server) appendTranscript(key string, row map[string]any) (send func()) {
	seq := len(s.transcripts[key]) + 1
	meta, _ := row["__openclaw"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	id := fmt.Sprintf("msg-%d", s.seq.Add(1))
	meta["seq"] = seq
	meta["id"] = id
	row["__openclaw"] = meta
	b, _ := json.Marshal(row)
	s.transcripts[key] = append(s.transcripts[key], b)
	to := s.subscribers(key)
	if len(to) == 0 {
		return func() {}
	}
	ev, _ := json.Marshal(s.event("session.message", map[string]any{"sessionKey": key, "agentId": s.opts.DefaultAgentID,
		"message": json.RawMessage(b), "messageId": id, "messageSeq": seq}))
	return func() {
		for _, c := range to {
			c.sendRaw(ev)
		}
	}
}

// execute plays one run's events. It returns when the run ended (r.done
// closed) or when ctx ended (Restart/Close: the run dies silently).
func (s *Server) execute(ctx context.Context, r *frun) {
	t := r.turn
	dup := t.Duplicate
	seq := int64(0)
	next := func() int64 { seq++; return seq }
	emit := func(name string, payload map[string]any) {
		if t.Malformed {
			s.Broadcast([]byte(`{"type":"event","event":"chat","payload":{"runId":`))
			s.Broadcast([]byte(`not json at all`))
			s.Broadcast([]byte(`{"type":"event","event":"chat","payload":{"runId":42,"state":["x"]}}`))
			s.Broadcast([]byte(`{"type":"res","ok":"yes"}`))
			s.Broadcast([]byte(`[1,2,3]`))
		}
		s.broadcastEvent(name, r.session, payload, dup)
	}
	if r.prev != nil { // queued behind the session's active run
		select {
		case <-r.prev.done:
		case <-ctx.Done():
			return
		}
	}
	base := func(extra map[string]any) map[string]any {
		m := map[string]any{"runId": r.id, "sessionKey": r.session, "seq": next()}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	emit("chat", base(map[string]any{"state": "status", "phase": "preparing_context"}))
	emit("agent", base(map[string]any{"stream": "lifecycle", "ts": time.Now().UnixMilli(),
		"data": map[string]any{"phase": "start", "startedAt": r.startedAt}}))
	s.mu.Lock()
	close(s.startedCh(r.id))
	s.mu.Unlock()

	reply := t.Reply
	chunks := max(t.Chunks, 1)
	runes := []rune(reply)
	text := ""
	for i := 1; i <= chunks && len(runes) > 0 && !t.NoStream; i++ {
		text = string(runes[:len(runes)*i/chunks])
		n := next()
		emit("agent", map[string]any{"runId": r.id, "sessionKey": r.session, "seq": n, "stream": "assistant",
			"data": map[string]any{"text": text, "delta": text}})
		emit("chat", map[string]any{"runId": r.id, "sessionKey": r.session, "seq": n, "state": "delta",
			"deltaText": text, "message": assistantMsg(text)})
		if i == 1 && t.DisconnectMidRun {
			s.DisconnectAll()
		}
	}
	if t.MessageTool != "" {
		emit("agent", base(map[string]any{"stream": "tool", "data": map[string]any{"phase": "start", "name": "message",
			"toolCallId": "call-1", "args": map[string]any{"message": t.MessageTool}}}))
		emit("agent", base(map[string]any{"stream": "tool", "data": map[string]any{"phase": "result", "name": "message",
			"toolCallId": "call-1", "isError": false}}))
	}
	aborted := false
	var wait <-chan time.Time
	if t.Delay > 0 {
		tm := time.NewTimer(t.Delay)
		defer tm.Stop()
		wait = tm.C
	}
	if t.Hold || wait != nil {
		select {
		case <-ctx.Done():
			if !r.wasAborted() {
				return // Restart or Close: the run dies silently
			}
			aborted = true
		case <-r.release:
		case <-wait:
		}
	}
	if r.wasAborted() {
		aborted = true
	}
	final := ""
	if !t.EmptyFinal {
		final = reply
	}
	s.mu.Lock()
	switch {
	case aborted:
		r.status, r.aborted, r.errMsg, r.text = "error", true, "aborted", text
	case t.Error != "":
		r.status, r.errMsg = "error", t.Error
	default:
		r.status, r.text = "ok", reply
	}
	sendRow := func() {}
	if !aborted && t.Error == "" && !t.NoTranscript && reply != "" {
		sendRow = s.appendTranscript(r.session, map[string]any{"role": "assistant",
			"content": []any{map[string]any{"type": "text", "text": reply}}, "stopReason": "stop",
			"timestamp": time.Now().UnixMilli(), "__openclaw": map[string]any{"runId": r.id}})
	}
	s.mu.Unlock()
	sendRow()
	// Terminal events go out before the run counts as done, as on the real
	// gateway: agent.wait and the agent final answer follow them.
	defer func() {
		s.mu.Lock()
		close(r.done)
		s.mu.Unlock()
	}()
	if t.DropFinal {
		return
	}
	n := next()
	switch {
	case aborted:
		emit("agent", map[string]any{"runId": r.id, "sessionKey": r.session, "seq": n, "stream": "lifecycle",
			"data": map[string]any{"phase": "end", "aborted": true, "stopReason": "rpc"}})
		emit("chat", map[string]any{"runId": r.id, "sessionKey": r.session, "seq": n, "state": "aborted",
			"stopReason": "rpc", "message": assistantMsg(text)})
	case t.Error != "":
		emit("agent", map[string]any{"runId": r.id, "sessionKey": r.session, "seq": n, "stream": "lifecycle",
			"data": map[string]any{"phase": "error", "error": t.Error}})
		emit("chat", map[string]any{"runId": r.id, "sessionKey": r.session, "seq": n, "state": "error",
			"errorMessage": t.Error})
	default:
		end := map[string]any{"phase": "end", "stopReason": "stop", "aborted": false}
		if final != "" {
			end["terminalReply"] = map[string]any{"disposition": "visible", "text": final}
		}
		emit("agent", map[string]any{"runId": r.id, "sessionKey": r.session, "seq": n, "stream": "lifecycle", "data": end})
		fin := map[string]any{"runId": r.id, "sessionKey": r.session, "seq": n, "state": "final", "stopReason": "stop"}
		if final != "" {
			fin["message"] = assistantMsg(final)
		}
		emit("chat", fin)
	}
}

func (r *frun) wasAborted() bool { return r.abortFlag.Load() }

func assistantMsg(text string) map[string]any {
	return map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": text}},
		"timestamp": time.Now().UnixMilli()}
}

func (s *Server) agentWait(ctx context.Context, params json.RawMessage) (any, error) {
	var p struct {
		RunID     string `json:"runId"`
		TimeoutMs *int64 `json:"timeoutMs"`
	}
	if err := json.Unmarshal(params, &p); err != nil || p.RunID == "" {
		return nil, invalid("agent.wait", "must have required property 'runId'")
	}
	timeout := 30 * time.Second
	if p.TimeoutMs != nil {
		timeout = time.Duration(*p.TimeoutMs) * time.Millisecond
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	s.mu.Lock()
	r := s.runs[p.RunID]
	s.mu.Unlock()
	if r == nil {
		// Like the real gateway: an unknown run id waits out the timeout.
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, ErrNoReply
		}
		return map[string]any{"runId": p.RunID, "status": "timeout"}, nil
	}
	select {
	case <-r.done:
	case <-t.C:
		return map[string]any{"runId": p.RunID, "status": "timeout"}, nil
	case <-ctx.Done():
		return nil, ErrNoReply
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]any{"runId": r.id, "status": r.status, "endedAt": time.Now().UnixMilli()}
	if r.errMsg != "" {
		out["error"] = r.errMsg
	}
	if r.aborted {
		out["stopReason"] = "rpc"
	}
	if ft := r.finalText(); ft != "" {
		out["terminalReply"] = map[string]any{"disposition": "visible", "text": ft}
	}
	return out, nil
}

func (s *Server) abort(method string, params json.RawMessage) (any, error) {
	var p struct {
		SessionKey string `json:"sessionKey"`
		Key        string `json:"key"`
		RunID      string `json:"runId"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, invalid(method, err.Error())
	}
	key := p.Key
	if method == "chat.abort" {
		key = p.SessionKey
		if key == "" {
			return nil, invalid(method, "must have required property 'sessionKey'")
		}
	}
	key = s.canonical(key)
	s.mu.Lock()
	var hit []*frun
	for _, r := range s.runs {
		if isDone(r) {
			continue
		}
		if (p.RunID != "" && r.id == p.RunID) || (p.RunID == "" && r.session == key) {
			hit = append(hit, r)
		}
	}
	s.mu.Unlock()
	ids := []string{}
	for _, r := range hit {
		r.abortFlag.Store(true)
		r.cancel()
		ids = append(ids, r.id)
	}
	slices.Sort(ids)
	if method == "chat.abort" {
		return map[string]any{"ok": true, "aborted": len(ids) > 0, "runIds": ids}, nil
	}
	if len(ids) == 0 {
		return map[string]any{"ok": true, "status": "no-active-run"}, nil
	}
	return map[string]any{"ok": true, "abortedRunId": ids[0], "status": "aborted"}, nil
}

func (s *Server) history(_ context.Context, params json.RawMessage) (any, error) {
	var p struct {
		SessionKey string `json:"sessionKey"`
		Limit      int    `json:"limit"`
	}
	if err := json.Unmarshal(params, &p); err != nil || p.SessionKey == "" {
		return nil, invalid("chat.history", "must have required property 'sessionKey'")
	}
	key := s.canonical(p.SessionKey)
	s.mu.Lock()
	rows := slices.Clone(s.transcripts[key])
	s.mu.Unlock()
	if p.Limit > 0 && len(rows) > p.Limit {
		rows = rows[len(rows)-p.Limit:]
	}
	if rows == nil {
		rows = []json.RawMessage{}
	}
	return map[string]any{"sessionKey": key, "sessionId": "sid-" + key, "messages": rows, "hasMore": false,
		"totalMessages": len(rows), "sessionInfo": s.sessionRow(key)}, nil
}

// sessionRow describes a session, or returns nil if it is unknown.
func (s *Server) sessionRow(key string) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, known := s.transcripts[key]
	if !known {
		return nil
	}
	active := []string{}
	last := ""
	for _, r := range s.runs {
		if r.session != key {
			continue
		}
		if !isDone(r) {
			active = append(active, r.id)
		}
		last = r.id
	}
	slices.Sort(active)
	status := "done"
	if len(active) > 0 {
		status = "running"
	}
	return map[string]any{"key": key, "agentId": s.opts.DefaultAgentID, "sessionId": "sid-" + key, "kind": "direct",
		"status": status, "displayName": strings.TrimPrefix(key, "agent:"+s.opts.DefaultAgentID+":"),
		"hasActiveRun": len(active) > 0, "activeRunIds": active, "lastRunId": last}
}

func (s *Server) sessionsList(_ context.Context, params json.RawMessage) (any, error) {
	var p struct {
		Limit int `json:"limit"`
	}
	_ = json.Unmarshal(params, &p)
	s.mu.Lock()
	keys := make([]string, 0, len(s.transcripts))
	for k := range s.transcripts {
		keys = append(keys, k)
	}
	s.mu.Unlock()
	slices.Sort(keys)
	total := len(keys)
	if p.Limit > 0 && len(keys) > p.Limit {
		keys = keys[:p.Limit]
	}
	rows := []any{}
	for _, k := range keys {
		rows = append(rows, s.sessionRow(k))
	}
	return map[string]any{"count": len(rows), "totalCount": total, "hasMore": len(rows) < total, "sessions": rows}, nil
}
