package server

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics holds one Server's Prometheus collectors in a private registry,
// so several Servers in one process never collide. Only the latency
// histogram exists from the start; the registry, with the Go runtime and
// process collectors, is built on the first call of handler. The stdio
// server never serves /metrics, so it never pays for them (about a
// millisecond and 250 allocations on the path to the initialize answer).
type metrics struct {
	reg      func() *prometheus.Registry
	latency  *prometheus.HistogramVec
	tasksSrc Tasks
}

var (
	tasksDesc   = prometheus.NewDesc("clawconnect_tasks", "Tasks known to the store, by status.", []string{"status"}, nil)
	gatewayDesc = prometheus.NewDesc("clawconnect_gateway_connection", "Gateway connection state per agent (1 for the current state).", []string{"agent", "state"}, nil)
)

func newMetrics(tasks Tasks) *metrics {
	m := &metrics{
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "clawconnect_tool_call_duration_seconds",
			Help:    "Duration of MCP tools/call requests, by tool and outcome (ok, tool_error, protocol_error).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
		}, []string{"tool", "outcome"}),
		tasksSrc: tasks,
	}
	m.reg = sync.OnceValue(func() *prometheus.Registry {
		reg := prometheus.NewRegistry()
		reg.MustRegister(m.latency, m, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		return reg
	})
	return m
}

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- tasksDesc
	ch <- gatewayDesc
}

// Collect implements prometheus.Collector: it asks the task service for its
// counts at scrape time.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	if c, ok := m.tasksSrc.(StatusCounter); ok {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		counts, err := c.CountByStatus(ctx)
		cancel()
		if err == nil {
			for status, n := range counts {
				ch <- prometheus.MustNewConstMetric(tasksDesc, prometheus.GaugeValue, float64(n), status)
			}
		}
	}
	if g, ok := m.tasksSrc.(GatewayStater); ok {
		for agent, state := range g.GatewayStates() {
			ch <- prometheus.MustNewConstMetric(gatewayDesc, prometheus.GaugeValue, 1, agent, state)
		}
	}
}

// knownTools are the tool names used as metric labels.
var knownTools = map[string]bool{
	"run_task": true, "check_task": true, "get_task": true, "list_tasks": true, "get_session": true,
	"list_sessions": true, "cancel_task": true, "list_agents": true, "get_connection_info": true,
}

// middleware times tools/call requests.
func (m *metrics) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/call" {
			return next(ctx, method, req)
		}
		start := time.Now()
		res, err := next(ctx, method, req)
		tool := "unknown"
		if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && p != nil && knownTools[p.Name] {
			tool = p.Name // unknown names stay "unknown" to bound label cardinality
		}
		outcome := "ok"
		if err != nil {
			outcome = "protocol_error"
		} else if r, ok := res.(*mcp.CallToolResult); ok && r.IsError {
			outcome = "tool_error"
		}
		m.latency.WithLabelValues(tool, outcome).Observe(time.Since(start).Seconds())
		return res, err
	}
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg(), promhttp.HandlerOpts{})
}
