package server

// notifications/tasks for a client that listens (the MCP Tasks extension's
// subscriptions/listen with notifications.taskIds).
//
// go-sdk serves subscriptions/listen itself and decodes its params into a
// fixed struct that has no taskIds, so a listen naming tasks never reaches
// a handler of ours with its task list. withTaskListen is therefore a thin
// layer in front of the streamable HTTP handler: it answers exactly the
// listens that name taskIds (an event stream of its own) and hands every
// other request, untouched, to go-sdk. On stdio, stdioListens takes the
// same listens out of the message stream before go-sdk reads it.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/clawconnect/clawconnect/taskapi"
	"github.com/clawconnect/clawconnect/termapi"
)

// maxListenTasks bounds the task ids one listen may name.
const maxListenTasks = 100

// listenRequest is the part of a subscriptions/listen request this layer
// reads.
type listenRequest struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Meta struct {
			ProtocolVersion    string `json:"io.modelcontextprotocol/protocolVersion"`
			ClientCapabilities struct {
				Extensions map[string]json.RawMessage `json:"extensions"`
			} `json:"io.modelcontextprotocol/clientCapabilities"`
		} `json:"_meta"`
		Notifications struct {
			TaskIDs *[]string `json:"taskIds"`
		} `json:"notifications"`
	} `json:"params"`
}

// withTaskListen serves the subscriptions/listen requests that name
// taskIds and passes every other request to next with its body intact. It
// runs behind withAuth (the caller's identity and scope are in the
// request's context).
func (s *Server) withTaskListen(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBytes))
		if err != nil {
			http.Error(w, fmt.Sprintf("reading the request body: %v", err), http.StatusRequestEntityTooLarge)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var req listenRequest
		if !bytes.Contains(body, []byte(`"subscriptions/listen"`)) || json.Unmarshal(body, &req) != nil ||
			req.Method != "subscriptions/listen" || req.Params.Notifications.TaskIDs == nil || len(req.ID) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		p, ok := r.Context().Value(connKey).(connParams)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		c := &conn{s: s, scope: p.scope, identity: p.identity}
		c.listenTasks(w, r, req)
	})
}

// listenTasks answers one listen over HTTP: an error as a plain JSON-RPC
// response, else an event stream that runListen writes.
func (c *conn) listenTasks(w http.ResponseWriter, r *http.Request, req listenRequest) {
	ctx := r.Context()
	agreed, rpcErr := c.agreeListen(ctx, req)
	if rpcErr != nil {
		writeRPC(w, http.StatusOK, req.ID, "error", rpcErr)
		return
	}
	release, err := c.s.OpenStream(c.identity)
	if err != nil {
		writeRPC(w, http.StatusTooManyRequests, req.ID, "error", &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()})
		return
	}
	defer release()
	sse := &sseWriter{w: w, rc: http.NewResponseController(w), timeout: c.s.limits.Request}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if c.runListen(ctx, req.ID, agreed, sse.send) {
		sse.send(listenEnd(req.ID))
	}
}

// agreeListen checks a listen and returns the task ids the caller may
// watch (its own; others and unknown ids are left out alike, so a caller
// learns nothing of tasks that are not its own), or the error to answer.
func (c *conn) agreeListen(ctx context.Context, req listenRequest) ([]string, *jsonrpc.Error) {
	if _, ok := req.Params.Meta.ClientCapabilities.Extensions[TasksExtension]; !ok || req.Params.Meta.ProtocolVersion < tasksProtocol {
		return nil, errMissingTasks
	}
	ids := *req.Params.Notifications.TaskIDs
	if len(ids) > maxListenTasks {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: fmt.Sprintf("notifications.taskIds names %d tasks; listen to at most %d per subscriptions/listen, or open more listens", len(ids), maxListenTasks)}
	}
	agreed := make([]string, 0, len(ids))
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		if c.ownsTask(ctx, id) {
			agreed = append(agreed, id)
		}
	}
	return agreed, nil
}

