package web_test

import (
	"flag"
	"os"
	"runtime"
	"strconv"
	"testing"
)

// TestMain runs three tests per core at once unless -parallel is given.
// Most of this package's tests wait (on a browser, a sweep, a deadline)
// rather than compute: at go test's default of one per core, the two cores
// of a small machine stay two-thirds idle while the package's tests queue.
// The browsers themselves are bounded apart (chromiumSlots).
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", strconv.Itoa(3*runtime.GOMAXPROCS(0))); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
