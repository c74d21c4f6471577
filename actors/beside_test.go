package actors

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestBesideWorkClose: closing waits for the work already started and
// refuses new work, also while work keeps being asked for concurrently (as
// a stream actor still stopping may after Close stopped waiting for it).
func TestBesideWorkClose(t *testing.T) {
	var w besideWork
	release := make(chan struct{})
	if !w.start(func() { <-release }) {
		t.Fatal("work refused before close")
	}
	done := w.close()
	select {
	case <-done:
		t.Fatal("close did not wait for the work running")
	case <-time.After(50 * time.Millisecond):
	}
	ran := false
	if w.start(func() { ran = true }) {
		t.Fatal("work started after close")
	}
	close(release)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("close never saw the work end")
	}
	if ran {
		t.Fatal("refused work ran")
	}

	var concurrent besideWork
	var started, finished atomic.Int64
	var askers sync.WaitGroup
	for range 50 {
		askers.Go(func() {
			for range 20 {
				if concurrent.start(func() { finished.Add(1) }) {
					started.Add(1)
				}
			}
		})
	}
	<-concurrent.close()
	if s, f := started.Load(), finished.Load(); f < s {
		t.Fatalf("close returned with %d of %d started works unfinished", s-f, s)
	}
	askers.Wait()
}
