package dashboard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal"
	"github.com/clawconnect/clawconnect/internal/terminal/watch"
	"github.com/clawconnect/clawconnect/termapi"
)

// Terminals is the part of the terminal Turn service the dashboard uses
// (internal/terminal.Service, or the Client of a terminal daemon's socket).
type Terminals interface {
	List(ctx context.Context) (termapi.ListResult, error)
	Status(ctx context.Context, turnID string) (termapi.TurnView, error)
	Cancel(ctx context.Context, turnID string) (termapi.TurnView, error)
	// RetryCallback is `clawconnect terminal retry-callback`: the Turn's
	// latest callback due again with a fresh retry budget.
	RetryCallback(ctx context.Context, turnID string) (termapi.TurnView, error)
	// Watches lists the active watches of human-started tasks (at most
	// limit), WatchStatus reads one with its notifications, and Unwatch is
	// `clawconnect terminal unwatch`.
	Watches(ctx context.Context, limit int) ([]watch.View, error)
	WatchStatus(ctx context.Context, id string) (watch.View, error)
	Unwatch(ctx context.Context, id string) (watch.View, error)
}

var _ Terminals = (*terminal.Service)(nil)

// TerminalRecords reads what the Turn service does not report: a Session's
// binding and a Turn's event log (store.TerminalStore).
type TerminalRecords interface {
	GetTermSession(ctx context.Context, id string) (*store.TermSession, error)
	TurnEvents(ctx context.Context, turnID string, after int64, limit int) ([]store.TurnEvent, error)
}

// terminalsRefresh is the longest a Terminals page goes without looking at
// the panes again: each look captures every agent pane.
const terminalsRefresh = 2 * time.Second

// turnEventsMax bounds the event rows of a Turn page.
const turnEventsMax = 500

// watchesMax bounds the active watches one look at the panes reads.
const watchesMax = 200

// paneRow is one agent pane on the Terminals page.
type paneRow struct {
	termapi.TerminalRow
	Generation int64
	// Watch is the pane's active watch of a human-started task.
	Watch *watch.View
	// Choices are the ways out of a thread conflict, as commands.
	Choices []choice
}

// choice is one command the CLI offers, with what it does.
type choice struct {
	Label   string
	Command string
}

type terminalsBody struct {
	Rows []paneRow
	// WatchError says why the active watches could not be read.
	WatchError string
}

// conflictChoices labels the commands a conflict row offers (adopt the
// pane's thread, or keep the old Session detached); a command the page
// does not know is shown as it is.
func conflictChoices(c *termapi.ThreadConflict) []choice {
	if c == nil {
		return nil
	}
	out := make([]choice, 0, len(c.Choices))
	for _, cmd := range c.Choices {
		label := "Run"
		switch {
		case strings.Contains(cmd, " adopt-thread "):
			label = "Adopt the pane's thread (a transition: new Session binding)"
		case strings.Contains(cmd, " detach "):
			label = "Keep the old Session detached from this pane"
		}
		out = append(out, choice{Label: label, Command: cmd})
	}
	return out
}

// errOperatorOnly answers a caller who may not see terminal panes.
var errOperatorOnly = errors.New("terminal panes have no owner, so they are shown only on an open loopback server " +
	"or under the team view (CLAWCONNECT_SHARED_TASK_VIEW=1)")

// errNoTerminals answers when serve runs no Turn service.
var errNoTerminals = errors.New("terminal turns are not running in this process (no tmux, or the store is another process's)")

func (d *Dashboard) terminalsAllowed(q request) error {
	switch {
	case !q.caller.SeesAll():
		return errOperatorOnly
	case d.o.Terminals == nil:
		return errNoTerminals
	}
	return nil
}

