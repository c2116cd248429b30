package outbox

import (
	"encoding/json"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/termapi"
)

// View is the delivery state of a callback row, as a Turn's or a watch's
// view shows it.
func View(cb *store.Callback) termapi.CallbackView {
	var m struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(cb.Message, &m)
	v := termapi.CallbackView{MessageID: cb.MessageID, Type: m.Type, Kind: cb.Kind, SessionKey: cb.SessionKey, Status: cb.Status,
		Attempts: cb.Attempts, LastError: cb.LastError, DeliveredAt: stamp(cb.DeliveredAt), Injection: evidenceObject(cb.Injection),
		Wake: evidenceObject(cb.Wake), RunObservation: evidenceObject(cb.RunObservation)}
	if cb.Status == termapi.CallbackPending || cb.Status == termapi.CallbackFailed {
		v.NextAttemptAt = stamp(cb.NextAttemptAt)
	}
	return v
}

// evidenceObject decodes a recorded evidence object; anything else reads as
// absent.
func evidenceObject(raw json.RawMessage) map[string]any {
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return m
}

// stamp formats a stored time for a view: RFC 3339 in UTC, "" for none.
func stamp(ms int64) string {
	if ms == 0 {
		return ""
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
}
