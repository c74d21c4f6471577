package version

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/rscoord/rscoord"
)

// TestResolvePrefersStampThenModuleThenFile pins the order in which a
// build's version and revision are chosen.
func TestResolvePrefersStampThenModuleThenFile(t *testing.T) {
	vcs := func(main string, modified bool) *debug.BuildInfo {
		m := "false"
		if modified {
			m = "true"
		}
		return &debug.BuildInfo{Main: debug.Module{Version: main}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "19688ac1b2c3d4e5f60718293a4b5c6d7e8f9012"}, {Key: "vcs.modified", Value: m}}}
	}
	release := rscoord.ReleaseVersion()
	tests := []struct {
		name                 string
		stampedV, stampedRev string
		file                 string
		bi                   *debug.BuildInfo
		want                 Info
	}{
		{name: "stamped tag", stampedV: "v0.1.0", stampedRev: "abc", file: "9.9.9", bi: vcs("(devel)", false),
			want: Info{Version: "0.1.0", Revision: "abc"}},
		{name: "stamped describe past a tag, dirty", stampedV: "v0.1.0-3-g1a2b3c4-dirty", file: "9.9.9", bi: vcs("(devel)", false),
			want: Info{Version: "0.1.0-3-g1a2b3c4-dirty", Revision: "19688ac1b2c3d4e5f60718293a4b5c6d7e8f9012", Modified: true}},
		{name: "stamped describe without tags", stampedV: "19688ac", stampedRev: "19688ac1b2c3", file: "9.9.9",
			want: Info{Version: release + "-dev+19688ac", Revision: "19688ac1b2c3"}},
		{name: "go install at a tag", file: "9.9.9", bi: vcs("v0.2.0", false),
			want: Info{Version: "0.2.0", Revision: "19688ac1b2c3d4e5f60718293a4b5c6d7e8f9012"}},
		{name: "plain go build: pseudo-version gives way to the file", file: "0.1.0",
			bi:   vcs("v0.0.0-20261202005340-19688ac1b2c3+dirty", true),
			want: Info{Version: "0.1.0", Revision: "19688ac1b2c3d4e5f60718293a4b5c6d7e8f9012", Modified: true}},
		{name: "plain go build past a tag: pseudo-version gives way too", file: "0.1.0",
			bi:   vcs("v0.1.1-0.20261202005340-19688ac1b2c3", false),
			want: Info{Version: "0.1.0", Revision: "19688ac1b2c3d4e5f60718293a4b5c6d7e8f9012"}},
		{name: "plain go build outside a checkout", file: "0.1.0", bi: &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}},
			want: Info{Version: "0.1.0", Revision: Unknown}},
		{name: "no build info at all", file: "0.1.0", want: Info{Version: "0.1.0", Revision: Unknown}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := resolve(tt.stampedV, tt.stampedRev, tt.file, tt.bi)
			got.GoVersion = ""
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestGetNeverSaysDevel checks the test binary itself: no stamp, so the
// version is the VERSION file's.
func TestGetNeverSaysDevel(t *testing.T) {
	got := Get()
	if got.Version != rscoord.ReleaseVersion() || strings.Contains(got.String(), "devel") {
		t.Errorf("Get() = %+v (%s), want the VERSION file's %q", got, got, rscoord.ReleaseVersion())
	}
	if rscoord.ReleaseVersion() == "" {
		t.Error("the VERSION file is empty")
	}
}
