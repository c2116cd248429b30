package ids

import (
	"errors"
	"strings"
	"testing"

	"github.com/clawconnect/clawconnect/termapi"
)

func TestMalformedIDSaysWhereToFindOne(t *testing.T) {
	for _, tt := range []struct{ kind, prefix, id, want string }{
		{"watch id", "watch-", "turn-x", "terminal watch"},
		{"transition id", "transition-", "x", "new-thread"},
		{"turn id", "turn-", "watch-x", "terminal list"},
	} {
		err := Check(tt.kind, tt.prefix, tt.id)
		if !errors.Is(err, termapi.ErrBadInput) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Check(%s, %q) = %v, want a hint naming %q", tt.kind, tt.id, err, tt.want)
		}
	}
}
