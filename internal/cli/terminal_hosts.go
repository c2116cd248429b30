package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/clawconnect/clawconnect/internal/config"
	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/termapi"
)

// terminalHost returns this machine's terminal host name and sealing key
// when the store is shared PostgreSQL, which other machines may share:
// panes are then named by terminal ids carrying the host. A SQLite store
// belongs to one machine and needs neither.
func terminalHost(env Env) (string, []byte, error) {
	sv := settingsOf(env)
	if sv.DatabaseURL == "" {
		return "", nil, nil
	}
	host := sv.TerminalHost // checked as the settings were read
	if host == "" {
		var err error
		if host, err = terminal.HostName(); err != nil {
			return "", nil, fmt.Errorf("terminal host: %w; set CLAWCONNECT_TERMINAL_HOST to a name of letters, digits, '.', '-' and '_', or give the machine such a host name", err)
		}
	}
	key, err := terminal.LoadHostKey(sv.Home)
	if err != nil {
		return "", nil, fmt.Errorf("terminal host: %w", err)
	}
	return host, key, nil
}

// callbackRoute returns which callbacks this process's outbox delivers
// (outbox.Options.Delivers). On a single machine's store, every
// one. With hosts on several machines, only those recorded for a gateway
// this host is configured with — the callback gateway, OPENCLAW_URL, an
// agents.json agent — so a host that cannot reach the origin's gateway
// never claims a callback and spends its attempts; a host with none
// configured delivers only to the local default gateway.
func callbackRoute(env Env, hostMode bool) func(gatewayURL string) bool {
	if !hostMode {
		return nil
	}
	var urls []string
	if u := configuredCallbackGateway(env); u != "" {
		urls = append(urls, u)
	}
	if u := settingsOf(env).OpenClawURL; u != "" {
		urls = append(urls, u)
	}
	if r, err := config.LoadRegistry(settingsOf(env)); err == nil {
		for _, a := range r.Agents {
			if a.URL != "" {
				urls = append(urls, a.URL)
			}
		}
	}
	if len(urls) == 0 {
		urls = []string{DefaultGatewayURL}
	}
	return func(gatewayURL string) bool {
		if gatewayURL == "" {
			return true // this host's own callback gateway, as the dialler reads it
		}
		return slices.ContainsFunc(urls, func(u string) bool { return sameGatewayURL(u, gatewayURL) })
	}
}

// hostLiveHere reports whether a long-lived monitor host follows this
// machine's Turns: with hosts on several machines, only one on this
// machine can.
func hostLiveHere(ctx context.Context, st any, svc *terminal.Service) bool {
	if svc.HostName() == "" {
		return hostLive(ctx, st)
	}
	hosts, err := svc.Hosts(ctx)
	if err != nil {
		return false
	}
	for _, h := range hosts {
		if h.Self && h.Live {
			return hostLive(ctx, st)
		}
	}
	return false
}

// hostList is `terminal list --json` with hosts on several machines: this
// host's rows as List returns them, and every host published in the store
// with its liveness and the panes it last published.
type hostList struct {
	Host      string                `json:"host"`
	Terminals []termapi.TerminalRow `json:"terminals"`
	Hosts     []hostpkg.View        `json:"hosts"`
}

// printHostList prints the panes of every terminal host, grouped by host;
// this host's own rows are the ones just listed.
func printHostList(ctx context.Context, env Env, svc *terminal.Service, res termapi.ListResult, asJSON bool) error {
	hosts, err := svc.Hosts(ctx)
	if err != nil {
		return err
	}
	out := hostList{Terminals: res.Terminals, Hosts: hosts}
	for i, h := range hosts {
		if h.Self {
			out.Host = h.Host
			out.Hosts[i].Terminals = res.Terminals
		}
	}
	if asJSON {
		return printJSON(env.Stdout, out)
	}
	for i, h := range out.Hosts {
		if i > 0 {
			fmt.Fprintln(env.Stdout)
		}
		state := "live"
		if !h.Live {
			state = "away: its panes take no operation until it returns"
		}
		self := ""
		if h.Self {
			self = ", this machine"
		}
		fmt.Fprintf(env.Stdout, "host %s (%s%s; last heartbeat %s)\n", h.Host, state, self, h.LastHeartbeat)
		printTerminalRows(env.Stdout, h.Terminals)
	}
	if len(out.Hosts) == 0 {
		printTerminalRows(env.Stdout, res.Terminals)
	}
	return nil
}

// listTerminalHosts is one verdict per terminal host published in the
// store (hosts on several machines): its liveness, last heartbeat and
// panes. A host that is away is reported, not failed: a laptop that
// sleeps is normal, and its Turns say host_lost themselves.
func listTerminalHosts(ctx context.Context, hs store.TerminalHosts, now time.Time) []verdict {
	list, err := hs.TerminalHostList(ctx)
	if err != nil {
		return []verdict{{area: "terminal hosts", detail: err.Error(), fix: "The store answered but this table did not; retry."}}
	}
	var vs []verdict
	for _, h := range hostpkg.Views(list, "", now) {
		state := "live"
		if !h.Live {
			state = "away (its panes take no operation and its open Turns stall host_lost until it returns)"
		}
		panes := make([]string, 0, len(h.Terminals))
		for _, r := range h.Terminals {
			panes = append(panes, r.ID+" "+r.ActivityState)
		}
		detail := fmt.Sprintf("host %s: %s, last heartbeat %s, %d pane(s)", h.Host, state, h.LastHeartbeat, len(panes))
		if len(panes) > 0 {
			detail += ": " + strings.Join(panes, "; ")
		}
		vs = append(vs, verdict{ok: true, area: "terminal hosts", detail: detail})
	}
	return vs
}
