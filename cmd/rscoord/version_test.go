package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rscoord/rscoord/internal/version"
)

// TestVersionCommandAndFlagNameTheBuild checks that `rscoord version` and
// --version print the build's version and revision, never "devel".
func TestVersionCommandAndFlagNameTheBuild(t *testing.T) {
	build := version.Get()
	for _, args := range [][]string{{"version"}, {"--version"}} {
		res := runCLI(context.Background(), args...)
		want := "rscoord " + build.Version + " (revision " + build.Short()
		if res.code != exitOK || !strings.HasPrefix(res.stdout, want) || strings.Contains(res.stdout, "devel") {
			t.Errorf("%v: %+v, want a line starting %q", args, res, want)
		}
	}
}

// TestVersionPlainBuildReadsVersionFile builds the binary as `go build`
// does, without -ldflags: its --version is the VERSION file's release.
func TestVersionPlainBuildReadsVersionFile(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin, err := builder.Build(ctx, "github.com/rscoord/rscoord/cmd/rscoord")
	if err != nil {
		t.Fatal(err)
	}
	release, err := os.ReadFile("../../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		t.Fatalf("--version: %v", err)
	}
	if want := "rscoord " + strings.TrimSpace(string(release)) + " ("; !strings.HasPrefix(string(out), want) {
		t.Errorf("--version of a plain build: %q, want it to start %q", out, want)
	}
}
