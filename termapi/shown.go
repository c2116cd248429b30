package termapi

// ShownStatus is the Turn's status as a person reads it. The status
// waiting_for_openclaw names OpenClaw only when the Turn reports to an
// OpenClaw session; a Turn sent from the command line or by an MCP client
// waits for whoever sent it, so it reads waiting_for_approval (a prompt is
// open) or waiting_for_answer. Code branches on Status, never on this.
func ShownStatus(v TurnView) string {
	if v.Status != TurnWaitingForOpenClaw || v.OriginSession != "" {
		return string(v.Status)
	}
	if v.Approval != nil {
		return "waiting_for_approval"
	}
	return "waiting_for_answer"
}
