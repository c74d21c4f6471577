package main

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/protocol"
)

// GroupCmd groups the consumer group commands.
type GroupCmd struct {
	AdminFlags `embed:""`

	List        GroupListCmd        `cmd:"" help:"List consumer groups, of every stream or of one."`
	Create      GroupCreateCmd      `cmd:"" help:"Register a consumer group (and its stream, when missing)."`
	Get         GroupGetCmd         `cmd:"" help:"Show a consumer group and its members' target and current shard counts."`
	Delete      GroupDeleteCmd      `cmd:"" help:"Delete a consumer group."`
	Members     GroupMembersCmd     `cmd:"" help:"List the members of a consumer group."`
	Assignments GroupAssignmentsCmd `cmd:"" help:"Show target, current and revoking shards per member, and invariant violations."`
}

// GroupRef names one consumer group of one stream on the command line.
type GroupRef struct {
	Prefix string `arg:"" help:"Stream prefix."`
	Group  string `arg:"" help:"Consumer group."`
}

// validate checks both names before any request, for a friendly error.
func (r GroupRef) validate(op string) error {
	if err := protocol.ValidateStreamPrefix(r.Prefix); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := protocol.ValidateConsumerGroup(r.Group); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// String reads "prefix/group".
func (r GroupRef) String() string { return r.Prefix + "/" + r.Group }

// GroupGetCmd is "rscoord group get".
type GroupGetCmd struct {
	GroupRef `embed:""`
}

// Run shows the group: GET /streams/{p}/groups/{g}.
func (c *GroupGetCmd) Run(ctx context.Context, a *Admin) error {
	if err := c.validate("group get"); err != nil {
		return err
	}
	var resp protocol.GroupResponse
	raw, err := a.Client.Do(ctx, http.MethodGet, coordclient.GroupPath(c.Prefix, c.Group), nil, &resp)
	if err != nil {
		return fmt.Errorf("group get %s: %w", c.GroupRef, err)
	}
	if a.JSON {
		return printJSON(a.Out, raw)
	}
	return printGroup(a.Out, resp)
}

// GroupDeleteCmd is "rscoord group delete".
type GroupDeleteCmd struct {
	GroupRef    `embed:""`
	Reason      string `required:"" placeholder:"TEXT" help:"Why, for the audit log."`
	Force       bool   `help:"Delete even while live members exist."`
	RequestedBy string `default:"${requester}" help:"Who asks, for the audit log; defaults to $$USER, else cli."`
}

// Run deletes the group: DELETE /streams/{p}/groups/{g}, and prints the
// snapshot the server answers.
func (c *GroupDeleteCmd) Run(ctx context.Context, a *Admin) error {
	if err := c.validate("group delete"); err != nil {
		return err
	}
	if strings.TrimSpace(c.Reason) == "" {
		return fmt.Errorf("group delete: --reason must not be blank")
	}
	req := protocol.DeleteGroupRequest{RequestedBy: c.RequestedBy, Reason: c.Reason, Force: c.Force}
	var resp protocol.GroupResponse
	raw, err := a.Client.Do(ctx, http.MethodDelete, coordclient.GroupPath(c.Prefix, c.Group), req, &resp)
	if err != nil {
		return fmt.Errorf("group delete %s: %w", c.GroupRef, err)
	}
	if a.JSON {
		return printJSON(a.Out, raw)
	}
	if err := printLine(a.Out, "Deleted consumer group %s of stream %s. Last state:\n", c.Group, c.Prefix); err != nil {
		return err
	}
	return printGroup(a.Out, resp)
}

// GroupMembersCmd is "rscoord group members".
type GroupMembersCmd struct {
	GroupRef `embed:""`
}

// Run lists members: GET /monitoring/streams/{p}/groups/{g}/members.
func (c *GroupMembersCmd) Run(ctx context.Context, a *Admin) error {
	if err := c.validate("group members"); err != nil {
		return err
	}
	var resp protocol.MembersResponse
	path := coordclient.MonitoringGroupPath(c.Prefix, c.Group, "members")
	raw, err := a.Client.Do(ctx, http.MethodGet, path, nil, &resp)
	if err != nil {
		return fmt.Errorf("group members %s: %w", c.GroupRef, err)
	}
	if a.JSON {
		return printJSON(a.Out, raw)
	}
	if len(resp.Members) == 0 {
		return printLine(a.Out, "No members in consumer group %s of stream %s.", c.Group, c.Prefix)
	}
	members := resp.Members
	sort.SliceStable(members, func(i, j int) bool { return members[i].MemberID < members[j].MemberID })
	t := newTable(a.Out, "MEMBER", "NAME", "STATE", "EPOCH", "CURRENT", "GRANTED", "REVOKING", "LEASE EXPIRES")
	for _, m := range members {
		t.row(m.MemberID, orNone(m.MemberName), string(m.State), formatInt(m.MemberEpoch),
			formatShards(m.CurrentAssignment), formatShards(m.GrantedAssignment), formatShards(m.Revoking),
			formatTime(m.MemberLeaseExpiresAt))
	}
	return t.flush()
}

// GroupAssignmentsCmd is "rscoord group assignments".
type GroupAssignmentsCmd struct {
	GroupRef `embed:""`
}

// Run shows assignments: GET /monitoring/streams/{p}/groups/{g}/assignments.
func (c *GroupAssignmentsCmd) Run(ctx context.Context, a *Admin) error {
	if err := c.validate("group assignments"); err != nil {
		return err
	}
	var resp protocol.AssignmentsResponse
	path := coordclient.MonitoringGroupPath(c.Prefix, c.Group, "assignments")
	raw, err := a.Client.Do(ctx, http.MethodGet, path, nil, &resp)
	if err != nil {
		return fmt.Errorf("group assignments %s: %w", c.GroupRef, err)
	}
	if a.JSON {
		return printJSON(a.Out, raw)
	}
	members := sortedKeys(resp.TargetAssignment, resp.CurrentAssignments, resp.RevokeProgress)
	if len(members) == 0 {
		if err := printLine(a.Out, "No assignments."); err != nil {
			return err
		}
	} else {
		t := newTable(a.Out, "MEMBER", "TARGET", "CURRENT", "REVOKING")
		for _, m := range members {
			t.row(m, formatShards(resp.TargetAssignment[m]), formatShards(resp.CurrentAssignments[m]),
				formatShards(resp.RevokeProgress[m]))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if len(resp.InvariantViolations) == 0 {
		return printLine(a.Out, "\nNo invariant violations.")
	}
	if err := printLine(a.Out, "\nINVARIANT VIOLATIONS (%d):", len(resp.InvariantViolations)); err != nil {
		return err
	}
	for _, v := range resp.InvariantViolations {
		if err := printLine(a.Out, "  %s", v); err != nil {
			return err
		}
	}
	return nil
}
