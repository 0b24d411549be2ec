//go:build !race

package main_test

// raceEnabled: under `go test -race` the binary the tests run is built with
// the race detector too.
const raceEnabled = false
