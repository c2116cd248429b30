package module

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/clawconnect/clawconnect/agentsession"
)

// LoadOptions configures [Load]. The zero value is valid.
type LoadOptions struct {
	// Dir resolves relative executable paths; empty means the process's
	// working directory.
	Dir string
	// Logger receives load results and each module's stderr, one record per
	// line with the module name as prefix and as attribute "module". Nil
	// discards.
	Logger *slog.Logger
	// Env is the environment of the module processes; nil inherits the
	// process's environment. Either way ClawConnect's own secrets
	// (OPENCLAW_PASSWORD, OPENCLAW_GATEWAY_TOKEN, MCP_USER_TOKENS,
	// PUBLIC_MCP_PASS and the like) are removed before a module starts.
	Env []string
	// DescribeTimeout bounds a module's answer to describe; zero means 10 s.
	DescribeTimeout time.Duration
	// MaxLineBytes bounds one line a module writes to stdout; a longer line
	// is a protocol violation that stops the module (it restarts on the next
	// call). Zero means 4 MiB.
	MaxLineBytes int
	// RestartBackoff is the delay before restarting a module after its first
	// failure, doubling with each further failure up to 30 s and reset by a
	// successful call; each delay is drawn from its upper half, so modules
	// that failed together do not restart in step. Zero means 500 ms.
	RestartBackoff time.Duration
}

// Loaded is the set of modules a [Load] started. Its Close stops them.
type Loaded struct {
	clients  []*moduleClient
	runtimes []string
	once     sync.Once
}

// Runtimes returns the ids of the runtimes registered by the modules, in
// load order.
func (l *Loaded) Runtimes() []string {
	if l == nil {
		return nil
	}
	return append([]string(nil), l.runtimes...)
}

// Close stops every module: it closes each module's stdin, waits up to 2 s
// for it to exit, then kills its process group, and waits for the loader's
// goroutines. The runtimes stay registered; their calls then fail with
// <op>_failed. Close is idempotent and safe on a nil *Loaded.
func (l *Loaded) Close() {
	if l == nil {
		return
	}
	l.once.Do(func() {
		var wg sync.WaitGroup
		for _, c := range l.clients {
			wg.Go(c.close)
		}
		wg.Wait()
	})
}

// entry is one parsed item of the module list.
type entry struct {
	spec string // as written
	path string // resolved executable
	args []string
}

// parseSpec splits the module list on commas and newlines; each item is an
// executable path followed by optional space-separated arguments. Relative
// paths are resolved against dir.
func parseSpec(spec, dir string) []entry {
	var out []entry
	for _, item := range strings.FieldsFunc(spec, func(r rune) bool { return r == ',' || r == '\n' }) {
		fields := strings.Fields(item)
		if len(fields) == 0 {
			continue
		}
		path := fields[0]
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		out = append(out, entry{spec: strings.TrimSpace(item), path: path, args: fields[1:]})
	}
	return out
}

