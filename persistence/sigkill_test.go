package persistence

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// holderEnv names the data directory a helper process of this test binary
// holds (see TestHelperHoldsDir).
const holderEnv = "RSCOORD_PERSISTENCE_HOLDER_DIR"

// TestHelperHoldsDir is not a test of its own: run by
// TestAnotherProcessAndSIGKILL in a child process, it opens the store in
// the directory holderEnv names and saves a large (staged) group again and
// again, each time with every member at the next epoch (continuing from
// the stored group), printing each acknowledged epoch, until it is killed.
func TestHelperHoldsDir(t *testing.T) {
	dir := os.Getenv(holderEnv)
	if dir == "" {
		t.Skip("only run as the helper process of TestAnotherProcessAndSIGKILL")
	}
	s, err := OpenPebble(dir, Options{Logger: testLogger(t)})
	if err != nil {
		fmt.Printf("open: %v\n", err)
		os.Exit(2)
	}
	g, rev, epoch := bigGroup(3000, 2), uint64(0), int64(0)
	if rec, err := s.LoadGroup(ctx, "orders", "big"); err == nil {
		g, rev, epoch = rec.Group, rec.Revision, rec.Group.Members["consumer-00000-7f9c2d"].Epoch
	} else if !errors.Is(err, ErrNotFound) {
		fmt.Printf("load: %v\n", err)
		os.Exit(2)
	}
	for epoch++; ; epoch++ {
		for _, m := range g.Members {
			m.Epoch = epoch
		}
		if rev, err = s.SaveGroup(ctx, g, nil, rev); err != nil {
			fmt.Printf("save: %v\n", err)
			os.Exit(2)
		}
		fmt.Printf("acked %d\n", epoch)
	}
}

// TestAnotherProcessAndSIGKILL: a data directory held by another process
// is refused, naming that process; once the holder is SIGKILLed in the
// middle of its writes, the directory opens, and the group it was writing
// (too large for one commit) loads whole, with every member at one epoch,
// never below the last epoch acknowledged.
func TestAnotherProcessAndSIGKILL(t *testing.T) {
	t.Parallel()
	if os.Getenv(holderEnv) != "" {
		t.Skip("the helper process")
	}
	// Each round kills the helper at a random point of a save. The helper
	// is this test binary: under -race its saves of the 3,000-member group
	// cost seconds of CPU each, and it saves until it is killed, so there
	// the test runs 2 rounds. go tool task test runs it again without
	// -race, all 6 rounds (Taskfile test:server).
	rounds := 6
	if raceEnabled {
		rounds = 2
	}
	dir := t.TempDir()
	for round := range rounds {
		sigkillRound(t, dir, round)
	}
}

// sigkillRound starts a helper on dir, lets it acknowledge 3 saves, checks
// that dir is refused while it runs, SIGKILLs it at a random point of a
// save and checks what the directory then holds.
func sigkillRound(t *testing.T, dir string, round int) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldsDir$", "-test.count=1")
	cmd.Env = append(os.Environ(), holderEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var acked int64
	var seen int
	var last, gap time.Time
	var save time.Duration
	timeout := time.After(60 * time.Second)
	for seen < 3 {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the helper ended before it acknowledged 3 saves")
			}
			if n, found := strings.CutPrefix(l, "acked "); found {
				acked, _ = strconv.ParseInt(n, 10, 64)
				seen++
				last, gap = time.Now(), last
				if !gap.IsZero() {
					save = last.Sub(gap)
				}
			} else {
				t.Fatalf("helper: %s", l)
			}
		case <-timeout:
			t.Fatalf("the helper acknowledged %d saves in 60 s", seen)
		}
	}
	_, err = OpenPebble(dir, Options{Logger: testLogger(t)})
	if err == nil {
		t.Fatal("a directory held by another process opened")
	}
	if want := fmt.Sprintf("process %d", cmd.Process.Pid); !strings.Contains(err.Error(), want) {
		t.Fatalf("open of a held directory: %v; want it to name %q", err, want)
	}
	// Somewhere in the next save: staging, its commit point or applying.
	// The random delay is the point: it picks the moment of the kill.
	time.Sleep(time.Until(last.Add(rand.N(save + 1))))
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed = true
	_ = cmd.Wait()
	for l := range lines { // acknowledged before the kill
		if n, found := strings.CutPrefix(l, "acked "); found {
			acked, _ = strconv.ParseInt(n, 10, 64)
		}
	}
	s, err := OpenPebble(dir, Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("round %d: open after the SIGKILL: %v", round, err)
	}
	defer s.Close()
	rec := mustLoadGroup(t, s, "orders", "big")
	epochs := map[int64]int{}
	for _, m := range rec.Group.Members {
		epochs[m.Epoch]++
	}
	if len(epochs) != 1 || len(rec.Group.Members) != 3000 {
		t.Fatalf("round %d, after the SIGKILL: %d members at epochs %v; want 3000 at one epoch", round, len(rec.Group.Members), epochs)
	}
	for e := range epochs {
		if e < acked {
			t.Fatalf("round %d: after the SIGKILL the members are at epoch %d, below the acknowledged %d", round, e, acked)
		}
		t.Logf("round %d: killed after epoch %d was acknowledged (a save takes %v); the group reopens at epoch %d", round, acked, save, e)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
