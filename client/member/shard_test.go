package member

import "testing"

// TestStoppingRunReportsEveryIdle: a run that is stopping tells the member
// each time it becomes idle, also when a read that returned after the stop
// added work after an earlier idle report; a fenced run drops its queue.
func TestStoppingRunReportsEveryIdle(t *testing.T) {
	tc := newTestCore(t, 1)
	run := newShardRun(tc.memberCore, 0, 0)
	handle := func() {
		t.Helper()
		if ms := run.take(1); len(ms) != 1 {
			t.Fatalf("took %d records, want 1", len(ms))
		}
		run.finish(1)
	}
	run.beginStop()
	run.deliver(batch(run, 1))
	handle()
	if n := tc.idles(); n != 1 {
		t.Fatalf("%d idle reports after the first batch, want 1", n)
	}
	run.deliver(batch(run, 2)) // a read that returned after the stop
	handle()
	if n := tc.idles(); n != 1 || run.drained() {
		t.Fatalf("%d idle reports with a record in flight, want 1", n)
	}
	handle()
	if n := tc.idles(); n != 2 || !run.drained() {
		t.Fatalf("%d idle reports once drained, want 2 (drained %v)", n, run.drained())
	}

	run.deliver(batch(run, 3))
	run.fence(ErrFenced)
	if !run.drained() || run.inFlight() != 0 || run.take(0) != nil {
		t.Fatalf("fenced run kept work: inFlight %d", run.inFlight())
	}
	if err := run.ackAllowed(); err != ErrFenced {
		t.Fatalf("ackAllowed after fence = %v", err)
	}
	if run.deliver(batch(run, 1)) {
		t.Fatal("a fenced run accepted a batch")
	}
	select {
	case <-run.handlerCtx.Done():
	default:
		t.Fatal("fence did not cancel the handlers' context")
	}
}
