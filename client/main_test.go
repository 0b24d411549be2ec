package client_test

import (
	"flag"
	"os"
	"testing"
)

// TestMain lets more tests run at once than there are CPUs (go test's
// default), unless -parallel is given: these tests spend their time waiting
// on leases, backoff and the network, not computing, and on a 2-CPU machine
// the default makes the package take much longer (docs/benchmarks.md,
// "Test suites").
func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		_ = flag.Set("test.parallel", "16")
	}
	os.Exit(m.Run())
}
