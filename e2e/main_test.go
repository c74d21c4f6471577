package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/goleak"

	"github.com/rscoord/rscoord/internal/leakcheck"
	"github.com/rscoord/rscoord/internal/proctest"
)

// bins builds the commands the tests run, once for the whole test binary.
type bins struct {
	coordinator, consumer, publisher string
}

// The tests run in parallel (each with its own Redis, coordinator and
// ports), three at a time unless -parallel says otherwise: most of their
// time is spent waiting for leases, publishers and hand-offs, and the
// processes they run are built without -race. The ones whose checks are
// timings (TestChaos's recovery budgets,
// TestPodJoinConvergesWithinRoundTrips, TestHeldHeartbeatsBlackBox) stay
// serial, and so run alone, before the parallel ones.
func TestMain(m *testing.M) {
	proctest.DefaultParallel(3)
	b, err := proctest.NewBuilder()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	builder = b
	gin.SetMode(gin.ReleaseMode) // the in-process coordinators of reshard_test.go
	leakcheck.VerifyTestMain(m, goleak.Cleanup(func(code int) { b.Close(); os.Exit(code) }))
}

// builder is set once by TestMain before any test runs and only read after.
var builder *proctest.Builder

func build(t *testing.T) bins {
	t.Helper()
	// One go build for the three (they share most packages). A first
	// build on a loaded machine takes minutes: the bound is for a build
	// that hangs, not a slow one.
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	b, err := builder.BuildAll(ctx, "github.com/rscoord/rscoord/cmd/rscoord",
		"github.com/rscoord/rscoord/cmd/consumer-pod", "github.com/rscoord/rscoord/cmd/publisher-pod")
	if err != nil {
		t.Fatal(err)
	}
	return bins{coordinator: b[0], consumer: b[1], publisher: b[2]}
}
