package member

import "testing"

// TestStoppingRunHandsBackQueuedRecords: a run that stops gracefully hands
// back, at once, the records read and not handed to a worker (and any a
// read returning after the stop brings), waits only for the record being
// handled, and tells the member once it is idle; a fenced run drops its
// queue and refuses ACKs.
func TestStoppingRunHandsBackQueuedRecords(t *testing.T) {
	tc := newTestCore(t, 1)
	run := newShardRun(tc.memberCore, 0, 0)
	if !run.deliver(batch(run, 3)) {
		t.Fatal("a live run refused a batch")
	}
	if ms := run.take(1); len(ms) != 1 {
		t.Fatalf("took %d records, want 1", len(ms))
	}
	run.beginStop()
	if n := run.inFlight(); n != 1 || run.drained() {
		t.Fatalf("after the stop: %d in flight (drained %v), want the one being handled", n, run.drained())
	}
	if run.take(1) != nil {
		t.Fatal("a stopping run handed out a queued record")
	}
	if run.deliver(batch(run, 2)) {
		t.Fatal("a stopping run accepted a read that returned after the stop")
	}
	if n := tc.idles(); n != 0 {
		t.Fatalf("%d idle reports with a record being handled, want 0", n)
	}
	run.finish(1)
	if n := tc.idles(); n != 1 || !run.drained() {
		t.Fatalf("%d idle reports once drained, want 1 (drained %v)", n, run.drained())
	}

	fenced := newShardRun(tc.memberCore, 1, 0)
	fenced.deliver(batch(fenced, 3))
	fenced.fence(ErrFenced)
	if !fenced.drained() || fenced.inFlight() != 0 || fenced.take(0) != nil {
		t.Fatalf("fenced run kept work: inFlight %d", fenced.inFlight())
	}
	if err := fenced.ackAllowed(); err != ErrFenced {
		t.Fatalf("ackAllowed after fence = %v", err)
	}
	if fenced.deliver(batch(fenced, 1)) {
		t.Fatal("a fenced run accepted a batch")
	}
	select {
	case <-fenced.handlerCtx.Done():
	default:
		t.Fatal("fence did not cancel the handlers' context")
	}
}
