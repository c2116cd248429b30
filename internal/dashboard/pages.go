package dashboard

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/clawconnect/clawconnect/server"
	"github.com/clawconnect/clawconnect/taskapi"
)

// excerptRunes bounds the result excerpt of a task row.
const excerptRunes = 160

// logWindow bounds the log rows a task page shows at first.
const logWindow = 500

func funcs(now func() time.Time) template.FuncMap {
	return template.FuncMap{
		"elapsed": func(start, end int64) string {
			if start == 0 {
				return "—"
			}
			e := now().UnixMilli()
			if end > 0 {
				e = end
			}
			return humanDuration(time.Duration(e-start) * time.Millisecond)
		},
		"clock": func(ms int64) string {
			if ms == 0 {
				return "—"
			}
			return time.UnixMilli(ms).UTC().Format("15:04:05")
		},
		"stamp": func(ms int64) string {
			if ms == 0 {
				return "—"
			}
			return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05 UTC")
		},
		"excerpt":   excerpt,
		"firstLine": firstLine,
		"shortID": func(id string) string {
			if len(id) > 8 {
				return id[:8]
			}
			return id
		},
	}
}

func humanDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
}

func excerpt(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) > excerptRunes {
		return string(r[:excerptRunes]) + "…"
	}
	return s
}

// page is what every page template gets.
type page struct {
	Title  string
	Nav    string
	CSRF   string
	Flash  string
	User   string
	Stream string // the /events query of the page
	Body   any
}

func (d *Dashboard) newPage(q request, title, nav, stream string, body any) page {
	user := q.id.User
	if q.id.Legacy {
		user = "shared password"
	}
	return page{Title: title, Nav: nav, CSRF: q.sess.csrf, Flash: d.takeFlash(q.sess), User: user, Stream: stream, Body: body}
}

// taskFilter is the Tasks page's filter.
type taskFilter struct {
	Status string
	Agent  string
	// Q keeps the tasks whose request contains it, ignoring case.
	Q string
}

func filterOf(get func(string) string) taskFilter {
	return taskFilter{Status: strings.TrimSpace(get("status")), Agent: strings.TrimSpace(get("agent")), Q: strings.TrimSpace(get("q"))}
}

// query is the filter as a URL query (the page's event stream).
func (f taskFilter) query() string {
	return "status=" + urlq(f.Status) + "&agent=" + urlq(f.Agent) + "&q=" + urlq(f.Q)
}

// keeps reports whether the filter shows r.
func (f taskFilter) keeps(r taskapi.TaskSummary) bool {
	return (f.Status == "" || string(r.Status) == f.Status) && (f.Agent == "" || r.Agent == f.Agent) &&
		(f.Q == "" || strings.Contains(strings.ToLower(r.Request), strings.ToLower(f.Q)))
}

// firstLine is the first non-blank line of s, its spaces collapsed, cut
// to an excerpt: a request as one row of a list shows it.
func firstLine(s string) string {
	for line := range strings.Lines(s) {
		if strings.TrimSpace(line) == "" {
			continue
		}
		out := excerpt(line)
		if strings.TrimSpace(line) != strings.TrimSpace(s) && !strings.HasSuffix(out, "…") {
			out += " …"
		}
		return out
	}
	return ""
}

// taskRow is one row of the Tasks table.
type taskRow struct {
	taskapi.TaskSummary
	Finished bool
}

// tasksBody is the Tasks page.
type tasksBody struct {
	Filter   taskFilter
	Statuses []string
	Agents   []string
	Rows     []taskRow
	Counts   map[string]int
	Total    int
	// Running lists every unfinished task, shown or filtered out: the
	// event stream watches them, since each one's end changes the counts
	// and may bring it into the filter.
	Running []string
}

var allStatuses = []string{"queued", "running", "done", "failed", "blocked", "needs-human", "cancelled"}

