package fakemodel

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// API names the model API a request used.
type API string

// The APIs the server recognises, by request path.
const (
	APIChatCompletions API = "openai-chat-completions" // POST …/chat/completions
	APIResponses       API = "openai-responses"        // POST …/responses
	APIMessages        API = "anthropic-messages"      // POST …/messages
	APICountTokens     API = "anthropic-count-tokens"  // POST …/messages/count_tokens
	APIModels          API = "models"                  // GET …/models
	APIOther           API = "other"                   // anything else (HEAD probes, 404s)
)

// Options configures a Server. The zero value is a usable default.
type Options struct {
	// Addr is the listen address; default "127.0.0.1:0" (a free loopback port).
	Addr string
	// Model is the model id listed by GET …/models and echoed when a request
	// names none; default "fake-model".
	Model string
	// Chunks is how many stream chunks a normal reply is split into; default 4.
	Chunks int
	// ChunkDelay is the pause between chunks of a normal reply; default 0.
	ChunkDelay time.Duration
	// SlowChunks is how many chunks a SLOW reply is split into; default 40.
	SlowChunks int
	// SlowChunkDelay is the pause between chunks of a SLOW reply; default 250 ms.
	SlowChunkDelay time.Duration
	// MaxRequests is how many requests the in-memory log keeps (the oldest are
	// dropped first); default 1000.
	MaxRequests int
	// MaxBodyBytes caps a request body; default 64 MiB.
	MaxBodyBytes int64
	// LogPath, when set, receives one JSON line per finished request
	// (appended; the file is created if missing).
	LogPath string
	// Logger receives one debug line per request; nil discards.
	Logger *slog.Logger
	// Rewrite, when set, maps each prompt before its triggers are looked
	// for (never a tool result's). A test uses it to script a reply to
	// text it does not write itself, e.g. to make the model call a tool
	// named in a message a product sent. It must be safe for concurrent use.
	Rewrite func(prompt string) string
}

func (o Options) withDefaults() Options {
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	if o.Model == "" {
		o.Model = "fake-model"
	}
	if o.Chunks <= 0 {
		o.Chunks = 4
	}
	if o.SlowChunks <= 0 {
		o.SlowChunks = 40
	}
	if o.SlowChunkDelay <= 0 {
		o.SlowChunkDelay = 250 * time.Millisecond
	}
	if o.MaxRequests <= 0 {
		o.MaxRequests = 1000
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 64 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Request is one logged request and, once it has been answered, what the
// server answered.
type Request struct {
	// Seq numbers requests from 1 in arrival order.
	Seq int `json:"seq"`
	// Time is when the request arrived.
	Time time.Time `json:"time"`
	// Method and Path (without the query) of the HTTP request.
	Method string `json:"method"`
	Path   string `json:"path"`
	// API is the model API the path selects.
	API API `json:"api"`
	// Header holds the request headers.
	Header http.Header `json:"header"`
	// Body is the raw request body (JSON for model calls).
	Body json.RawMessage `json:"body,omitempty"`
	// Model and Stream are the request's "model" and "stream" fields.
	Model  string `json:"model,omitempty"`
	Stream bool   `json:"stream,omitempty"`
	// Prompt is the cleaned newest user text (see the package doc).
	Prompt string `json:"prompt,omitempty"`
	// IsToolResult reports that the newest input was a tool result, whose
	// output is ToolOutput.
	IsToolResult bool   `json:"is_tool_result,omitempty"`
	ToolOutput   string `json:"tool_output,omitempty"`
	// Script is what the server decided to do.
	Script Script `json:"script"`

	// Done reports that the response has ended (fields below are final).
	Done bool `json:"done"`
	// Status is the HTTP status answered.
	Status int `json:"status"`
	// Reply is the reply text sent (empty for tool calls and failures).
	Reply string `json:"reply,omitempty"`
	// ToolCall is the shell command the reply asked the client to run.
	ToolCall string `json:"tool_call,omitempty"`
	// Disconnected reports that the client went away before the response
	// was complete (an abort), or that the server closed under it.
	Disconnected bool `json:"disconnected,omitempty"`
}

// Server is a running fake model server. Its methods are safe for
// concurrent use.
type Server struct {
	opts    Options
	url     string
	srv     *http.Server
	closing chan struct{}
	served  chan struct{} // closed when Serve has returned
	once    sync.Once

	mu      sync.Mutex
	seq     int
	reqs    []*Request
	changed chan struct{} // closed and replaced whenever reqs change
	logFile *os.File
	closed  bool
	waited  map[string]bool // prompts a WAITONCE already delayed
}

// Start listens on opts.Addr and serves until Close. ctx bounds only the
// listen call.
func Start(ctx context.Context, opts Options) (*Server, error) {
	opts = opts.withDefaults()
	var logFile *os.File
	if opts.LogPath != "" {
		f, err := os.OpenFile(opts.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("fakemodel: open request log: %w", err)
		}
		logFile = f
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", opts.Addr)
	if err != nil {
		if logFile != nil {
			_ = logFile.Close()
		}
		return nil, fmt.Errorf("fakemodel: listen: %w", err)
	}
	s := &Server{
		opts:    opts,
		url:     "http://" + ln.Addr().String(),
		closing: make(chan struct{}),
		served:  make(chan struct{}),
		changed: make(chan struct{}),
		logFile: logFile,
	}
	s.srv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(opts.Logger.Handler(), slog.LevelDebug),
	}
	go func() {
		defer close(s.served)
		_ = s.srv.Serve(ln) // returns http.ErrServerClosed after Close
	}()
	return s, nil
}

// URL is the server's root URL, "http://127.0.0.1:<port>".
func (s *Server) URL() string { return s.url }

// Addr is the server's host:port.
func (s *Server) Addr() string { return strings.TrimPrefix(s.url, "http://") }

// OpenAIBaseURL is the base URL for OpenAI clients (OpenClaw's
// openai-completions provider, Codex): URL + "/v1".
func (s *Server) OpenAIBaseURL() string { return s.url + "/v1" }

// AnthropicBaseURL is the base URL for Anthropic clients (Claude Code's
// ANTHROPIC_BASE_URL, OpenClaw's anthropic-messages provider), which append
// /v1/messages themselves: the same as URL.
func (s *Server) AnthropicBaseURL() string { return s.url }

// Model is the model id the server advertises.
func (s *Server) Model() string { return s.opts.Model }

// Close stops the server: held (HANG, SLOW, WAIT) streams end at once, open
// connections are closed, and the request log file is closed. It is
// idempotent and safe to call concurrently.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		close(s.closing)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if e := s.srv.Shutdown(ctx); e != nil {
			_ = s.srv.Close()
		}
		<-s.served
		s.mu.Lock()
		s.closed = true
		if s.logFile != nil {
			err = s.logFile.Close()
		}
		s.notifyLocked()
		s.mu.Unlock()
		if err != nil {
			err = fmt.Errorf("fakemodel: close request log: %w", err)
		}
	})
	return err
}

