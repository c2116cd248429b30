package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/clawconnect/clawconnect/taskapi"
)

// Chart geometry (SVG user units).
const (
	chartW, chartH = 1000.0, 200.0
	chartPad       = 40.0
	chartBuckets   = 12 // five minutes each over the last hour
)

// gateway is one agent's gateway on the Health page.
type gateway struct {
	Agent, URL, State string
}

// bar is one throughput bar of the chart.
type bar struct {
	X, Y, W, H float64
	N          int
	Label      string
}

// dot is one task duration of the chart.
type dot struct {
	X, Y  float64
	Label string
}

// chart is the last hour of finished tasks, laid out for the template.
type chart struct {
	W, H, Pad, Bottom, Right, Mid float64
	Bars                          []bar
	Dots                          []dot
	MaxN                          int
	MaxDur                        string
	Finished                      int
	Median                        string
}

// process is one process sharing the store, on the Health page.
type process struct {
	Role, Host      string
	PID             int64
	Started, LastUp int64
	Tasks           int
}

// healthBody is the Health page.
type healthBody struct {
	Gateways  []gateway
	Runtimes  []string
	Store     string
	Counts    map[string]int
	Processes []process
	ProcErr   string
	Chart     chart
	// Running lists the unfinished tasks (the stream watches them: each
	// one's end changes the counts and the chart).
	Running []string
}

func (d *Dashboard) healthData(ctx context.Context, q request) (healthBody, error) {
	rows, err := q.caller.ListTasks(ctx, taskapi.ViewAll)
	if err != nil {
		return healthBody{}, err
	}
	states := d.srv.GatewayStates()
	b := healthBody{Runtimes: d.o.Runtimes, Store: d.o.StoreInfo, Counts: map[string]int{}}
	for _, a := range d.srv.Registry().Agents {
		st := states[a.ID]
		if st == "" || st == "not_connected_yet" { // dialled on first use: nothing is wrong yet
			st = "not connected yet"
		}
		b.Gateways = append(b.Gateways, gateway{Agent: a.ID, URL: redactURL(a.URL), State: st})
	}
	for _, r := range rows {
		b.Counts[string(r.Status)]++
		if !finished(r.Status) {
			b.Running = append(b.Running, r.TaskID)
		}
	}
	if d.o.Processes != nil {
		ps, err := d.o.Processes.Processes(ctx)
		if err != nil {
			d.o.Logger.Warn("dashboard: list processes", "err", err)
			b.ProcErr = "the store could not list its processes; see the server log"
		}
		for _, p := range ps {
			b.Processes = append(b.Processes, process{Role: p.Role, Host: p.Host, PID: p.PID, Started: p.StartedAt, LastUp: p.HeartbeatAt, Tasks: len(p.Tasks)})
		}
	}
	b.Chart = buildChart(rows, d.o.Now())
	return b, nil
}

// buildChart lays out throughput (tasks finished per five minutes) as bars
// and each finished task's duration as a dot at its end time.
func buildChart(rows []taskapi.TaskSummary, now time.Time) chart {
	c := chart{W: chartW, H: chartH, Pad: chartPad, Bottom: chartH - chartPad, Right: chartW - 8}
	c.Mid = (c.Pad + c.Right) / 2
	start := now.Add(-time.Hour).UnixMilli()
	span := float64(time.Hour.Milliseconds())
	plotW, plotH := c.Right-c.Pad, c.Bottom-8
	counts := make([]int, chartBuckets)
	type fin struct{ end, dur int64 }
	var done []fin
	for _, r := range rows {
		if r.Status != taskapi.TaskDone && r.Status != taskapi.TaskFailed && r.Status != taskapi.TaskCancelled {
			continue
		}
		end := r.EndedAt
		if end == 0 {
			end = r.LastEventAt // a row from before end times were recorded
		}
		if end < start || end > now.UnixMilli() || r.StartedAt == 0 {
			continue
		}
		done = append(done, fin{end, max(end-r.StartedAt, 0)})
		i := min(int(float64(end-start)/span*chartBuckets), chartBuckets-1)
		counts[i]++
	}
	c.Finished = len(done)
	c.MaxN = max(slices.Max(counts), 1)
	bw := plotW / chartBuckets
	for i, n := range counts {
		h := float64(n) / float64(c.MaxN) * plotH
		c.Bars = append(c.Bars, bar{X: c.Pad + float64(i)*bw + 2, Y: c.Bottom - h, W: bw - 4, H: h, N: n,
			Label: fmt.Sprintf("%d finished %d–%d min ago", n, 60-5*i, 55-5*i)})
	}
	var maxDur int64 = 1
	durs := make([]int64, 0, len(done))
	for _, f := range done {
		maxDur = max(maxDur, f.dur)
		durs = append(durs, f.dur)
	}
	c.MaxDur = humanDuration(time.Duration(maxDur) * time.Millisecond)
	if len(durs) > 0 {
		slices.Sort(durs)
		c.Median = humanDuration(time.Duration(durs[len(durs)/2]) * time.Millisecond)
	}
	for _, f := range done {
		c.Dots = append(c.Dots, dot{
			X:     c.Pad + float64(f.end-start)/span*plotW,
			Y:     c.Bottom - float64(f.dur)/float64(maxDur)*plotH,
			Label: "took " + humanDuration(time.Duration(f.dur)*time.Millisecond),
		})
	}
	return c
}

func (d *Dashboard) healthPage(w http.ResponseWriter, r *http.Request, q request) {
	b, err := d.healthData(r.Context(), q)
	if err != nil {
		d.fail(w, q, err)
		return
	}
	d.render(w, "health", d.newPage(q, "Health", "health", "page=health", b))
}

// redactURL drops credentials and query from a gateway URL.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparseable URL)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

func urlq(s string) string { return url.QueryEscape(s) }

func jsonIndent(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
