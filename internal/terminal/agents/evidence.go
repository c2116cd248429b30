package agents

import (
	"encoding/json"
	"errors"

	"github.com/clawconnect/clawconnect/internal/terminal/native"
)

// Evidence is what an Agent's Accepted (and a TaskFinder's StartedTask)
// returns as Acceptance.Evidence: the anchor the scans continue from
// (bound or materialized since the send) and the native acceptance. Every
// anchor records its session file as "path" and its start as
// "offset_bytes", which the service reports without knowing the agent.
type Evidence struct {
	Anchor     json.RawMessage   `json:"anchor"`
	Acceptance native.Acceptance `json:"acceptance"`
}

// AnchorOf returns the anchor inside raw, which is either an anchor or an
// Evidence record.
func AnchorOf(raw json.RawMessage) json.RawMessage {
	var ev Evidence
	if json.Unmarshal(raw, &ev) == nil && len(ev.Anchor) > 0 {
		return ev.Anchor
	}
	return raw
}

// ChangedIsInput turns a session file replaced or truncated since the
// checkpoint into found input (the context the checkpoint named is gone),
// final like any other answer of the cursor: the answer of an
// InputResumer.
func ChangedIsInput(cur native.Cursor, err error) (native.Cursor, error) {
	var se *native.ScanError
	if errors.As(err, &se) && (se.Code == native.CodeIdentityMismatch || se.Code == native.CodeTruncated) {
		cur.Found, cur.Err = true, nil
		return cur, nil
	}
	return cur, err
}
