package proctest_test

import (
	"flag"
	"testing"

	"github.com/rscoord/rscoord/internal/proctest"
)

// DefaultParallel sets -test.parallel when the command line did not; a
// value given on the command line stays.
func TestDefaultParallelKeepsACommandLineValue(t *testing.T) {
	f := flag.Lookup("test.parallel")
	before := f.Value.String()
	t.Cleanup(func() { _ = flag.Set("test.parallel", before) })
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	proctest.DefaultParallel(7)
	want := "7"
	if given {
		want = before
	}
	if got := f.Value.String(); got != want {
		t.Errorf("-test.parallel after DefaultParallel(7): %s, want %s (given on the command line: %v)", got, want, given)
	}
}
