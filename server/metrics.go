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
// so several Servers in one process never collide. Nothing is built until
// it is needed: the latency histogram on the first tools/call, the
// registry (with the Go runtime and process collectors) and the task and
// gateway descriptions on the first call of handler. The stdio server never
// serves /metrics, so it never pays for the registry (about a millisecond
// and 250 allocations), and nothing Prometheus does runs before a fresh
// process answers initialize.
type metrics struct {
	reg      func() *prometheus.Registry
	latency  func() *prometheus.HistogramVec
	descs    func() metricDescs
	tasksSrc Tasks
}

// metricDescs describe the gauges that metrics collects at scrape time.
type metricDescs struct {
	tasks, gateway *prometheus.Desc
}

func newMetrics(tasks Tasks) *metrics {
	m := &metrics{tasksSrc: tasks}
	m.latency = sync.OnceValue(func() *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "clawconnect_tool_call_duration_seconds",
			Help:    "Duration of MCP tools/call requests, by tool and outcome (ok, tool_error, protocol_error).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
		}, []string{"tool", "outcome"})
	})
	m.descs = sync.OnceValue(func() metricDescs {
		return metricDescs{
			tasks:   prometheus.NewDesc("clawconnect_tasks", "Tasks known to the store, by status.", []string{"status"}, nil),
			gateway: prometheus.NewDesc("clawconnect_gateway_connection", "Gateway connection state per agent (1 for the current state).", []string{"agent", "state"}, nil),
		}
	})
	m.reg = sync.OnceValue(func() *prometheus.Registry {
		reg := prometheus.NewRegistry()
		reg.MustRegister(m.latency(), m, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		return reg
	})
	return m
}

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	d := m.descs()
	ch <- d.tasks
	ch <- d.gateway
}

// Collect implements prometheus.Collector: it asks the task service for its
// counts at scrape time.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	d := m.descs()
	if c, ok := m.tasksSrc.(StatusCounter); ok {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		counts, err := c.CountByStatus(ctx)
		cancel()
		if err == nil {
			for status, n := range counts {
				ch <- prometheus.MustNewConstMetric(d.tasks, prometheus.GaugeValue, float64(n), status)
			}
		}
	}
	if g, ok := m.tasksSrc.(GatewayStater); ok {
		for agent, state := range g.GatewayStates() {
			ch <- prometheus.MustNewConstMetric(d.gateway, prometheus.GaugeValue, 1, agent, state)
		}
	}
}

// knownTool reports whether name is one of the tool names used as metric
// labels.
func knownTool(name string) bool {
	switch name {
	case "run_task", "check_task", "get_task", "list_tasks", "get_session",
		"list_sessions", "cancel_task", "list_agents", "get_connection_info":
		return true
	}
	return false
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
		if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && p != nil && knownTool(p.Name) {
			tool = p.Name // unknown names stay "unknown" to bound label cardinality
		}
		outcome := "ok"
		if err != nil {
			outcome = "protocol_error"
		} else if r, ok := res.(*mcp.CallToolResult); ok && r.IsError {
			outcome = "tool_error"
		}
		m.latency().WithLabelValues(tool, outcome).Observe(time.Since(start).Seconds())
		return res, err
	}
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg(), promhttp.HandlerOpts{})
}
