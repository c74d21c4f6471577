package proctest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/rscoord/rscoord/internal/proctest"
)

// BuildAll builds several commands in one go build, each binary once:
// asked again, it gives back the same paths without building.
func TestBuildAllBuildsEachCommandOnce(t *testing.T) {
	b, err := proctest.NewBuilder()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const greet, waitterm = "github.com/rscoord/rscoord/internal/proctest/testdata/greet",
		"github.com/rscoord/rscoord/internal/proctest/testdata/waitterm"
	bins, err := b.BuildAll(t.Context(), greet, waitterm)
	if err != nil {
		t.Fatal(err)
	}
	again, err := b.Build(t.Context(), waitterm)
	if err != nil || again != bins[1] {
		t.Fatalf("Build of a built command: %q, %v; want %q", again, err, bins[1])
	}

	g := proctest.Start(t, "greet", bins[0], []string{"proctest"})
	if err := g.Wait(time.Minute); err != nil {
		t.Fatal(err)
	}
	if out := g.Output(); out != "hello proctest" {
		t.Errorf("greet printed %q", out)
	}

	w := proctest.Start(t, "waitterm", bins[1], nil)
	if _, err := w.WaitForLine(time.Minute, func(l string) bool { return l == "ready" }); err != nil {
		t.Fatal(err)
	}
	if err := w.Stop(time.Minute); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if !w.Exited() || !strings.HasSuffix(w.Output(), "stopping") {
		t.Errorf("after Stop: exited %v, output %q", w.Exited(), w.Output())
	}
}
