package main

import (
	"io"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/internal/version"
)

// VersionCmd prints build and protocol versions.
type VersionCmd struct{}

// Run prints the version, the revision and the protocol versions.
func (v *VersionCmd) Run(out io.Writer) error {
	return printLine(out, "rscoord %s, protocol versions %d..%d, current %d",
		version.Get(), protocol.MinVersion, protocol.MaxVersion, protocol.CurrentVersion)
}

// buildVersion is the version this binary reports to --version, in its
// User-Agent and in rscoord_build_info (internal/version says how it is
// chosen).
func buildVersion() string { return version.Get().Version }

// versionLine is what --version prints: "rscoord 0.1.0 (revision
// 19688ac1b2c3, go1.26.8)".
func versionLine() string { return "rscoord " + version.Get().String() }
