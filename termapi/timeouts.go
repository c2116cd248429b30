package termapi

import (
	"fmt"
	"time"
)

// MaxTurnTimeout bounds a send's own timeouts: a week, as renew's.
const MaxTurnTimeout = 7 * 24 * time.Hour

// CheckTimeouts checks a send's own timeouts (zero: the service's
// default): neither negative nor over MaxTurnTimeout, and an inactivity
// timeout no longer than the hard one, which would make it moot.
func CheckTimeouts(r SendRequest) error {
	for _, l := range []struct {
		name string
		d    time.Duration
	}{{"inactivity timeout", r.InactivityTimeout}, {"hard timeout", r.HardTimeout}} {
		if l.d < 0 || l.d > MaxTurnTimeout {
			return fmt.Errorf("%w: the %s %s is out of range: give more than 0 and at most %g minutes, or leave it out for the default",
				ErrBadInput, l.name, l.d, MaxTurnTimeout.Minutes())
		}
	}
	if r.InactivityTimeout > 0 && r.HardTimeout > 0 && r.InactivityTimeout > r.HardTimeout {
		return fmt.Errorf("%w: the inactivity timeout %s is longer than the hard timeout %s, which would always end the Turn first; shorten the inactivity timeout or lengthen the hard one",
			ErrBadInput, r.InactivityTimeout, r.HardTimeout)
	}
	return nil
}
