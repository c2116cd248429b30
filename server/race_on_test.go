//go:build race

package server_test

// raceEnabled reports whether the race detector is on; load tests scale
// down under it.
const raceEnabled = true
