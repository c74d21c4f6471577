package replica

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/cluster"
)

// Cluster-wide lists. Each replica's coordinator knows only the groups of
// the streams it runs, so a list asked of one replica is gathered from
// every replica: the replica asked answers its own part and asks every
// other registered replica (and any replica that still holds an owner key)
// for theirs, with the caller's credentials and a signed client address,
// marked X-Rscoord-Forwarded-By so that the others answer only their own
// part. A replica that does not answer within FanOutTimeout, or answers
// anything but 200, is named in the answer instead of failing it
// (docs/protocol.md §5.4).

// FanOutTimeout bounds how long a cluster-wide list waits for the other
// replicas: a dead replica refuses at once, a frozen one is named missing
// after this.
const FanOutTimeout = 2 * time.Second

// requestIDHeader is the gateway's request id header (gateway.RequestIDHeader):
// the parts of a list carry the caller's id into every replica's log.
const requestIDHeader = "X-Request-Id"

// maxFanOutBody bounds one replica's part of a list.
const maxFanOutBody = 64 << 20

// listMerge merges the parts of a cluster-wide list. It returns the merged
// JSON value and whether the missing replicas are named in it (else in
// protocol.MissingReplicasHeader); a part that does not parse is added to the
// missing ones; err only when this replica's own answer does not parse.
type listMerge func(l *listParts) (merged any, inBody bool, err error)

// listParts are the answers to a cluster-wide list.
type listParts struct {
	self  cluster.Replica
	local []byte     // this replica's own answer
	parts []listPart // the others' answers, in replica id order
	// missing are the replicas that did not answer with a 200.
	missing []protocol.MissingReplica
}

// failed moves a part that did not parse to the missing ones.
func (l *listParts) failed(p listPart, err error) {
	l.missing = append(l.missing, protocol.MissingReplica{ID: p.replica.ID, AdvertiseURL: p.replica.AdvertiseURL,
		Units: []string{}, Error: "its answer did not parse: " + err.Error()})
}

// listPart is one other replica's answer to a cluster-wide list.
type listPart struct {
	replica cluster.Replica
	body    []byte
}

// clusterLists are the routes answered for the whole cluster.
var clusterLists = map[string]listMerge{
	protocol.BasePath + "/monitoring/groups":                          mergeGroups,
	protocol.BasePath + "/monitoring/health":                          mergeHealth,
	protocol.BasePath + "/monitoring/grafana/groups":                  mergeRows,
	protocol.BasePath + "/monitoring/grafana/members":                 mergeRows,
	protocol.BasePath + "/monitoring/grafana/assignments":             mergeRows,
	protocol.BasePath + "/monitoring/grafana/shards":                  mergeRows,
	protocol.BasePath + "/monitoring/grafana/options/streams":         mergeOptions,
	protocol.BasePath + "/monitoring/grafana/options/consumer-groups": mergeOptions,
	protocol.BasePath + "/monitoring/grafana/options/shards":          mergeOptions,
}

// fanOutTargets are the replicas a cluster-wide list asks besides this
// one: every registered replica and every replica holding an owner key
// (one that died keeps its keys until its lease lapses: its streams are
// then missing, and named so), sorted by id, with the units each holds.
func (r *Runner) fanOutTargets() ([]cluster.Replica, map[string][]string) {
	self := r.node.Self().ID
	units := map[string][]string{}
	seen := map[string]bool{self: true}
	var out []cluster.Replica
	for _, rep := range r.node.Replicas() {
		if !seen[rep.ID] {
			seen[rep.ID] = true
			out = append(out, rep)
		}
	}
	for unit, h := range r.node.Holders() {
		units[h.ID] = append(units[h.ID], unit)
		if !seen[h.ID] {
			seen[h.ID] = true
			out = append(out, h)
		}
	}
	for _, u := range units {
		slices.Sort(u)
	}
	slices.SortFunc(out, func(a, b cluster.Replica) int { return strings.Compare(a.ID, b.ID) })
	return out, units
}

