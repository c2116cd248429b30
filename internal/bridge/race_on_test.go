//go:build race

package bridge_test

// raceEnabled reports whether the race detector is on; the load tests scale
// down under it.
const raceEnabled = true
