package actors

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
)

// LiveMember is one member as its group actor last decided it. Metrics
// read it at scrape time: it is as fresh as the member's last heartbeat,
// and reading it asks no actor anything.
type LiveMember struct {
	ID    string
	State protocol.MemberState
	// LastHeartbeat and LeaseExpires are zero when unknown.
	LastHeartbeat, LeaseExpires time.Time
	// Current is the set of shards the member reported reading, accepted;
	// Revoking the set it reported giving up and not yet released. The
	// slices are shared and never changed: read them, do not edit them.
	Current, Revoking []int
	// MaxConcurrency and AvailableConcurrency are the worker capacity the
	// member last reported.
	MaxConcurrency, AvailableConcurrency int
}

// LiveGroup is one group as its actor last decided it.
type LiveGroup struct {
	Stream, Group string
	// Shards are the readable shards, sorted: the live ones, then the
	// draining ones. Shared and never changed.
	Shards []int
	// Members are every member the group keeps, terminal ones until they
	// are pruned, sorted by id.
	Members []LiveMember
}

// LiveGroups returns every running group as its actor last decided it,
// sorted by stream then group. It reads what the actors publish after
// each step (see liveGroup) under short locks and never waits on a
// mailbox, so that a scrape costs no actor any time. Groups that failed
// closed, were deleted or stopped are absent.
func (c *Coordinator) LiveGroups() []LiveGroup {
	return c.env.live.snapshot()
}

// liveGroups is every group actor's published view, by stream and group.
type liveGroups struct {
	mu     sync.Mutex
	groups map[[2]string]*liveGroup
}

// liveGroup is what one group actor publishes after every step: each
// member's facts and the readable shards. The actor writes it under mu,
// a step at a time and for the members the step touched only; a scrape
// copies it under mu.
type liveGroup struct {
	incarnation uint64

	mu      sync.Mutex
	shards  []int
	members map[string]LiveMember
}

// take returns the view the actor of incarnation publishes into, made
// current for its group unless a newer actor already published one: a
// group deleted and created again has a new actor while the old one
// still stops.
func (l *liveGroups) take(prefix, group string, incarnation uint64) *liveGroup {
	g := &liveGroup{incarnation: incarnation, members: map[string]LiveMember{}}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.groups == nil {
		l.groups = map[[2]string]*liveGroup{}
	}
	k := [2]string{prefix, group}
	if cur, ok := l.groups[k]; !ok || cur.incarnation <= incarnation {
		l.groups[k] = g
	}
	return g
}

// drop forgets the group's view unless a newer actor published it.
func (l *liveGroups) drop(prefix, group string, incarnation uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := [2]string{prefix, group}
	if cur, ok := l.groups[k]; ok && cur.incarnation <= incarnation {
		delete(l.groups, k)
	}
}

func (l *liveGroups) snapshot() []LiveGroup {
	type named struct {
		k [2]string
		g *liveGroup
	}
	l.mu.Lock()
	all := make([]named, 0, len(l.groups))
	for k, g := range l.groups {
		all = append(all, named{k, g})
	}
	l.mu.Unlock()
	slices.SortFunc(all, func(a, b named) int { return cmp.Or(cmp.Compare(a.k[0], b.k[0]), cmp.Compare(a.k[1], b.k[1])) })
	out := make([]LiveGroup, 0, len(all))
	for _, n := range all {
		n.g.mu.Lock()
		lg := LiveGroup{Stream: n.k[0], Group: n.k[1], Shards: n.g.shards, Members: make([]LiveMember, 0, len(n.g.members))}
		for _, m := range n.g.members {
			lg.Members = append(lg.Members, m)
		}
		n.g.mu.Unlock()
		slices.SortFunc(lg.Members, func(a, b LiveMember) int { return cmp.Compare(a.ID, b.ID) })
		out = append(out, lg)
	}
	return out
}

func liveMember(m *assign.Member) LiveMember {
	return LiveMember{ID: m.ID, State: m.State, LastHeartbeat: m.LastHeartbeat, LeaseExpires: m.LeaseExpiresAt,
		Current: m.Current, Revoking: m.Revoking, MaxConcurrency: m.MaxConcurrency, AvailableConcurrency: m.AvailableConcurrency}
}

// readable lists g's readable shards, sorted.
func readable(g *assign.Group) []int {
	out := make([]int, 0, g.ShardCount+len(g.DrainingShards))
	for i := range g.ShardCount {
		out = append(out, i)
	}
	return append(out, g.DrainingShards...)
}

// publishLive updates the live view after a step of kind: every member
// and the layout after a restore or layout change, else the members the
// step changed durably and the member it answered (whose lease, last
// heartbeat and capacity change without a durable change). The cost is
// that of the step's own changes, never the whole group's on a
// heartbeat.
func (a *groupActor) publishLive(kind string, res assign.Result) {
	if a.g == nil {
		return
	}
	if a.live == nil {
		a.live = a.env.live.take(a.prefix, a.name, a.incarnation)
		kind = StepRestore
	}
	l := a.live
	l.mu.Lock()
	defer l.mu.Unlock()
	put := func(id string) {
		if m := a.g.Members[id]; m != nil {
			l.members[id] = liveMember(m)
		} else {
			delete(l.members, id)
		}
	}
	switch {
	case kind == StepRestore || kind == StepLayout:
		clear(l.members)
		for id, m := range a.g.Members {
			l.members[id] = liveMember(m)
		}
		l.shards = readable(a.g)
		return
	case res.Changes.Group:
		// Assign replaces the draining list on a change, never edits it;
		// a fresh copy keeps the view from depending on that.
		l.shards = readable(a.g)
	}
	for _, id := range res.Changes.Members {
		put(id)
	}
	for _, id := range res.Changes.Removed {
		delete(l.members, id)
	}
	if kind == StepHeartbeat || kind == StepHeldAnswer {
		put(res.Response.MemberID)
	}
}

// dropLive takes the group out of the live view: it failed closed, was
// deleted or its actor stops.
func (a *groupActor) dropLive() {
	a.env.live.drop(a.prefix, a.name, a.incarnation)
	a.live = nil
}