func (d *Dashboard) tasksData(ctx context.Context, q request, f taskFilter) (tasksBody, error) {
	rows, err := q.caller.ListTasks(ctx, taskapi.ViewAll)
	if err != nil {
		return tasksBody{}, err
	}
	b := tasksBody{Filter: f, Statuses: allStatuses, Counts: map[string]int{}}
	for _, a := range d.srv.Registry().Agents {
		b.Agents = append(b.Agents, a.ID)
	}
	slices.SortFunc(rows, func(a, b taskapi.TaskSummary) int { return int(b.StartedAt - a.StartedAt) })
	for _, r := range rows {
		b.Counts[string(r.Status)]++
		b.Total++
		fin := finished(r.Status)
		if !fin {
			b.Running = append(b.Running, r.TaskID)
		}
		if !f.keeps(r) {
			continue
		}
		b.Rows = append(b.Rows, taskRow{TaskSummary: r, Finished: fin})
	}
	return b, nil
}

// finished reports whether a list_tasks status is final.
func finished(s taskapi.TaskStatus) bool {
	return s == taskapi.TaskDone || s == taskapi.TaskFailed || s == taskapi.TaskCancelled
}

func (d *Dashboard) tasksPage(w http.ResponseWriter, r *http.Request, q request) {
	f := filterOf(r.URL.Query().Get)
	b, err := d.tasksData(r.Context(), q, f)
	if err != nil {
		d.fail(w, q, err)
		return
	}
	d.render(w, "tasks", d.newPage(q, "Tasks", "tasks", "page=tasks&"+f.query(), b))
}

// taskBody is a task page.
type taskBody struct {
	Task    taskapi.TaskDetail
	Prompt  string
	Logs    []taskapi.LogEntry
	Cursor  int64
	Running bool
	CSRF    string
	// Current is the current attachment record as get_task returns it
	// (JSON); Lineage every record of the task's session, when the
	// dashboard has an AttachmentReader.
	Current string
	Lineage *lineageView
}

// withAttachments fills the attachment part of b from t.
func (d *Dashboard) withAttachments(ctx context.Context, b *taskBody, t taskapi.TaskDetail) {
	if t.AgentSession != nil {
		b.Current = jsonIndent(t.AgentSession)
	}
	b.Lineage = d.lineage(ctx, t.Agent, t.SessionKey, t.TaskID)
}

func (d *Dashboard) taskData(ctx context.Context, q request, id string) (taskBody, error) {
	t, err := q.caller.GetTask(ctx, id, taskapi.DetailFull, 0)
	if err != nil {
		return taskBody{}, err
	}
	b := taskBody{Task: t, Logs: t.Updates, Running: !t.IsTerminal, CSRF: q.sess.csrf}
	if len(b.Logs) > logWindow {
		b.Logs = b.Logs[len(b.Logs)-logWindow:]
	}
	if t.LogCursor != nil {
		b.Cursor = *t.LogCursor
	}
	if p, err := q.caller.GetPrompt(ctx, id); err == nil {
		b.Prompt = p.Prompt.Task
	}
	d.withAttachments(ctx, &b, t)
	return b, nil
}

func (d *Dashboard) taskPage(w http.ResponseWriter, r *http.Request, q request) {
	id := r.PathValue("id")
	b, err := d.taskData(r.Context(), q, id)
	if err != nil {
		d.fail(w, q, err)
		return
	}
	d.render(w, "task", d.newPage(q, "Task "+id, "tasks", "page=task&id="+urlq(id)+fmt.Sprintf("&cursor=%d", b.Cursor), b))
}

// sessionsBody is the Sessions page.
type sessionsBody struct {
	Rows []taskapi.ContinuationState
}

func (d *Dashboard) sessionsData(ctx context.Context, q request) (sessionsBody, error) {
	rows, err := q.caller.ListSessions(ctx)
	return sessionsBody{Rows: rows}, err
}

func (d *Dashboard) sessionsPage(w http.ResponseWriter, r *http.Request, q request) {
	b, err := d.sessionsData(r.Context(), q)
	if err != nil {
		d.fail(w, q, err)
		return
	}
	d.render(w, "sessions", d.newPage(q, "Sessions", "sessions", "page=sessions", b))
}

// fail shows a refused or failed read as a page.
func (d *Dashboard) fail(w http.ResponseWriter, q request, err error) {
	code := http.StatusInternalServerError
	msg := "The task service failed; see the server log."
	if errors.Is(err, server.ErrRefused) {
		code, msg = http.StatusNotFound, strings.TrimPrefix(err.Error(), server.ErrRefused.Error()+": ")
	} else {
		d.o.Logger.Warn("dashboard read", "err", err)
	}
	w.WriteHeader(code)
	d.render(w, "error", d.newPage(q, "Not available", "", "", msg))
}
