package module

import (
	"testing"

	"github.com/clawconnect/clawconnect/internal/settings"
)

// TestEverySecretSettingIsScrubbed: each variable the settings registry
// marks secret is kept from a module process.
func TestEverySecretSettingIsScrubbed(t *testing.T) {
	t.Parallel()
	for _, s := range settings.All() {
		if s.Secret && !ownSecret(s.Name) {
			t.Errorf("%s is a secret setting but a module would inherit it", s.Name)
		}
	}
}