// Load starts the runtime modules named by spec (the value of [EnvVar]),
// registers a proxy for each runtime they describe into reg, and returns
// them. It never fails: an empty spec registers nothing and starts nothing;
// a module that cannot be started, does not answer describe within the
// timeout, answers badly, or describes no valid runtime is logged and
// skipped. reg must not be nil. Modules are started concurrently; ctx bounds the start-up only,
// not the modules' life, which ends with [Loaded.Close].
//
// Each proxy's capabilities are the operations the module listed; an
// operation not listed is never sent. Calls to one module are concurrent
// (multiplexed by request id). When a call's context ends, the module gets a
// cancel notification and a late answer is discarded. A module that exits
// fails its in-flight calls and is restarted on the next call, with
// backoff. A runtime id served by several modules is registered by the last
// one (logged).
func Load(ctx context.Context, spec string, reg *agentsession.Registry, opts LoadOptions) *Loaded {
	cfg := &config{
		log:             opts.Logger,
		env:             moduleEnv(opts.Env),
		describeTimeout: opts.DescribeTimeout,
		maxLine:         opts.MaxLineBytes,
		backoff:         opts.RestartBackoff,
		maxBackoff:      30 * time.Second,
	}
	if cfg.log == nil {
		cfg.log = slog.New(slog.DiscardHandler)
	}
	if cfg.describeTimeout <= 0 {
		cfg.describeTimeout = 10 * time.Second
	}
	if cfg.maxLine <= 0 {
		cfg.maxLine = 4 << 20
	}
	if cfg.backoff <= 0 {
		cfg.backoff = 500 * time.Millisecond
	}
	dir := opts.Dir
	if dir == "" {
		dir, _ = os.Getwd()
	}
	entries := parseSpec(spec, dir)
	l := &Loaded{}
	if len(entries) == 0 {
		return l
	}
	if reg == nil {
		cfg.log.Error("[agent-session] runtime modules configured but no registry given; nothing loaded")
		return l
	}

	type started struct {
		c    *moduleClient
		p    *proc
		desc describeResult
		err  error
	}
	results := make([]started, len(entries))
	names := map[string]int{}
	var wg sync.WaitGroup
	for i, e := range entries {
		name := filepath.Base(e.path)
		names[name]++
		if n := names[name]; n > 1 {
			name = fmt.Sprintf("%s#%d", name, n)
		}
		c := newModuleClient(name, e.path, e.args, cfg)
		wg.Go(func() {
			p, desc, err := c.start(ctx)
			results[i] = started{c: c, p: p, desc: desc, err: err}
		})
	}
	wg.Wait()

	owner := map[string]string{}
	for i, r := range results {
		if r.err != nil {
			cfg.log.Error(fmt.Sprintf("[agent-session] failed to load runtime module %q: %v", entries[i].spec, r.err), "module", r.c.name)
			r.c.close()
			continue
		}
		r.c.mu.Lock()
		r.c.cur = r.p
		r.c.mu.Unlock()
		r.c.setServed(r.desc)
		l.clients = append(l.clients, r.c)
		for _, d := range r.desc.Runtimes {
			if err := reg.Register(proxy(r.c, d)); err != nil {
				cfg.log.Error("[agent-session] could not register runtime", "module", r.c.name, "runtime", d.ID, "err", err)
				continue
			}
			if prev, ok := owner[d.ID]; ok {
				cfg.log.Warn("[agent-session] runtime registered by two modules; the later one wins", "runtime", d.ID, "module", r.c.name, "replaced", prev)
			} else {
				l.runtimes = append(l.runtimes, d.ID)
			}
			owner[d.ID] = r.c.name
		}
	}
	if len(l.runtimes) == 0 {
		cfg.log.Warn("[agent-session] no runtime registered from " + EnvVar)
	} else {
		cfg.log.Info("[agent-session] registered runtime(s): " + strings.Join(l.runtimes, ", "))
	}
	return l
}

// proxy builds the registry entry forwarding to module c for runtime d.
func proxy(c *moduleClient, d describeRuntime) agentsession.Runtime {
	ops, _ := operationsOf(d.Operations)
	id := d.ID
	rt := agentsession.Runtime{
		ID:       id,
		Provider: d.Provider,
		Inspect: func(ctx context.Context, ref agentsession.Ref) (*agentsession.Observation, error) {
			return c.invoke(ctx, id, agentsession.OpInspect, ref, "", "")
		},
	}
	if ops[agentsession.OpContinue] {
		rt.Continue = func(ctx context.Context, ref agentsession.Ref, prompt string) (*agentsession.Observation, error) {
			return c.invoke(ctx, id, agentsession.OpContinue, ref, prompt, "")
		}
	}
	if ops[agentsession.OpDetach] {
		rt.Detach = func(ctx context.Context, ref agentsession.Ref, reason string) (*agentsession.Observation, error) {
			return c.invoke(ctx, id, agentsession.OpDetach, ref, "", reason)
		}
	}
	return rt
}
