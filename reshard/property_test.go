package reshard

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// checkInvariants checks what doc.go promises of every record.
func checkInvariants(s Stream) error {
	active := 0
	for _, m := range s.Migrations {
		if !final(m.State) {
			active++
		}
	}
	if active > 1 {
		return fmt.Errorf("%d active migrations", active)
	}
	for _, d := range s.Draining {
		if d < s.ShardCount {
			return fmt.Errorf("draining shard %d is live (shard count %d)", d, s.ShardCount)
		}
	}
	if !slices.IsSorted(s.Draining) || len(slices.Compact(slices.Clone(s.Draining))) != len(s.Draining) {
		return fmt.Errorf("draining %v is not a sorted set", s.Draining)
	}
	return nil
}

// readable is every shard of s a member may read: live, then draining.
func readable(s Stream) []int {
	out := []int{}
	for i := range s.ShardCount {
		out = append(out, i)
	}
	return append(out, s.Draining...)
}

// checkNothingStranded checks that a shard leaves the readable set only by
// being retired (proven drained, or by an operator's complete) in the same
// write: a shard producers could write to and that nobody reads any more
// strands its records.
func checkNothingStranded(old, next Stream) error {
	for _, shard := range readable(old) {
		if slices.Contains(readable(next), shard) {
			continue
		}
		retired := false
		for _, nm := range next.Migrations {
			om := old.Find(nm.ReshardingID)
			if slices.Contains(nm.RetiredShards, shard) && (om == nil || !slices.Contains(om.RetiredShards, shard)) {
				retired = true
			}
		}
		if !retired {
			return fmt.Errorf("shard %d left the readable shards %v → %v without being retired", shard, readable(old), readable(next))
		}
	}
	return nil
}

// stateOrder ranks migration states: a migration only moves up.
var stateOrder = map[protocol.MigrationState]int{
	protocol.MigrationPreparing: 0, protocol.MigrationActive: 1, protocol.MigrationDraining: 2,
	protocol.MigrationRollingBack: 2, protocol.MigrationDeprecated: 3, protocol.MigrationRolledBack: 3,
}

// TestRandomSequences drives random operator commands, checks, Redis
// outcomes, group convergence and crashes, and checks after every decision
// that the invariants hold, that a saved record only moves forward (version
// up, states up), and that no removed shard is retired by a check before
// its routing lease and its drain proof.
func TestRandomSequences(t *testing.T) {
	t.Parallel()
	seen := map[protocol.MigrationState]int{}
	for seed := uint64(1); seed <= 300; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runRandom(t, seed, seen) })
	}
	// The sequences must reach every end, or they prove little.
	for _, st := range []protocol.MigrationState{protocol.MigrationDeprecated, protocol.MigrationRolledBack, protocol.MigrationDraining, protocol.MigrationRollingBack} {
		if seen[st] == 0 {
			t.Errorf("no random sequence reached %s: %v", st, seen)
		}
	}
	t.Logf("migration states reached: %v", seen)
}

