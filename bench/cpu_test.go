package bench

import (
	"os"
	"testing"
	"time"
)

// TestProcessCPU reads this process's CPU from /proc, which must agree
// with getrusage to within a few ticks after some work. The work is
// measured in CPU time, not wall time: on a loaded machine 200 ms of wall
// time may hold only a few milliseconds of this process's CPU.
func TestProcessCPU(t *testing.T) {
	read := ProcessCPU(os.Getpid())
	before, err := read()
	if err != nil {
		t.Fatal(err)
	}
	start, err := selfCPU()
	if err != nil {
		t.Fatal(err)
	}
	const work = 200 * time.Millisecond
	for deadline := time.Now().Add(time.Minute); ; {
		now, err := selfCPU()
		if err != nil {
			t.Fatal(err)
		}
		if now-start >= work {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a minute of spinning used only %v of CPU", now-start)
		}
		for end := time.Now().Add(10 * time.Millisecond); time.Now().Before(end); {
		}
	}
	after, err := read()
	if err != nil {
		t.Fatal(err)
	}
	self, err := selfCPU()
	if err != nil {
		t.Fatal(err)
	}
	if after-before < work/2 {
		t.Fatalf("%v of spinning read as %v of CPU", work, after-before)
	}
	if d := self - after; d < -50*time.Millisecond || d > 50*time.Millisecond {
		t.Fatalf("/proc says %v, getrusage %v", after, self)
	}
	if _, err := ProcessCPU(-1)(); err == nil {
		t.Fatal("no error for a process that does not exist")
	}
}
