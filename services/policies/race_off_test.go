//go:build !race

package policies

// slowdown is how much slower code runs under the race detector, for the
// tests that bound a time.
const slowdown = 1