func (d *Dashboard) terminalsData(ctx context.Context, q request) (terminalsBody, error) {
	if err := d.terminalsAllowed(q); err != nil {
		return terminalsBody{}, err
	}
	res, err := d.o.Terminals.List(ctx)
	if err != nil {
		return terminalsBody{}, err
	}
	var b terminalsBody
	watched := map[string]*watch.View{}
	if ws, err := d.o.Terminals.Watches(ctx, watchesMax); err != nil {
		d.o.Logger.Debug("dashboard watches", "err", err)
		b.WatchError = "The active watches could not be read: " + err.Error()
	} else {
		for i := range ws {
			watched[ws[i].TerminalID] = &ws[i]
		}
	}
	for _, r := range res.Terminals {
		row := paneRow{TerminalRow: r, Generation: r.BindingGeneration, Watch: watched[r.ID], Choices: conflictChoices(r.Conflict)}
		if row.Generation == 0 && r.SessionID != "" && d.o.TerminalRecords != nil {
			if s, err := d.o.TerminalRecords.GetTermSession(ctx, r.SessionID); err == nil && s.Binding != nil {
				row.Generation = s.Binding.Generation
			}
		}
		b.Rows = append(b.Rows, row)
	}
	return b, nil
}

func (d *Dashboard) terminalsPage(w http.ResponseWriter, r *http.Request, q request) {
	b, err := d.terminalsData(r.Context(), q)
	if err != nil {
		d.failTerminal(w, q, err)
		return
	}
	d.render(w, "terminals", d.newPage(q, "Terminals", "terminals", "page=terminals", b))
}

// turnBody is a Turn page.
type turnBody struct {
	Turn termapi.TurnView
	// Shown is the status as a person reads it (termapi.ShownStatus).
	Shown   string
	Events  []store.TurnEvent
	Running bool
	// Operator is a caller that sees all: only it may retry the callback
	// (the Turn's owner may view and cancel it).
	Operator bool
	// Retryable offers the Retry callback button: the Turn has a callback
	// that is not delivered (a delivered one is left as it is).
	Retryable bool
	CSRF      string
}

// turnAllowed returns the Turn id as q's caller may see it: every Turn for
// a caller that sees all, otherwise only one it sent through MCP (the
// Turn's principal). Another's Turn answers exactly as one that does not
// exist.
func (d *Dashboard) turnAllowed(ctx context.Context, q request, id string) (termapi.TurnView, error) {
	if d.o.Terminals == nil {
		return termapi.TurnView{}, errNoTerminals
	}
	v, err := d.o.Terminals.Status(ctx, id)
	if q.caller.SeesAll() {
		return v, err
	}
	if (err == nil && !q.caller.Mine(v.Principal)) || errors.Is(err, termapi.ErrNotFound) || errors.Is(err, store.ErrNotFound) {
		return termapi.TurnView{}, fmt.Errorf("%w: no turn %s among yours", termapi.ErrNotFound, id)
	}
	return v, err
}

func (d *Dashboard) turnData(ctx context.Context, q request, id string) (turnBody, error) {
	v, err := d.turnAllowed(ctx, q, id)
	if err != nil {
		return turnBody{}, err
	}
	b := turnBody{Turn: v, Shown: terminal.ShownStatus(v), Running: terminal.Running(v.Status) || v.Status == termapi.TurnWaitingForOpenClaw,
		Operator: q.caller.SeesAll(), CSRF: q.sess.csrf}
	b.Retryable = b.Operator && v.CallbackDelivery != nil && v.CallbackDelivery.Status != termapi.CallbackDelivered
	if d.o.TerminalRecords != nil {
		if ev, err := d.o.TerminalRecords.TurnEvents(ctx, id, 0, turnEventsMax); err == nil {
			b.Events = ev
		}
	}
	return b, nil
}

func (d *Dashboard) turnPage(w http.ResponseWriter, r *http.Request, q request) {
	b, err := d.turnData(r.Context(), q, r.PathValue("id"))
	if err != nil {
		d.failTerminal(w, q, err)
		return
	}
	d.render(w, "turn", d.newPage(q, "Turn "+b.Turn.TurnID, "terminals", "page=turn&id="+urlq(b.Turn.TurnID), b))
}

// cancelTurn is `clawconnect terminal cancel` through the same service.
func (d *Dashboard) cancelTurn(w http.ResponseWriter, r *http.Request, q request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := d.checkAction(r, q.sess); err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	id := r.PathValue("id")
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	if _, err := d.turnAllowed(ctx, q, id); err != nil {
		d.failTerminal(w, q, err)
		return
	}
	v, err := d.o.Terminals.Cancel(ctx, id)
	note := "Cancel requested: the Turn is " + string(v.Status) + "."
	if err != nil {
		note = "Cancel refused: " + err.Error()
	}
	d.setFlash(q.sess, note)
	d.hub.notify()
	http.Redirect(w, r, "/turns/"+url.PathEscape(id), http.StatusSeeOther)
}