// Requests returns a copy of the logged requests, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.reqs))
	for i, r := range s.reqs {
		out[i] = *r
	}
	return out
}

// ErrClosed is returned by WaitRequest when the server closes first.
var ErrClosed = errors.New("fakemodel: server closed")

// WaitRequest blocks until a logged request satisfies match (checked against
// every logged request, including those already logged, and again each time
// a request arrives or finishes) and returns a copy of it. It returns
// ctx.Err() or ErrClosed when those come first.
func (s *Server) WaitRequest(ctx context.Context, match func(Request) bool) (Request, error) {
	for {
		s.mu.Lock()
		for _, r := range s.reqs {
			if c := *r; match(c) {
				s.mu.Unlock()
				return c, nil
			}
		}
		changed, closed := s.changed, s.closed
		s.mu.Unlock()
		if closed {
			return Request{}, ErrClosed
		}
		select {
		case <-ctx.Done():
			return Request{}, fmt.Errorf("fakemodel: wait request: %w", ctx.Err())
		case <-changed:
		}
	}
}

// PromptContains matches a finished model call whose prompt contains sub.
func PromptContains(sub string) func(Request) bool {
	return func(r Request) bool { return r.Done && r.Prompt != "" && strings.Contains(r.Prompt, sub) }
}

func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// begin logs a new request and returns its record; update it only through
// finish.
func (s *Server) begin(r *http.Request, api API, body []byte) *Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	rec := &Request{
		Seq: s.seq, Time: time.Now(), Method: r.Method, Path: r.URL.Path, API: api,
		Header: r.Header.Clone(),
	}
	if json.Valid(body) {
		rec.Body = json.RawMessage(body)
	}
	if len(s.reqs) >= s.opts.MaxRequests {
		s.reqs = append(s.reqs[:0], s.reqs[1:]...)
	}
	s.reqs = append(s.reqs, rec)
	s.notifyLocked()
	return rec
}

// annotate sets fields of a logged request under the lock.
func (s *Server) annotate(rec *Request, f func(*Request)) {
	s.mu.Lock()
	f(rec)
	s.notifyLocked()
	s.mu.Unlock()
}

