package executor

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The capability matrix of the reference runtimes and the plan each resolves to.
func TestResolveIntegration(t *testing.T) {
	perIdentity := &NativeHomeClaim{Scope: HomePerIdentity, Persist: true}
	tests := []struct {
		name string
		caps Capabilities
		want IntegrationPlan
	}{
		{"openclaw", Capabilities{RuntimeClass: ClassConnectedSubstrate, NativeSkills: Preserve, NativeMemory: Preserve, NativeChannels: ChannelsGateway, NativeScheduler: true},
			IntegrationPlan{Home: IntegrationHome{Kind: HomeConnected}, UseGatewayChannels: true}},
		{"claude-code", Capabilities{RuntimeClass: ClassWrappedOneshot, NativeSkills: PreserveNone, NativeMemory: PreserveNone, NativeChannels: ChannelsNone},
			IntegrationPlan{Home: IntegrationHome{Kind: HomeEphemeral}}},
		{"codex", Capabilities{RuntimeClass: ClassWrappedOneshot, NativeHome: perIdentity, NativeSkills: PreserveNone, NativeMemory: PreserveNone},
			IntegrationPlan{Home: IntegrationHome{Kind: HomePersistent, Scope: HomePerIdentity}}},
		{"hermes", Capabilities{RuntimeClass: ClassWrappedOneshot, NativeHome: perIdentity, NativeSkills: Preserve, NativeMemory: Preserve},
			IntegrationPlan{Home: IntegrationHome{Kind: HomePersistent, Scope: HomePerIdentity}, PreserveSkills: true, PreserveMemory: true}},
		{"native", Capabilities{RuntimeClass: ClassNative, NativeHome: perIdentity, NativeSkills: PreserveNone, NativeMemory: Preserve},
			IntegrationPlan{Home: IntegrationHome{Kind: HomePersistent, Scope: HomePerIdentity}, PreserveMemory: true}},
		{"no seam at all", Capabilities{NativeSkills: Preserve, NativeChannels: ChannelsGateway},
			IntegrationPlan{Home: IntegrationHome{Kind: HomeEphemeral}}},
		{"per-run home", Capabilities{NativeHome: &NativeHomeClaim{Scope: HomePerRun, Persist: true}, NativeSkills: Preserve},
			IntegrationPlan{Home: IntegrationHome{Kind: HomeEphemeral}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, ResolveIntegration(tt.caps)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCapabilitiesClassDefault(t *testing.T) {
	if got := (Capabilities{}).Class(); got != ClassWrappedOneshot {
		t.Errorf("Class() = %q, want %q", got, ClassWrappedOneshot)
	}
}
