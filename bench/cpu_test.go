package bench

import (
	"os"
	"testing"
	"time"
)

// TestProcessCPU reads this process's CPU from /proc, which must agree
// with getrusage to within a few ticks after some work.
func TestProcessCPU(t *testing.T) {
	read := ProcessCPU(os.Getpid())
	before, err := read()
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end); {
	}
	after, err := read()
	if err != nil {
		t.Fatal(err)
	}
	self, err := selfCPU()
	if err != nil {
		t.Fatal(err)
	}
	if after-before < 50*time.Millisecond {
		t.Fatalf("200 ms of spinning read as %v of CPU", after-before)
	}
	if d := self - after; d < -50*time.Millisecond || d > 50*time.Millisecond {
		t.Fatalf("/proc says %v, getrusage %v", after, self)
	}
	if _, err := ProcessCPU(-1)(); err == nil {
		t.Fatal("no error for a process that does not exist")
	}
}