// runListen sends a listen's messages through send: the acknowledgement
// with the agreed task ids, then each task's state as notifications/tasks
// at once and after every change until it ends or the server drains. It
// reports whether the listen's result is due: not when ctx ended (the
// client went away or cancelled it).
func (c *conn) runListen(ctx context.Context, subID json.RawMessage, agreed []string, send func(any)) bool {
	meta := map[string]any{"io.modelcontextprotocol/subscriptionId": subID}
	send(map[string]any{"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
		"params": map[string]any{"notifications": map[string]any{"taskIds": agreed}, "_meta": meta}})
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-c.s.draining:
			cancel()
		case <-lctx.Done():
		}
	}()
	var wg sync.WaitGroup
	for _, id := range agreed {
		wg.Go(func() { c.followTask(lctx, id, meta, send) })
	}
	wg.Wait()
	return ctx.Err() == nil
}

// listenEnd is the result that ends a listen whose tasks all ended.
func listenEnd(subID json.RawMessage) map[string]any {
	return map[string]any{"jsonrpc": "2.0", "id": subID, "result": map[string]any{"resultType": "complete",
		"_meta": map[string]any{"io.modelcontextprotocol/subscriptionId": subID}}}
}

// ownsTask reports whether id names one of the caller's tasks or Turns.
func (c *conn) ownsTask(ctx context.Context, id string) bool {
	if c.isTurnTask(id) {
		_, err := c.ownedTurn(ctx, id)
		return err == nil
	}
	_, err := c.owned(ctx, id, taskapi.DetailCore, 0)
	return err == nil
}

// followTask sends task id's state now and after each change, until it
// ends or ctx does. A job's change is what the task service's wait reports
// (a log entry, the outcome); a Turn's is any change of the task it maps
// to (working, an approval asked or answered, the end), which the Turn
// service's wait reports.
func (c *conn) followTask(ctx context.Context, id string, meta map[string]any, send func(any)) {
	var last string
	var known int64
	for ctx.Err() == nil {
		v, err := c.tasksGet(ctx, nil, &taskIDParams{TaskID: id})
		if err != nil {
			return // gone (retention) or the store failed: nothing more to say
		}
		if k := taskShown(v); k != last {
			last = k
			params := *v
			params.ResultType = ""
			send(taskNotification{JSONRPC: "2.0", Method: "notifications/tasks", Params: taskNotificationParams{taskResult: params, Meta: meta}})
		}
		if v.Status == taskCompleted || v.Status == taskCancelled {
			return
		}
		if c.isTurnTask(id) {
			if _, err := c.s.terminals.WaitFor(ctx, id, func(tv termapi.TurnView) bool { return taskShown(c.turnTask(tv)) != last }); err != nil {
				return
			}
			continue
		}
		snap, err := c.s.tasks.Check(ctx, CheckRequest{JobID: id, Mode: ModePoll, KnownLogCount: known, Wait: c.s.waits.max}, nil)
		if err != nil {
			return
		}
		known = snap.LogCursor
	}
}

// taskShown is what a notification tells of a task: its status, its
// message and the input it asks for. A listener hears of a task again when
// this changes.
func taskShown(v *taskResult) string {
	keys := slices.Sorted(maps.Keys(v.InputRequests))
	return v.Status + "\x00" + v.StatusMessage + "\x00" + strings.Join(keys, "\x00")
}

// taskNotification is notifications/tasks: the task as tasks/get would
// answer it at that moment, with the listen's subscription id in _meta.
type taskNotification struct {
	JSONRPC string                 `json:"jsonrpc"`
	Method  string                 `json:"method"`
	Params  taskNotificationParams `json:"params"`
}

type taskNotificationParams struct {
	taskResult
	Meta map[string]any `json:"_meta"`
}

// MarshalJSON flattens the task and sets _meta (the embedded ResultBase
// would otherwise shadow it) and leaves resultType out (a notification is
// not a result).
func (p taskNotificationParams) MarshalJSON() ([]byte, error) {
	data, err := json.Marshal(p.taskResult)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	delete(m, "resultType")
	m["_meta"] = p.Meta
	return json.Marshal(m)
}

