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

func TestMain(m *testing.M) {
	b, err := proctest.NewBuilder()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	builder = b
	gin.SetMode(gin.ReleaseMode) // the in-process coordinators of reshard_test.go
	leakcheck.VerifyTestMain(m, goleak.Cleanup(func(int) { b.Close() }))
}

// builder is set once by TestMain before any test runs and only read after.
var builder *proctest.Builder

func build(t *testing.T) bins {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out bins
	for pkg, dst := range map[string]*string{
		"github.com/rscoord/rscoord/cmd/rscoord":       &out.coordinator,
		"github.com/rscoord/rscoord/cmd/consumer-pod":  &out.consumer,
		"github.com/rscoord/rscoord/cmd/publisher-pod": &out.publisher,
	} {
		bin, err := builder.Build(ctx, pkg)
		if err != nil {
			t.Fatal(err)
		}
		*dst = bin
	}
	return out
}
