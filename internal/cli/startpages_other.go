//go:build !linux

package cli

// releaseStartPages does nothing where the binary's mappings cannot be
// listed.
func releaseStartPages() {}
