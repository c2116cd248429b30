package dashboard

import (
	"fmt"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/taskapi"
)

// TestSessionCapEvictsLargestHolder: with the logins full in all, a new
// one pushes out a login of whoever holds the most, never the oldest login
// of someone who holds few.
func TestSessionCapEvictsLargestHolder(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := &Dashboard{o: Options{SessionTTL: time.Hour, Now: func() time.Time {
		now = now.Add(time.Millisecond) // every login expires after the one before
		return now
	}}, sessions: map[string]*session{}}
	alice := d.newSession("", taskapi.Identity{User: "alice"}, time.Time{})
	for i := 0; len(d.sessions) < maxSessions; i++ {
		d.newSession("", taskapi.Identity{User: fmt.Sprintf("u%02d", i/maxSessionsPerIdentity)}, time.Time{})
	}
	d.newSession("", taskapi.Identity{User: "newcomer"}, time.Time{})
	if len(d.sessions) != maxSessions {
		t.Fatalf("%d logins held, want the cap %d", len(d.sessions), maxSessions)
	}
	if d.sessions[alice.id] == nil {
		t.Error("alice's one login, the oldest of all, was pushed out by a new identity")
	}
	held := map[string]int{}
	for _, s := range d.sessions {
		held[s.owner.User]++
	}
	lost := 0
	for who, n := range held {
		switch {
		case who == "alice" || who == "newcomer":
			if n != 1 {
				t.Errorf("%s holds %d logins, want 1", who, n)
			}
		case n == maxSessionsPerIdentity-1:
			lost++
		case n != maxSessionsPerIdentity:
			t.Errorf("%s holds %d logins", who, n)
		}
	}
	// The last identity filled the table with one login short of the cap;
	// besides it, exactly one largest holder is one short now.
	if lost != 2 {
		t.Errorf("%d identities hold one login short of the cap, want 2: %v", lost, held)
	}
}
