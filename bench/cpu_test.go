package bench

import (
	"os"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	for _, tc := range []struct {
		name, stat string
		ticks      int64
		want       time.Duration
		wantErr    bool
	}{
		{name: "plain", ticks: 100, want: 1230 * time.Millisecond,
			stat: "4242 (rscoord) S 1 4242 4242 0 -1 4194560 1000 0 0 0 100 23 0 0 20 0 12 0 500 1000000 2000 18446744073709551615"},
		{name: "name with spaces and parentheses", ticks: 250, want: 2 * time.Second,
			stat: "7 (a) b (c)) R 1 7 7 0 -1 0 0 0 0 0 300 200 0 0 20 0 1 0 1 1 1"},
		{name: "short", ticks: 100, wantErr: true, stat: "7 (a) R 1 7"},
		{name: "no name", ticks: 100, wantErr: true, stat: "garbage"},
		{name: "not a number", ticks: 100, wantErr: true, stat: "7 (a) R 1 7 7 0 -1 0 0 0 0 0 x 200 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStatCPU(tc.stat, tc.ticks)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("parseStatCPU = %v, %v; want %v, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

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
