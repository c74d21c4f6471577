package replica

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/cluster"
)

// view is GET /coord/v1/monitoring/cluster: the registered replicas, the
// streams each holds, and every group with the replica that runs it.
func (r *Runner) View(ctx context.Context) (protocol.ClusterResponse, error) {
	streams, err := r.store.LoadStreams(ctx)
	if err != nil {
		return protocol.ClusterResponse{}, err
	}
	holders := r.node.Holders()
	out := protocol.ClusterResponse{Store: "etcd", Replicas: []protocol.ClusterReplica{}, Groups: []protocol.ClusterGroup{}}
	owned := map[string]int{}
	for _, rec := range streams {
		groups, err := r.store.LoadGroups(ctx, rec.StreamPrefix)
		if err != nil {
			return protocol.ClusterResponse{}, err
		}
		owner, ok := holders[streamUnit(rec.StreamPrefix)]
		for _, g := range groups {
			cg := protocol.ClusterGroup{StreamPrefix: rec.StreamPrefix, ConsumerGroup: g.Name}
			if ok {
				cg.Owner, cg.OwnerURL = owner.ID, owner.AdvertiseURL
				owned[owner.ID]++
			}
			out.Groups = append(out.Groups, cg)
		}
	}
	describe := func(rep cluster.Replica, live bool) protocol.ClusterReplica {
		c := protocol.ClusterReplica{ID: rep.ID, AdvertiseURL: rep.AdvertiseURL, Live: live, Role: protocol.RoleStandby,
			Units: []string{}, GroupsOwned: owned[rep.ID]}
		for unit, h := range holders {
			if h.ID == rep.ID {
				c.Units = append(c.Units, unit)
			}
		}
		slices.Sort(c.Units)
		if len(c.Units) > 0 {
			c.Role = protocol.RoleOwner
		}
		return c
	}
	seen := map[string]bool{}
	for _, rep := range r.node.Replicas() {
		seen[rep.ID] = true
		out.Replicas = append(out.Replicas, describe(rep, true))
	}
	for _, h := range holders {
		if !seen[h.ID] {
			seen[h.ID] = true
			out.Replicas = append(out.Replicas, describe(h, false))
		}
	}
	slices.SortFunc(out.Replicas, func(a, b protocol.ClusterReplica) int { return strings.Compare(a.ID, b.ID) })
	out.Self = describe(r.node.Self(), r.live(r.node.Self().ID))
	return out, nil
}

// publishGauges keeps the cluster gauges current until ctx ends: live
// replicas, and groups that no live replica runs (all of them while this
// replica's lease is not certain).
func (r *Runner) publishGauges(ctx context.Context, m Metrics) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		m.SetClusterReplicasLive(len(r.node.Replicas()))
		vctx, cancel := context.WithTimeout(ctx, time.Second)
		if unowned, err := r.unownedGroups(vctx); err == nil {
			m.SetClusterGroupsUnowned(unowned)
		} else {
			m.SetClusterStoreUnreadable()
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// unownedGroups counts the groups of the streams that no live replica
// runs, as this replica sees them. It reads the streams' keys only and the
// owner keys this replica watches anyway; only the groups of a stream
// nobody runs (moving, or all of them while this replica's lease is not
// certain) are read, to count them.
func (r *Runner) unownedGroups(ctx context.Context) (int, error) {
	prefixes, err := r.keys.StreamPrefixes(ctx)
	if err != nil {
		return 0, err
	}
	valid := r.node.Valid()
	holders := r.node.Holders()
	live := map[string]bool{}
	for _, rep := range r.node.Replicas() {
		live[rep.ID] = true
	}
	unowned := 0
	for _, p := range prefixes {
		if h, ok := holders[streamUnit(p)]; valid && ok && live[h.ID] {
			continue
		}
		groups, err := r.store.LoadGroups(ctx, p)
		if err != nil {
			return 0, err
		}
		unowned += len(groups)
	}
	return unowned, nil
}
