// Package version says which build of rscoord runs: the release version
// and the commit it was built from.
//
// A release build stamps both with the linker:
//
//	go build -ldflags "-X github.com/rscoord/rscoord/internal/version.version=v0.1.0 \
//	    -X github.com/rscoord/rscoord/internal/version.revision=<commit>"
//
// The Taskfile's build and image tasks and the Dockerfile do that, from
// `git describe --tags --always --dirty` when there is a repository. A plain
// `go build` stamps nothing; then the version is the VERSION file at the
// repository root (embedded at build time) and the revision is the one the
// go command records from the checkout, if any.
package version

import (
	"fmt"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/rscoord/rscoord"
)

// Set by the linker (-X); empty when the build did not stamp them. They are
// variables only because -X can set nothing else; nothing assigns them.
var (
	version  string
	revision string
)

// Unknown is the revision of a build that recorded none.
const Unknown = "unknown"

// Info describes one build.
type Info struct {
	// Version is the release version without a leading "v": "0.1.0",
	// "0.1.0-3-g1a2b3c4-dirty", or "0.1.0-dev+1a2b3c4" for an untagged
	// checkout.
	Version string
	// Revision is the full commit hash, or Unknown.
	Revision string
	// Modified reports that the work tree had uncommitted changes, as far
	// as the build knows.
	Modified bool
	// GoVersion is the Go release that compiled the binary.
	GoVersion string
}

// Get returns the running binary's build.
func Get() Info {
	info, _ := debug.ReadBuildInfo()
	return resolve(version, revision, rscoord.ReleaseVersion(), info)
}

// pseudoVersion matches the versions the go command makes up for an
// untagged commit (v0.0.0-20261202005340-19688ac1b2c3): they say less than
// the VERSION file does.
var pseudoVersion = regexp.MustCompile(`[-.](0\.)?[0-9]{14}-[0-9a-f]{12}(\+dirty)?$`)

// resolve picks the version and revision from what the linker stamped,
// what the go command recorded and the VERSION file, in that order.
func resolve(stampedVersion, stampedRevision, file string, bi *debug.BuildInfo) Info {
	out := Info{Version: stampedVersion, Revision: stampedRevision, GoVersion: runtime.Version()}
	var vcsRevision string
	var vcsModified bool
	if bi != nil {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				vcsRevision = s.Value
			case "vcs.modified":
				vcsModified = s.Value == "true"
			}
		}
		if out.Version == "" {
			if v := bi.Main.Version; v != "" && v != "(devel)" && !pseudoVersion.MatchString(v) {
				// Installed as a module at a tag: go install …@v0.1.0.
				out.Version = v
			}
		}
	}
	if out.Version == "" {
		out.Version = file
		out.Modified = vcsModified
	}
	if out.Version == "" {
		out.Version = "0.0.0"
	}
	if out.Revision == "" {
		out.Revision = vcsRevision
	}
	if out.Revision == "" {
		out.Revision = Unknown
	}
	out.Version = Normalize(out.Version)
	if strings.HasSuffix(out.Version, "-dirty") {
		out.Modified = true
	}
	return out
}

// untagged matches what git describe --always prints without a tag: an
// abbreviated hash, maybe marked dirty.
var untagged = regexp.MustCompile(`^[0-9a-f]{7,40}(-dirty)?$`)

// Normalize drops the "v" of a tag and turns a bare commit hash (git
// describe in a repository without tags) into a development version of
// the VERSION file's release, as the binary reports them; image labels
// use it to say the same.
func Normalize(v string) string {
	if untagged.MatchString(v) {
		return rscoord.ReleaseVersion() + "-dev+" + v
	}
	if len(v) > 1 && v[0] == 'v' && v[1] >= '0' && v[1] <= '9' {
		return v[1:]
	}
	return v
}

// Short is the revision's first 12 characters, or Unknown.
func (i Info) Short() string {
	if len(i.Revision) > 12 {
		return i.Revision[:12]
	}
	return i.Revision
}

// String is one line for --version: "0.1.0 (revision 19688ac1b2c3, go1.26.8)".
func (i Info) String() string {
	rev := i.Short()
	if i.Modified && !strings.HasSuffix(i.Version, "dirty") {
		rev += ", modified"
	}
	return fmt.Sprintf("%s (revision %s, %s)", i.Version, rev, i.GoVersion)
}