// finish records the outcome of a request and appends it to the log file.
func (s *Server) finish(rec *Request, status int, disconnected bool) {
	s.mu.Lock()
	rec.Done, rec.Status, rec.Disconnected = true, status, disconnected
	if s.logFile != nil && !s.closed {
		if line, err := json.Marshal(rec); err == nil {
			_, _ = s.logFile.Write(append(line, '\n'))
		}
	}
	c := *rec
	s.notifyLocked()
	s.mu.Unlock()
	s.opts.Logger.Debug("fake model request", "seq", c.Seq, "api", string(c.API), "path", c.Path,
		"status", c.Status, "prompt", c.Prompt, "disconnected", c.Disconnected)
}

// pause waits d, or less when the client or the server goes away.
func (s *Server) pause(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.closing:
		return ErrClosed
	}
}

// hold blocks until the client or the server goes away.
func (s *Server) hold(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-s.closing:
	}
}

// ServeHTTP implements http.Handler; Start serves it, and tests may mount it
// in an httptest.Server instead.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimSuffix(r.URL.Path, "/")
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	api := classify(r.Method, path)
	rec := s.begin(r, api, body)
	if err != nil {
		writeError(w, api, http.StatusRequestEntityTooLarge, "request body: "+err.Error())
		s.finish(rec, http.StatusRequestEntityTooLarge, false)
		return
	}
	switch api {
	case APIModels:
		writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{map[string]any{
			"id": s.opts.Model, "object": "model", "created": 0, "owned_by": "fakemodel",
		}}})
		s.finish(rec, http.StatusOK, false)
	case APICountTokens:
		writeJSON(w, http.StatusOK, map[string]any{"input_tokens": approxTokens(len(body))})
		s.finish(rec, http.StatusOK, false)
	case APIChatCompletions, APIResponses, APIMessages:
		status, disconnected := s.serveModel(w, r, rec, api, body)
		s.finish(rec, status, disconnected)
	default:
		if r.Method == http.MethodHead {
			w.WriteHeader(http.StatusOK)
			s.finish(rec, http.StatusOK, false)
			return
		}
		writeError(w, api, http.StatusNotFound, "no such endpoint: "+r.Method+" "+r.URL.Path)
		s.finish(rec, http.StatusNotFound, false)
	}
}

func classify(method, path string) API {
	switch {
	case method == http.MethodGet && strings.HasSuffix(path, "/models"):
		return APIModels
	case method != http.MethodPost:
		return APIOther
	case strings.HasSuffix(path, "/chat/completions"):
		return APIChatCompletions
	case strings.HasSuffix(path, "/responses"):
		return APIResponses
	case strings.HasSuffix(path, "/messages/count_tokens"):
		return APICountTokens
	case strings.HasSuffix(path, "/messages"):
		return APIMessages
	}
	return APIOther
}

