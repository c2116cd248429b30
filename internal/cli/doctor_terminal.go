package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
)

// terminalWork is the part of the store doctor reads about terminal Turns:
// the open ones, who holds each one's monitor lease, and who is alive.
type terminalWork interface {
	Processes(ctx context.Context) ([]store.Process, error)
	OpenTurns(ctx context.Context, limit int) ([]*store.Turn, error)
	MonitorLease(ctx context.Context, turnID string) (store.MonitorLease, error)
}

// checkTerminalWork is one verdict per open Turn saying which process
// follows it (the holder of its monitor lease), and a failing one when
// open Turns have no live host at all: nothing then records their
// replies, approval prompts or callbacks.
func checkTerminalWork(ctx context.Context, db terminalWork, hostRuns bool, now time.Time) []verdict {
	turns, err := db.OpenTurns(ctx, store.MaxPage)
	if err != nil {
		return []verdict{{area: "terminal", detail: "open terminal Turns: " + err.Error(), fix: "The store answered but its Turn table did not; retry."}}
	}
	if len(turns) == 0 {
		return nil
	}
	ps, err := db.Processes(ctx)
	if err != nil {
		return []verdict{{area: "terminal", detail: "process registry: " + err.Error(), fix: "The store answered but its process registry did not; retry."}}
	}
	live := map[string]store.Process{}
	for _, p := range ps {
		if now.Sub(time.UnixMilli(p.HeartbeatAt)) <= staleAfter {
			live[p.ID] = p
		}
	}
	var vs []verdict
	var unfollowed []string
	for _, t := range turns {
		l, err := db.MonitorLease(ctx, t.TurnID)
		if err != nil || l.Until < now.UnixMilli() {
			unfollowed = append(unfollowed, t.TurnID+" ("+t.Status+")")
			continue
		}
		by := "process " + l.Owner + " (not registered as live; another host takes the Turn when its lease ends)"
		switch p, ok := live[l.Owner]; {
		case ok:
			by = fmt.Sprintf("%s pid %d", p.Role, p.PID)
		case strings.HasPrefix(l.Owner, "send-"):
			by = "the command sending it"
		}
		vs = append(vs, verdict{ok: true, area: "terminal", detail: fmt.Sprintf("turn %s (%s) is followed by %s", t.TurnID, t.Status, by)})
	}
	if len(unfollowed) == 0 {
		return vs
	}
	shown := strings.Join(unfollowed[:min(len(unfollowed), 5)], ", ")
	if len(unfollowed) > 5 {
		shown += ", …"
	}
	if hostRuns {
		return append(vs, verdict{ok: true, area: "terminal", detail: fmt.Sprintf(
			"%d open Turn(s) not followed right now: %s; a live monitor host takes them at its next rescan", len(unfollowed), shown)})
	}
	return append(vs, verdict{area: "terminal", detail: fmt.Sprintf(
		"%d open Turn(s) have no live monitor host: %s; nothing records their replies, approval prompts or callbacks", len(unfollowed), shown),
		fix: "Start one with this CLAWCONNECT_HOME: clawconnect terminal daemon (or clawconnect serve); it takes them over at once."})
}
