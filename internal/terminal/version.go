package terminal

import (
	"fmt"
	"slices"
	"strings"

	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	"github.com/clawconnect/clawconnect/termapi"
)

// versioned is an agent reader that reads its agent's version and knows
// the versions its session-file and screen readers were proven against by
// recorded goldens (codex.Agent, claude.Agent). A reader that is not
// versioned is not gated.
type versioned interface {
	Version(p agents.Pane) (string, error)
	ProvenVersions() []string
}

// unknownVersion stands for a version that could not be read.
const unknownVersion = "unknown"

// provenance returns the version of p's agent and whether a's readers were
// proven against it. A reader that is not versioned is taken as proven,
// with no version.
func provenance(a agents.Agent, p agents.Pane) (version string, proven bool) {
	v, ok := a.(versioned)
	if !ok {
		return "", true
	}
	version, err := v.Version(p)
	if err != nil || version == "" {
		return unknownVersion, false
	}
	return version, slices.Contains(v.ProvenVersions(), version)
}

// checkVersion refuses a Turn to an agent version the readers were not
// proven against, unless unproven Turns are allowed; it returns the
// version to record as unproven ("" for a proven one).
func (s *Service) checkVersion(a agents.Agent, p agents.Pane) (unproven string, err error) {
	version, proven := provenance(a, p)
	if proven {
		return "", nil
	}
	if !s.o.AllowUnproven {
		return "", fmt.Errorf("%w: the pane runs %s %s, a version the session-file and screen readers were not proven against (proven: %s); "+
			"set CLAWCONNECT_TERMINAL_UNPROVEN=1 to send anyway (the Turn is marked unproven)",
			termapi.ErrRefused, p.Agent, version, strings.Join(a.(versioned).ProvenVersions(), ", "))
	}
	return version, nil
}
