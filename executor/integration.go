package executor

// HomeKind is how the host provides a runtime's home directory.
type HomeKind string

// Home kinds.
const (
	HomePersistent HomeKind = "persistent" // per identity, kept across runs
	HomeEphemeral  HomeKind = "ephemeral"  // a throwaway directory per run
	HomeConnected  HomeKind = "connected"  // the runtime manages its own (a connected substrate)
)

// IntegrationHome is the home part of an integration plan. Scope is set
// (to HomePerIdentity) only for HomePersistent.
type IntegrationHome struct {
	Kind  HomeKind  `json:"kind"`
	Scope HomeScope `json:"scope,omitempty"`
}

// IntegrationPlan is how the host integrates a runtime, derived from its
// capabilities by ResolveIntegration.
type IntegrationPlan struct {
	Home               IntegrationHome `json:"home"`
	PreserveSkills     bool            `json:"preserveSkills"`
	PreserveMemory     bool            `json:"preserveMemory"`
	UseGatewayChannels bool            `json:"useGatewayChannels"`
	// CoRunScheduler is always false: the host's scheduler owns when to run.
	CoRunScheduler bool `json:"coRunScheduler"`
}

// ResolveIntegration turns capabilities into an integration plan, by data
// and never by runtime id. A connected substrate gets a connected home and
// may use its gateway channels; otherwise the home is persistent only for a
// persisting per-identity claim, and skills or memory are preserved only in
// a persistent home that claims them. Absent claims resolve to the
// conservative one-shot plan.
func ResolveIntegration(c Capabilities) IntegrationPlan {
	if c.Class() == ClassConnectedSubstrate {
		return IntegrationPlan{
			Home:               IntegrationHome{Kind: HomeConnected},
			UseGatewayChannels: c.NativeChannels == ChannelsGateway,
		}
	}
	persistent := c.NativeHome != nil && c.NativeHome.Persist && c.NativeHome.Scope == HomePerIdentity
	if !persistent {
		return IntegrationPlan{Home: IntegrationHome{Kind: HomeEphemeral}}
	}
	return IntegrationPlan{
		Home:           IntegrationHome{Kind: HomePersistent, Scope: HomePerIdentity},
		PreserveSkills: c.NativeSkills == Preserve,
		PreserveMemory: c.NativeMemory == Preserve,
	}
}