// fanOut answers a cluster-wide list: this replica's own answer merged with
// every other replica's. A local answer other than 200 (credentials, a bad
// query, a coordinator not running) is the answer, and nobody else is
// asked: a refused caller costs the others nothing.
func (f *Front) fanOut(w http.ResponseWriter, r *http.Request, rep *Runner, merge listMerge) {
	local := &bufferedResponse{header: http.Header{}}
	f.serveLocal(local, r, "", false)
	if local.status != http.StatusOK {
		local.writeTo(w)
		return
	}
	targets, units := rep.fanOutTargets()
	ctx, cancel := context.WithTimeout(r.Context(), FanOutTimeout)
	defer cancel()
	type answer struct {
		body []byte
		err  error
	}
	answers := make([]answer, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Go(func() {
			answers[i].body, answers[i].err = f.ask(ctx, r, t)
		})
	}
	wg.Wait()
	l := &listParts{self: rep.node.Self(), local: local.body.Bytes()}
	for i, t := range targets {
		if answers[i].err != nil {
			l.missing = append(l.missing, protocol.MissingReplica{ID: t.ID, AdvertiseURL: t.AdvertiseURL,
				Units: append([]string{}, units[t.ID]...), Error: answers[i].err.Error()})
			continue
		}
		l.parts = append(l.parts, listPart{replica: t, body: answers[i].body})
	}
	merged, inBody, err := merge(l)
	if err != nil {
		// This replica's own answer did not parse: a bug, not a caller's
		// mistake; show the local answer rather than nothing.
		f.log.Error("merging a cluster-wide list failed", "path", r.URL.Path, "error", err)
		local.writeTo(w)
		return
	}
	for k, v := range local.header {
		if k != "Content-Length" {
			w.Header()[k] = v
		}
	}
	if len(l.missing) > 0 && !inBody {
		ids := make([]string, len(l.missing))
		for i, m := range l.missing {
			ids[i] = m.ID
		}
		w.Header().Set(protocol.MissingReplicasHeader, strings.Join(ids, ","))
	}
	writeJSON(w, http.StatusOK, merged)
}

// ask sends r, as it came, to the replica t and returns its 200 answer's
// body; any other answer is an error saying what came.
func (f *Front) ask(ctx context.Context, r *http.Request, t cluster.Replica) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(t.AdvertiseURL, "/")+r.URL.RequestURI(), nil)
	if err != nil {
		return nil, fmt.Errorf("advertise URL %q: %w", t.AdvertiseURL, err)
	}
	for _, h := range []string{"Authorization", "Accept", requestIDHeader, realIPHeader} {
		if v := r.Header.Values(h); len(v) > 0 {
			req.Header[h] = v
		}
	}
	req.Header.Set(ForwardedByHeader, f.self)
	appendForwardedFor(req.Header, r.Header, r.RemoteAddr)
	if signed, ok := f.peers.sign(r.RemoteAddr, forwardedOf(r.Header), time.Now()); ok {
		req.Header.Set(clientAddressHeader, signed)
	}
	resp, err := f.transport.RoundTrip(req)
	if err != nil {
		if ctx.Err() != nil && r.Context().Err() == nil {
			return nil, fmt.Errorf("no answer within %v", FanOutTimeout)
		}
		return nil, fmt.Errorf("no answer: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxFanOutBody+1))
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, fmt.Errorf("answer not read within %v", FanOutTimeout)
	case err != nil:
		return nil, fmt.Errorf("reading its answer: %w", err)
	case len(body) > maxFanOutBody:
		return nil, fmt.Errorf("its answer is over %d bytes", maxFanOutBody)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("answered %w", coordclient.DecodeError(resp, body))
	}
	return body, nil
}

// bufferedResponse keeps the answer of this replica's own handler.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header { return b.header }

