package main

import (
	"math"
	"syscall"
	"testing"

	"github.com/rscoord/rscoord/coordtest"
)

// serve runs its collector at GOGC=400 under a soft memory limit below the
// machine's memory, unless GOGC and GOMEMLIMIT set their own.
func TestServeTunesTheCollectorUnlessTheEnvironmentDoes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		env       []string
		gogc      float64
		limitOK   func(float64) bool
		limitWant string
	}{
		{"defaults", []string{"GOGC=", "GOMEMLIMIT="}, serveGCPercent,
			func(v float64) bool { return v > 0 && v < math.MaxInt64 }, "a limit below the machine's memory"},
		{"the environment's", []string{"GOGC=150", "GOMEMLIMIT=1GiB"}, 150,
			func(v float64) bool { return v == 1<<30 }, "1 GiB"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := startProcessEnv(t, t.TempDir(), append([]string{envAdminPassword + "=" + testAdminPassword}, tc.env...))
			defer func() {
				if err := p.stop(syscall.SIGTERM); err != nil {
					t.Errorf("stop: %v\n%s", err, p.output())
				}
			}()
			s := coordtest.Remote(t, p.url)
			s.Authorization = coordtest.Basic("admin", testAdminPassword)
			fams := scrapeMetrics(t, s)
			if got := gaugeValue(fams, "go_gc_gogc_percent", nil); got != tc.gogc {
				t.Errorf("go_gc_gogc_percent %v, want %v", got, tc.gogc)
			}
			if got := gaugeValue(fams, "go_gc_gomemlimit_bytes", nil); !tc.limitOK(got) {
				t.Errorf("go_gc_gomemlimit_bytes %v, want %s", got, tc.limitWant)
			}
		})
	}
}
