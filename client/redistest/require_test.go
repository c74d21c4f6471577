package redistest_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/rscoord/rscoord/client/redistest"
)

// fatalTB records Fatal instead of failing the real test.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatal(args ...any) {
	f.msg = fmt.Sprint(args...)
	runtime.Goexit()
}

func TestRequireExplainsHowToInstall(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // a PATH without redis-server
	fake := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		redistest.Require(fake)
	}()
	<-done
	for _, want := range []string{"redis-server not found on PATH", "apt-get install redis-server", "go tool task test"} {
		if !strings.Contains(fake.msg, want) {
			t.Fatalf("Require message %q lacks %q", fake.msg, want)
		}
	}
}