func (b *bufferedResponse) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}

func (b *bufferedResponse) Write(p []byte) (int, error) {
	b.WriteHeader(http.StatusOK)
	return b.body.Write(p)
}

// writeTo sends the kept answer on.
func (b *bufferedResponse) writeTo(w http.ResponseWriter) {
	for k, v := range b.header {
		w.Header()[k] = v
	}
	w.WriteHeader(cmp.Or(b.status, http.StatusOK))
	_, _ = w.Write(b.body.Bytes())
}

// mergeGroups merges GET /monitoring/groups: every group once, sorted by
// stream and name, and the missing replicas.
func mergeGroups(l *listParts) (any, bool, error) {
	var out protocol.GroupsResponse
	if err := json.Unmarshal(l.local, &out); err != nil {
		return nil, false, fmt.Errorf("this replica's groups: %w", err)
	}
	// Groups are keyed by stream and name, streams by prefix and "" (no
	// group is named "").
	seen := map[[2]string]bool{}
	for _, g := range out.Groups {
		seen[[2]string{g.StreamPrefix, g.ConsumerGroup}] = true
	}
	for _, st := range out.Streams {
		seen[[2]string{st.StreamPrefix, ""}] = true
	}
	for _, p := range l.parts {
		var resp protocol.GroupsResponse
		if err := json.Unmarshal(p.body, &resp); err != nil {
			l.failed(p, err)
			continue
		}
		// A stream that moved between two answers may be in both: once.
		for _, g := range resp.Groups {
			if k := [2]string{g.StreamPrefix, g.ConsumerGroup}; !seen[k] {
				seen[k] = true
				out.Groups = append(out.Groups, g)
			}
		}
		for _, st := range resp.Streams {
			if k := [2]string{st.StreamPrefix, ""}; !seen[k] {
				seen[k] = true
				out.Streams = append(out.Streams, st)
			}
		}
	}
	if out.Groups == nil {
		out.Groups = []protocol.GroupResponse{}
	}
	if out.Streams == nil {
		out.Streams = []protocol.StreamSummary{}
	}
	slices.SortStableFunc(out.Streams, func(a, b protocol.StreamSummary) int { return strings.Compare(a.StreamPrefix, b.StreamPrefix) })
	slices.SortStableFunc(out.Groups, func(a, b protocol.GroupResponse) int {
		return cmp.Or(strings.Compare(a.StreamPrefix, b.StreamPrefix), strings.Compare(a.ConsumerGroup, b.ConsumerGroup))
	})
	out.MissingReplicas = l.missing
	return out, true, nil
}

// mergeHealth merges GET /monitoring/health: this replica's components,
// every replica's status, and DEGRADED overall when another replica is
// not UP or did not answer (the cluster still serves: its streams move).
func mergeHealth(l *listParts) (any, bool, error) {
	var out protocol.Health
	if err := json.Unmarshal(l.local, &out); err != nil {
		return nil, false, fmt.Errorf("this replica's health: %w", err)
	}
	out.Replicas = []protocol.ReplicaHealth{{ID: l.self.ID, AdvertiseURL: l.self.AdvertiseURL, Status: out.Status, Message: healthMessage(out)}}
	for _, p := range l.parts {
		var h protocol.Health
		if err := json.Unmarshal(p.body, &h); err != nil {
			l.failed(p, err)
			continue
		}
		out.Replicas = append(out.Replicas, protocol.ReplicaHealth{ID: p.replica.ID, AdvertiseURL: p.replica.AdvertiseURL,
			Status: h.Status, Message: healthMessage(h)})
	}
	for _, m := range l.missing {
		out.Replicas = append(out.Replicas, protocol.ReplicaHealth{ID: m.ID, AdvertiseURL: m.AdvertiseURL,
			Status: protocol.HealthDown, Message: "did not answer: " + m.Error})
	}
	slices.SortStableFunc(out.Replicas[1:], func(a, b protocol.ReplicaHealth) int { return strings.Compare(a.ID, b.ID) })
	if out.Status == protocol.HealthUp && slices.ContainsFunc(out.Replicas, func(r protocol.ReplicaHealth) bool {
		return r.Status != protocol.HealthUp
	}) {
		out.Status = protocol.HealthDegraded
	}
	return out, true, nil
}