// modelRequest holds the request fields every API shares.
type modelRequest struct {
	Model         string          `json:"model"`
	Stream        bool            `json:"stream"`
	Tools         json.RawMessage `json:"tools"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Text struct {
		Format struct {
			Type   string `json:"type"`
			Schema struct {
				Properties map[string]struct {
					Type string `json:"type"`
				} `json:"properties"`
			} `json:"schema"`
		} `json:"format"`
	} `json:"text"`
}

// serveModel answers one model call and returns the status and whether the
// client went away early.
func (s *Server) serveModel(w http.ResponseWriter, r *http.Request, rec *Request, api API, body []byte) (int, bool) {
	var req modelRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, api, http.StatusBadRequest, "request body is not a JSON object: "+err.Error())
		return http.StatusBadRequest, false
	}
	ex, _ := ExtractPrompt(api, body) // the body decoded above, so no error
	var sc Script
	switch {
	case ex.ToolResult != nil:
		sc = Script{Text: ToolResultPrefix + toolOutputLine(*ex.ToolResult)}
	case api == APIResponses && req.Text.Format.Type == "json_schema":
		sc = Script{Text: titleJSON(req.Text.Format.Schema.Properties)}
	case s.opts.Rewrite != nil:
		sc = ParseScript(s.opts.Rewrite(ex.Prompt))
	default:
		sc = ParseScript(ex.Prompt)
	}
	model := req.Model
	if model == "" {
		model = s.opts.Model
	}
	var tool toolChoice
	switch {
	case sc.Fail != 0:
	case sc.ToolName != "":
		tool = toolChoice{name: sc.ToolName, args: sc.ToolArgs}
	case sc.Question != "":
		tool = questionTool(api, req.Tools, append([]Question{{Text: sc.Question, Options: sc.QuestionOptions}}, sc.MoreQuestions...))
	case sc.ToolCommand != "":
		tool = pickTool(api, req.Tools, sc.ToolCommand, sc.Escalate)
	}
	if sc.WaitOnce {
		s.mu.Lock()
		if s.waited[ex.Prompt] {
			sc.Wait = 0
		} else {
			if s.waited == nil {
				s.waited = map[string]bool{}
			}
			s.waited[ex.Prompt] = true
		}
		s.mu.Unlock()
	}
	s.annotate(rec, func(rec *Request) {
		rec.Model, rec.Stream, rec.Prompt, rec.Script = req.Model, req.Stream, ex.Prompt, sc
		if ex.ToolResult != nil {
			rec.IsToolResult, rec.ToolOutput = true, *ex.ToolResult
		}
	})

	ctx := r.Context()
	if err := s.pause(ctx, sc.Wait); err != nil {
		return http.StatusOK, true
	}
	if sc.Fail != 0 {
		writeError(w, api, sc.Fail, fmt.Sprintf("fakemodel: scripted failure FAIL=%d", sc.Fail))
		return sc.Fail, false
	}

	in := replyInput{
		seq: rec.Seq, model: model, text: sc.Text, tool: tool, includeUsage: req.StreamOptions.IncludeUsage,
		inputTokens: approxTokens(len(body)), created: time.Now().Unix(),
	}
	if tool.name != "" {
		in.text = ""
	}
	var b builder
	switch api {
	case APIChatCompletions:
		b = chatBuilder{in}
	case APIResponses:
		b = responsesBuilder{in}
	default:
		b = messagesBuilder{in}
	}
	s.annotate(rec, func(rec *Request) {
		rec.Reply = in.text
		if tool.name != "" {
			rec.ToolCall = cmp.Or(sc.ToolCommand, sc.ToolName, tool.name)
		}
	})
	if !req.Stream {
		switch {
		case sc.Hang:
			s.hold(ctx)
			return http.StatusOK, true
		case sc.Slow:
			if s.pause(ctx, time.Duration(s.opts.SlowChunks)*s.opts.SlowChunkDelay) != nil {
				return http.StatusOK, true
			}
		}
		writeJSON(w, http.StatusOK, b.whole())
		return http.StatusOK, false
	}

	n, delay := s.opts.Chunks, s.opts.ChunkDelay
	if sc.Slow {
		n, delay = s.opts.SlowChunks, s.opts.SlowChunkDelay
	}
	var pieces []string
	if tool.name != "" {
		pieces = split(tool.args, n)
	} else {
		pieces = split(in.text, n)
	}
	st := b.stream(pieces)
	return http.StatusOK, s.writeStream(ctx, w, st, delay, sc.Hang)
}

// writeStream sends a planned SSE stream and reports whether the client (or
// the server) went away before its end.
func (s *Server) writeStream(ctx context.Context, w http.ResponseWriter, st stream, delay time.Duration, hang bool) bool {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(evs ...event) bool {
		for _, ev := range evs {
			if _, err := w.Write(ev.encode()); err != nil {
				return false
			}
		}
		return rc.Flush() == nil
	}
	if !send(st.head...) {
		return true
	}
	for i, d := range st.deltas {
		if i > 0 {
			if s.pause(ctx, delay) != nil {
				return true
			}
		}
		if !send(d) {
			return true
		}
		if hang && i == 0 {
			s.hold(ctx)
			return true
		}
	}
	if hang && len(st.deltas) == 0 {
		s.hold(ctx)
		return true
	}
	return !send(st.tail...)
}

// split cuts text into at most n pieces of about equal length at rune
// boundaries; an empty text gives no pieces.
func split(text string, n int) []string {
	if text == "" {
		return nil
	}
	runes := []rune(text)
	n = max(1, min(n, len(runes)))
	out := make([]string, 0, n)
	for i := range n {
		lo, hi := i*len(runes)/n, (i+1)*len(runes)/n
		out = append(out, string(runes[lo:hi]))
	}
	return out
}

func approxTokens(bytes int) int { return max(1, bytes/4) }

// titleJSON answers Codex's thread-title request: every property "Fake title".
func titleJSON[T any](props map[string]T) string {
	obj := make(map[string]string, len(props))
	for k := range props {
		obj[k] = "Fake title"
	}
	if len(obj) == 0 {
		obj["title"] = "Fake title"
	}
	b, _ := json.Marshal(obj) // a map of strings always marshals
	return string(b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// writeError answers an error in the shape the API's clients parse.
func writeError(w http.ResponseWriter, api API, status int, msg string) {
	typ := "invalid_request_error"
	switch {
	case status == http.StatusNotFound:
		typ = "not_found_error"
	case status == http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case status >= 500:
		typ = "api_error"
	}
	if api == APIMessages || api == APICountTokens {
		writeJSON(w, status, map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
		return
	}
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}})
}
