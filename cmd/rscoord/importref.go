package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redisconn"
	"github.com/rscoord/rscoord/refimport"
)

// ImportReferenceCmd is "rscoord import-reference".
type ImportReferenceCmd struct {
	AdminFlags `embed:""`

	Redis       string `required:"" placeholder:"HOST:PORT|URL" help:"Redis of the reference coordinator's store: host:port, several cluster seeds, or a redis:// or rediss:// URL (its password from RSCOORD_REDIS_PASSWORD)."`
	KeyPrefix   string `default:"redis-stream:coord" env:"RSCOORD_REFERENCE_KEY_PREFIX" help:"Key prefix of the reference's store (its coordinator.store.key-prefix)."`
	Execute     bool   `help:"Create the planned streams and groups. Without it the plan is printed and nothing changes."`
	Reason      string `default:"imported from the reference coordinator" placeholder:"TEXT" help:"Why, for the audit log."`
	RequestedBy string `default:"${requester}" help:"Who asks, for the audit log; defaults to $$USER, else cli."`
}

// errRefusedStreams ends an import that left streams out.
var errRefusedStreams = errors.New("some streams were not imported; see above")

// Run reads the reference's state, prints the plan, and with --execute
// creates each group (with its stream when missing) through the API.
func (c *ImportReferenceCmd) Run(ctx context.Context, a *Admin) error {
	rdb, err := redisconn.Open(c.Redis, redisconn.Config{Password: os.Getenv(envRedisPassword),
		DialTimeout: 5 * time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second, MaxRetries: 1})
	if err != nil {
		return fmt.Errorf("import-reference: --redis: %w", err)
	}
	defer rdb.Close()
	groups, err := refimport.Read(ctx, rdb, c.KeyPrefix)
	if err != nil {
		return fmt.Errorf("import-reference: %w", err)
	}
	existing, err := c.existing(ctx, a)
	if err != nil {
		return err
	}
	plan := refimport.NewPlan(groups, existing)
	if len(groups) == 0 {
		if err := printLine(a.Out, "no groups under %s:groups", c.KeyPrefix); err != nil {
			return err
		}
	}
	if err := c.printPlan(a, plan); err != nil {
		return err
	}
	if c.Execute {
		for _, act := range plan.Actions {
			if act.Exists {
				continue
			}
			shards := act.ShardCount
			req := protocol.CreateRequest{InitialShardCount: &shards, RequestedBy: c.RequestedBy, Reason: c.Reason,
				VersionFloor: act.VersionFloor}
			if _, err := a.Client.Do(ctx, http.MethodPost, coordclient.GroupPath(act.StreamPrefix, act.ConsumerGroup), req, nil); err != nil {
				return fmt.Errorf("import-reference: create %s/%s: %w", act.StreamPrefix, act.ConsumerGroup, err)
			}
			if err := printLine(a.Out, "created %s/%s (%d shards, versions above %d)", act.StreamPrefix, act.ConsumerGroup, shards, act.VersionFloor); err != nil {
				return err
			}
		}
	} else if len(plan.Actions) > 0 {
		if err := printLine(a.Out, "dry run: nothing changed; run again with --execute to create them"); err != nil {
			return err
		}
	}
	if len(plan.Refusals) > 0 {
		return fmt.Errorf("import-reference: %w", errRefusedStreams)
	}
	return nil
}

// existing lists what the coordinator holds already.
func (c *ImportReferenceCmd) existing(ctx context.Context, a *Admin) (refimport.Existing, error) {
	var resp protocol.GroupsResponse
	if _, err := a.Client.Do(ctx, http.MethodGet, coordclient.Path("monitoring", "groups"), nil, &resp); err != nil {
		return refimport.Existing{}, fmt.Errorf("import-reference: list the coordinator's groups: %w", err)
	}
	if len(resp.MissingReplicas) > 0 {
		return refimport.Existing{}, errors.New("import-reference: some replicas did not list their groups; retry when the cluster is whole")
	}
	out := refimport.Existing{Streams: map[string]int{}, Groups: map[[2]string]bool{}, Highest: map[[2]string]int64{}}
	for _, g := range resp.Groups {
		id := [2]string{g.StreamPrefix, g.ConsumerGroup}
		out.Streams[g.StreamPrefix] = g.ShardCount
		out.Groups[id] = true
		out.Highest[id] = max(g.GroupEpoch, g.AssignmentEpoch, g.MetadataVersion)
	}
	return out, nil
}

func (c *ImportReferenceCmd) printPlan(a *Admin, plan refimport.Plan) error {
	t := newTable(a.Out, "STREAM", "GROUP", "SHARDS", "ACTION", "REFERENCE VERSION/EPOCH", "START ABOVE", "NOTE")
	for _, act := range plan.Actions {
		action := "create"
		if act.Exists {
			action = "exists"
		}
		t.row(act.StreamPrefix, act.ConsumerGroup, formatInt(act.ShardCount), action,
			fmt.Sprintf("%d/%d", act.ReferenceMetadataVersion, act.ReferenceGroupEpoch), formatInt(act.VersionFloor), orNone(act.Note))
	}
	for _, r := range plan.Refusals {
		t.row(r.StreamPrefix, "*", none, "REFUSED", none, none, strings.Join(strings.Fields(r.Reason), " "))
	}
	return t.flush()
}