// healthMessage sums up the components of a replica that are not UP.
func healthMessage(h protocol.Health) string {
	var parts []string
	for _, c := range []struct {
		name string
		c    protocol.ComponentHealth
	}{{"redis", h.RedisDetail}, {"loop", h.LoopDetail}, {"store", h.Store}} {
		if c.c.Status != protocol.HealthUp && c.c.Status != protocol.HealthNotConfigured {
			msg := c.name + " " + c.c.Status
			if c.c.Message != "" {
				msg += ": " + c.c.Message
			}
			parts = append(parts, msg)
		}
	}
	return strings.Join(parts, "; ")
}

// mergeRows merges the Grafana row lists: every replica's rows, sorted by
// stream and group (each keeps its own order within a group).
func mergeRows(l *listParts) (any, bool, error) {
	type key struct {
		StreamPrefix  string `json:"streamPrefix"`
		ConsumerGroup string `json:"consumerGroup"`
	}
	type row struct {
		key
		raw json.RawMessage
	}
	parse := func(body []byte) ([]row, error) {
		var raws []json.RawMessage
		if err := json.Unmarshal(body, &raws); err != nil {
			return nil, err
		}
		rows := make([]row, len(raws))
		for i, raw := range raws {
			if err := json.Unmarshal(raw, &rows[i].key); err != nil {
				return nil, err
			}
			rows[i].raw = raw
		}
		return rows, nil
	}
	rows, err := parse(l.local)
	if err != nil {
		return nil, false, fmt.Errorf("this replica's rows: %w", err)
	}
	for _, p := range l.parts {
		more, err := parse(p.body)
		if err != nil {
			l.failed(p, err)
			continue
		}
		rows = append(rows, more...)
	}
	slices.SortStableFunc(rows, func(a, b row) int {
		return cmp.Or(strings.Compare(a.StreamPrefix, b.StreamPrefix), strings.Compare(a.ConsumerGroup, b.ConsumerGroup))
	})
	out := make([]json.RawMessage, len(rows))
	for i, r := range rows {
		out[i] = r.raw
	}
	return out, false, nil
}

// grafanaOption is one value of a Grafana dashboard variable.
type grafanaOption struct {
	Text  string `json:"__text"`
	Value string `json:"__value"`
}

// mergeOptions merges the Grafana variable options: each value once, in
// numeric order when every value is a number (shard indexes), else in
// name order.
func mergeOptions(l *listParts) (any, bool, error) {
	out := []grafanaOption{}
	seen := map[string]bool{}
	numeric := true
	add := func(opts []grafanaOption) {
		for _, o := range opts {
			if !seen[o.Value] {
				seen[o.Value] = true
				out = append(out, o)
				_, err := strconv.Atoi(o.Value)
				numeric = numeric && err == nil
			}
		}
	}
	var local []grafanaOption
	if err := json.Unmarshal(l.local, &local); err != nil {
		return nil, false, fmt.Errorf("this replica's options: %w", err)
	}
	add(local)
	for _, p := range l.parts {
		var opts []grafanaOption
		if err := json.Unmarshal(p.body, &opts); err != nil {
			l.failed(p, err)
			continue
		}
		add(opts)
	}
	slices.SortStableFunc(out, func(a, b grafanaOption) int {
		if numeric {
			x, _ := strconv.Atoi(a.Value)
			y, _ := strconv.Atoi(b.Value)
			return cmp.Compare(x, y)
		}
		return strings.Compare(a.Value, b.Value)
	})
	return out, false, nil
}
