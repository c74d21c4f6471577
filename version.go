// Package rscoord holds what belongs to the repository as a whole rather
// than to one component: today the release version in the VERSION file,
// which internal/version reports when the build stamped none.
package rscoord

import (
	_ "embed"
	"strings"
)

//go:embed VERSION
var versionFile string

// ReleaseVersion is the version the VERSION file at the repository root
// names, without surrounding space.
func ReleaseVersion() string { return strings.TrimSpace(versionFile) }