// retryCallback is `clawconnect terminal retry-callback` through the same
// service: the service decides what may be retried and says why not.
func (d *Dashboard) retryCallback(w http.ResponseWriter, r *http.Request, q request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := d.checkAction(r, q.sess); err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	if err := d.terminalsAllowed(q); err != nil {
		d.failTerminal(w, q, err)
		return
	}
	id := r.PathValue("id")
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	v, err := d.o.Terminals.RetryCallback(ctx, id)
	var note string
	switch {
	case err != nil:
		note = "Retry refused: " + err.Error()
	case v.CallbackDelivery == nil:
		note = "Retry requested."
	case v.CallbackDelivery.Status == termapi.CallbackDelivered:
		note = "The callback was already delivered; nothing to retry."
	default:
		note = "Retry requested: the callback is " + string(v.CallbackDelivery.Status) + "."
	}
	d.setFlash(q.sess, note)
	d.hub.notify()
	http.Redirect(w, r, "/turns/"+url.PathEscape(id), http.StatusSeeOther)
}

// watchBody is a watch page.
type watchBody struct {
	Watch watch.View
	// Active offers the Unwatch button.
	Active bool
	CSRF   string
}

func (d *Dashboard) watchData(ctx context.Context, q request, id string) (watchBody, error) {
	if err := d.terminalsAllowed(q); err != nil {
		return watchBody{}, err
	}
	v, err := d.o.Terminals.WatchStatus(ctx, id)
	if err != nil {
		return watchBody{}, err
	}
	return watchBody{Watch: v, Active: v.Status == store.WatchActive, CSRF: q.sess.csrf}, nil
}

func (d *Dashboard) watchPage(w http.ResponseWriter, r *http.Request, q request) {
	b, err := d.watchData(r.Context(), q, r.PathValue("id"))
	if err != nil {
		d.failTerminal(w, q, err)
		return
	}
	d.render(w, "watch", d.newPage(q, "Watch "+b.Watch.WatchID, "terminals", "page=watch&id="+urlq(b.Watch.WatchID), b))
}

// unwatch is `clawconnect terminal unwatch` through the same service. A
// page's script submits it in place (inlineHeader) and gets the outcome as
// text, the new state arriving over the page's event stream; without the
// script the form posts and is redirected back as the Turn buttons are.
func (d *Dashboard) unwatch(w http.ResponseWriter, r *http.Request, q request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := d.checkAction(r, q.sess); err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	if err := d.terminalsAllowed(q); err != nil {
		if r.Header.Get(inlineHeader) != "" {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		d.failTerminal(w, q, err)
		return
	}
	id := r.PathValue("id")
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	// The status before tells "unwatched now" from "had already ended"
	// (Unwatch returns an ended watch unchanged); the service decides.
	before, berr := d.o.Terminals.WatchStatus(ctx, id)
	v, err := d.o.Terminals.Unwatch(ctx, id)
	note := "Unwatched: the watch is " + v.Status + "; nothing more is notified for it."
	switch {
	case err != nil:
		note = "Unwatch refused: " + err.Error()
	case berr == nil && before.Status != store.WatchActive, v.Status != store.WatchCancelled:
		note = "The watch had already ended (" + v.Status + "); nothing to unwatch."
	}
	d.hub.notify()
	if r.Header.Get(inlineHeader) != "" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, note)
		return
	}
	d.setFlash(q.sess, note)
	http.Redirect(w, r, "/watches/"+url.PathEscape(id), http.StatusSeeOther)
}

// inlineHeader marks an action the page's script submits in place: the
// answer is the outcome as text instead of a redirect (the checks are the
// same).
const inlineHeader = "X-Dashboard-Inline"

func (d *Dashboard) failTerminal(w http.ResponseWriter, q request, err error) {
	code := http.StatusNotFound
	switch {
	case errors.Is(err, errOperatorOnly):
		code = http.StatusForbidden
	case errors.Is(err, errNoTerminals):
		code = http.StatusServiceUnavailable
	}
	w.WriteHeader(code)
	d.render(w, "error", d.newPage(q, "Not available", "terminals", "", err.Error()))
}