// sseWriter writes JSON-RPC messages as server-sent events; it is safe for
// concurrent use. Each write extends the response's write deadline, so a
// stream outlives the per-request bound while it has something to say.
type sseWriter struct {
	mu      sync.Mutex
	w       io.Writer
	rc      *http.ResponseController
	timeout time.Duration
	failed  bool
}

func (s *sseWriter) send(msg any) {
	data, err := json.Marshal(msg)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed {
		return
	}
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	if _, err := fmt.Fprintf(s.w, "event: message\ndata: %s\n\n", data); err != nil {
		s.failed = true
		return
	}
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		s.failed = true
	}
}

// writeRPC writes one JSON-RPC response with a result or an error.
func writeRPC(w http.ResponseWriter, status int, id json.RawMessage, kind string, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": id, kind: v})
}

// stdioListens serves the task listens of one stdio connection: it takes
// each subscriptions/listen naming taskIds out of the messages go-sdk
// reads, answers it on stdout beside go-sdk's own messages, and ends it
// on the client's notifications/cancelled for its id or when the
// connection closes.
type stdioListens struct {
	c   *conn
	out *lineWriter
	wg  sync.WaitGroup

	mu     sync.Mutex
	open   map[string]context.CancelFunc // by the listen's raw request id
	closed bool
}

func newStdioListens(c *conn, out *lineWriter) *stdioListens {
	return &stdioListens{c: c, out: out, open: map[string]context.CancelFunc{}}
}

// take serves msg if it is a task listen and reports whether it did; a
// cancellation of one of its listens ends that listen and is still passed
// on (go-sdk ignores an id it does not know).
func (l *stdioListens) take(msg jsonrpc.Message) bool {
	req, ok := msg.(*jsonrpc.Request)
	if !ok {
		return false
	}
	switch req.Method {
	case "notifications/cancelled":
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if json.Unmarshal(req.Params, &p) == nil {
			l.mu.Lock()
			if stop := l.open[string(p.RequestID)]; stop != nil {
				stop()
			}
			l.mu.Unlock()
		}
		return false
	case "subscriptions/listen":
	default:
		return false
	}
	var lr listenRequest
	if !req.IsCall() || json.Unmarshal(req.Params, &lr.Params) != nil || lr.Params.Notifications.TaskIDs == nil {
		return false
	}
	id, err := json.Marshal(req.ID.Raw())
	if err != nil {
		return false
	}
	lr.ID = id
	// Its own context: a listen outlives the message that opened it and
	// ends on a cancellation or with the connection.
	ctx, stop := context.WithCancel(context.Background())
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		stop()
		return true
	}
	l.open[string(id)] = stop
	l.wg.Go(func() {
		defer func() {
			l.mu.Lock()
			delete(l.open, string(id))
			l.mu.Unlock()
			stop()
		}()
		l.serve(ctx, lr)
	})
	return true
}

// serve answers one listen on stdout. Its response is written as the
// answer the guard counts; a listen cut short has none, and is counted as
// settled all the same, so the end of input does not wait for it.
func (l *stdioListens) serve(ctx context.Context, req listenRequest) {
	send := func(msg any, answer bool) {
		if data, err := json.Marshal(msg); err == nil {
			_ = l.out.line(data, answer)
		}
	}
	agreed, rpcErr := l.c.agreeListen(ctx, req)
	if rpcErr == nil {
		release, err := l.c.s.OpenStream(l.c.identity)
		if err != nil {
			rpcErr = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		} else {
			defer release()
		}
	}
	if rpcErr != nil {
		send(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": rpcErr}, true)
		return
	}
	if l.c.runListen(ctx, req.ID, agreed, func(msg any) { send(msg, false) }) {
		send(listenEnd(req.ID), true)
		return
	}
	l.out.settle()
}

// close ends every listen and waits for them.
func (l *stdioListens) close() {
	l.mu.Lock()
	l.closed = true
	for _, stop := range l.open {
		stop()
	}
	l.mu.Unlock()
	l.wg.Wait()
}