func runRandom(t *testing.T, seed uint64, seen map[protocol.MigrationState]int) {
	rng := rand.New(rand.NewPCG(seed, 7))
	cfg := Config{Redis: rng.IntN(4) != 0, RetireRemoved: rng.IntN(2) == 0,
		RoutingLease: time.Duration(rng.IntN(20)) * time.Second, CheckInterval: time.Second}
	now := t0
	s := Stream{Prefix: "orders", ShardCount: 1 + rng.IntN(8), Draining: []int{}, MetadataVersion: 1}
	// drained is what Redis would prove: shard → drained.
	drained := map[int]bool{}
	groupsCurrent := true
	// currentSince is when the groups last took the record's layout: until
	// then they answered producers the previous shard count, each answer
	// good for one routing lease.
	currentSince, countChanged := now, false
	makeCurrent := func() {
		groupsCurrent = true
		if countChanged {
			currentSince, countChanged = now, false
		}
	}
	// routed is what the actor remembers of Decision.RoutedSince: the
	// count every group was seen on, and since when.
	var routed struct {
		count int
		since time.Time
	}
	withRouted := func(f Facts) Facts {
		if routed.count == s.ShardCount {
			f.RoutedSince = routed.since
		}
		return f
	}
	var pendingProvision, pendingDelete string
	resume := false

	adopt := func(op string, d Decision) {
		t.Helper()
		if d.Save != nil {
			next := *d.Save
			bumps := next.ShardCount != s.ShardCount || !slices.Equal(next.Draining, s.Draining)
			if next.MetadataVersion < s.MetadataVersion || (bumps && next.MetadataVersion == s.MetadataVersion) {
				t.Fatalf("seed %d %s: version %d → %d", seed, op, s.MetadataVersion, next.MetadataVersion)
			}
			for _, old := range s.Migrations {
				nm := next.Find(old.ReshardingID)
				if nm == nil || stateOrder[nm.State] < stateOrder[old.State] {
					t.Fatalf("seed %d %s: migration %s went back or vanished: %v → %v", seed, op, old.ReshardingID, old.State, nm)
				}
				if nm.State == protocol.MigrationDeprecated && old.State != protocol.MigrationDeprecated && op == "check" && len(next.Draining) > 0 {
					t.Fatalf("seed %d: a check deprecated %s with shards still draining", seed, nm.ReshardingID)
				}
				if op == "check" || op == "retired" {
					for _, r := range nm.RetiredShards {
						if slices.Contains(old.RetiredShards, r) {
							continue
						}
						if !drained[r] {
							t.Fatalf("seed %d: shard %d retired without a drain proof", seed, r)
						}
						if now.Before(nm.ActivatedAt.Add(cfg.RoutingLease)) {
							t.Fatalf("seed %d: shard %d retired before the routing lease", seed, r)
						}
						if now.Before(currentSince.Add(cfg.RoutingLease)) {
							t.Fatalf("seed %d: shard %d retired at %v, within the routing lease of the last answer with the old count (groups took the layout at %v)",
								seed, r, now.Sub(t0), currentSince.Sub(t0))
						}
					}
				}
			}
			if err := checkInvariants(next); err != nil {
				t.Fatalf("seed %d %s: %v", seed, op, err)
			}
			// Without Redis a rollback is immediate (nothing proves a drain).
			if err := checkNothingStranded(s, next); err != nil && (cfg.Redis || op != "rollback") {
				t.Fatalf("seed %d %s: %v", seed, op, err)
			}
			if d.Layout != nil && d.LayoutTo == nil {
				groupsCurrent = false
				countChanged = countChanged || next.ShardCount != s.ShardCount
			}
			s = next
			if m := d.Migration; m != nil {
				seen[m.State]++
			}
			for sh := range drained {
				if sh < s.ShardCount {
					delete(drained, sh) // live again: new records may come
				}
			}
		}
		if !d.RoutedSince.IsZero() {
			routed.count, routed.since = s.ShardCount, d.RoutedSince
		}
		if d.ProvisionNeeded && d.Migration != nil {
			pendingProvision = d.Migration.ReshardingID
		}
		if d.DeleteThenRetire {
			pendingDelete = "yes"
		}
	}
	facts := func() Facts {
		f := Facts{Now: now, Gathered: true}
		for _, name := range []string{"g1", "g2"} {
			g := GroupFacts{Name: name, ShardCount: s.ShardCount, Draining: s.Draining, Converged: true, State: "STABLE"}
			if !groupsCurrent {
				g.ShardCount = -1
			}
			f.Groups = append(f.Groups, g)
		}
		for _, sh := range s.Draining {
			lag := int64(0)
			if !drained[sh] {
				lag = 5
			}
			f.Shards = append(f.Shards, ShardFacts{Shard: sh, Key: protocol.StreamKey("orders", sh), Exists: true,
				Groups: []GroupLag{{Name: "g1", Lag: &lag}}})
		}
		return f
	}

	for step := 0; step < 200; step++ {
		switch rng.IntN(10) {
		case 0:
			adopt("scale", Scale(s, rng.IntN(10), Request{RequestedBy: "ops"}, now, cfg))
		case 1:
			if pendingProvision != "" {
				var err error
				if rng.IntN(3) == 0 {
					err = errors.New("redis down")
				}
				adopt("provisioned", Provisioned(s, pendingProvision, err, now, cfg))
				pendingProvision = ""
			}
		case 2:
			if m := s.Active(); m != nil {
				adopt("rollback", Rollback(s, m.ReshardingID, "ops", "", now, cfg))
			}
		case 3:
			if m := s.Active(); m != nil && rng.IntN(3) == 0 {
				adopt("complete", Complete(s, m.ReshardingID, "ops", "", now, cfg))
			}
		case 4, 5:
			d := Check(s, withRouted(Facts{Now: now, Resume: resume}), cfg)
			resume = false
			adopt("check", d)
			if d.Gather != nil {
				adopt("check", Check(s, withRouted(facts()), cfg))
			}
		case 6:
			if pendingDelete != "" {
				var err error
				if rng.IntN(3) == 0 {
					err = errors.New("redis down")
				}
				adopt("retired", Retired(s, err, now, cfg))
				pendingDelete = ""
			}
		case 7:
			makeCurrent()
			for _, sh := range s.Draining {
				if rng.IntN(2) == 0 {
					drained[sh] = true
				}
			}
		case 8:
			now = now.Add(time.Duration(rng.IntN(5000)) * time.Millisecond)
		case 9:
			// Crash: what is not in the record is forgotten.
			pendingProvision, pendingDelete, resume = "", "", true
			routed.count, routed.since = 0, time.Time{}
			if rng.IntN(2) == 0 {
				makeCurrent()
			}
		}
	}
}
