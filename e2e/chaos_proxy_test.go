package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/internal/poll"
)

// errDropped makes the proxy's error handler close the connection without
// an answer: the heartbeat reached the coordinator, its answer is lost.
var errDropped = errors.New("chaos: response dropped")

// epochHeader carries a heartbeat's memberEpoch from the proxy's request
// rewrite to its response hook (the coordinator ignores it).
const epochHeader = "X-Chaos-Member-Epoch"

// hbProxy is an HTTP reverse proxy between one consumer pod and the
// coordinator. Switches drop or delay heartbeat responses after the
// coordinator answered them, drop the answer of a join (an epoch-0
// heartbeat answered OK), or make the pod's members ignore revocations
// (refuse: a shard taken away in an answer is put back into it, so the
// member keeps reading it, as a member alive but refusing to release
// would). It counts answers telling a member it is fenced or unknown
// while one of its previous answers was lost or late: a lost response must
// never fence (docs/protocol.md §6.1 step 5).
type hbProxy struct {
	srv       *httptest.Server
	transport *http.Transport

	mu       sync.Mutex
	drop     bool
	delay    time.Duration
	dropJoin bool
	refuse   bool
	// refuseOpen, shared by the proxies of one run: new refusals may
	// start. The first fence of a refusing member closes it, so that
	// members keep what they refuse already until they are fenced but
	// give up anything else as told: the rebalance after that fence does
	// not start another round of refusals.
	refuseOpen *atomic.Bool
	lost       map[string]bool // member → an answer since its last normal one was dropped or delayed
	dropped    int
	delayed    int
	needless   []string // fence answers after a lost answer
	fenceSeen  int      // every FENCED/UNKNOWN answer that went through
	// joinDropped: members whose join answer was dropped while dropJoin
	// was on (once per member per switch-on).
	joinDropped map[string]bool
	joinDrops   int
	// last is the assignment each member was last told (after any
	// rewrite); kept holds, per member, the shards it refuses to give up.
	last          map[string][]protocol.Shard
	kept          map[string]map[int]bool
	refusals      int      // shards put back into an answer (first time per member and shard)
	refuseFences  int      // fence answers to members that were refusing
	refuseHistory []string // what was refused, for the log

	// lateCopy, when positive, delivers every heartbeat with a positive
	// epoch a second time that much later, without its requestSeq: a
	// reference client's copy held up in the network. Its answer goes to
	// nobody. target is where copies go; late counts the copies in flight.
	lateCopy   time.Duration
	target     *url.URL
	late       sync.WaitGroup
	lateClient *http.Client
	lateSent   int // copies the coordinator answered
	lateFenced int // of them answered FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID
}

func newHBProxy(target string, refuseOpen *atomic.Bool) *hbProxy {
	u, err := url.Parse(target)
	if err != nil {
		panic(err)
	}
	p := &hbProxy{refuseOpen: refuseOpen, lost: map[string]bool{}, joinDropped: map[string]bool{}, last: map[string][]protocol.Shard{},
		kept: map[string]map[int]bool{}, transport: &http.Transport{MaxIdleConnsPerHost: 16}, target: u}
	p.lateClient = &http.Client{Transport: p.transport, Timeout: 5 * time.Second}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			if heartbeatMember(r.In.URL.Path) == "" || r.In.Body == nil {
				return
			}
			// Read the epoch; the body goes on unchanged.
			body, err := io.ReadAll(r.In.Body)
			if err != nil {
				return
			}
			r.Out.Body = io.NopCloser(bytes.NewReader(body))
			r.Out.ContentLength = int64(len(body))
			var hb struct {
				MemberEpoch int64 `json:"memberEpoch"`
			}
			if json.Unmarshal(body, &hb) == nil {
				r.Out.Header.Set(epochHeader, strconv.FormatInt(hb.MemberEpoch, 10))
				if hb.MemberEpoch > 0 {
					p.copyLater(r.In, body)
				}
			}
		},
		Transport:      p.transport,
		ModifyResponse: p.modify,
		ErrorHandler:   p.fail,
	}
	p.srv = httptest.NewServer(rp)
	return p
}

// URL is the proxy's base URL, for the pod's --coordinator.
func (p *hbProxy) URL() string { return p.srv.URL }

func (p *hbProxy) Close() {
	p.srv.CloseClientConnections()
	p.srv.Close()
	p.late.Wait()
	p.transport.CloseIdleConnections()
}

// setLateCopy switches delivering a late copy of every heartbeat with a
// positive epoch, d after it passed (0: off; copies under way still go).
func (p *hbProxy) setLateCopy(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lateCopy = d
}

// copyLater schedules the late copy of a heartbeat, when switched on.
func (p *hbProxy) copyLater(in *http.Request, body []byte) {
	var req map[string]any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // numbers go back as they came
	if dec.Decode(&req) != nil {
		return
	}
	delete(req, "requestSeq") // as a reference client's: nothing tells it late
	copied, err := json.Marshal(req)
	if err != nil {
		return
	}
	u := p.target.JoinPath(in.URL.Path)
	header := in.Header.Clone()
	// Counted under the lock that switches copies off, so that once they
	// are off no copy can start while lateStats waits.
	p.mu.Lock()
	d := p.lateCopy
	if d > 0 {
		p.late.Add(1)
	}
	p.mu.Unlock()
	if d <= 0 {
		return
	}
	time.AfterFunc(d, func() {
		defer p.late.Done()
		r, err := http.NewRequest(http.MethodPost, u.String(), bytes.NewReader(copied))
		if err != nil {
			return
		}
		r.Header = header
		resp, err := p.lateClient.Do(r)
		if err != nil {
			return // the coordinator was down: the copy is lost
		}
		defer resp.Body.Close()
		var hb protocol.HeartbeatResponse
		decoded := resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&hb) == nil
		p.mu.Lock()
		defer p.mu.Unlock()
		if decoded {
			p.lateSent++
			if hb.Status == protocol.StatusFencedMemberEpoch || hb.Status == protocol.StatusUnknownMemberID {
				p.lateFenced++
			}
		}
	})
}

// lateStats waits for the late copies under way and reports how many the
// coordinator answered, and how many of those it answered as fenced.
func (p *hbProxy) lateStats() (sent, fenced int) {
	p.late.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lateSent, p.lateFenced
}

// set switches the fault: drop every heartbeat answer, or delay each by d
// (both off: pass through).
func (p *hbProxy) set(drop bool, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drop, p.delay = drop, d
}

// setDropJoin switches dropping the next join answer of each member.
func (p *hbProxy) setDropJoin(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropJoin = on
	clear(p.joinDropped)
}

// setRefuse switches ignoring revocations; off, the shards kept are given
// up with the next answer that leaves them out.
func (p *hbProxy) setRefuse(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = on
	if !on {
		clear(p.kept)
	}
}

// refuseStats reports how many shards were refused and how many fences
// refusing members got.
func (p *hbProxy) refuseStats() (refusals, fences int, history []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refusals, p.refuseFences, append([]string(nil), p.refuseHistory...)
}

func (p *hbProxy) joinDropCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.joinDrops
}

// forget clears the lost-answer marks: a fault on the pod itself (kill,
// stop, restart) makes later fences legitimate.
func (p *hbProxy) forget() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.lost)
}

func (p *hbProxy) stats() (dropped, delayed int, needless []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropped, p.delayed, append([]string(nil), p.needless...)
}

// heartbeatMember is the member id of a heartbeat path, else "".
func heartbeatMember(path string) string {
	if !strings.HasSuffix(path, "/heartbeat") {
		return ""
	}
	parts := strings.Split(path, "/")
	for i := range parts {
		if parts[i] == "members" && i+1 < len(parts) {
			return parts[i+1]
		}
	}
	return ""
}

func (p *hbProxy) modify(resp *http.Response) error {
	member := heartbeatMember(resp.Request.URL.Path)
	if member == "" {
		return nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	var hb protocol.HeartbeatResponse
	decoded := resp.StatusCode == http.StatusOK && json.Unmarshal(body, &hb) == nil
	fenced := hb.Status == protocol.StatusFencedMemberEpoch || hb.Status == protocol.StatusUnknownMemberID
	joinAnswer := resp.Request.Header.Get(epochHeader) == "0" && hb.Status == protocol.StatusOK

	p.mu.Lock()
	if decoded {
		if p.refuseLocked(member, &hb, fenced) {
			if b, err := json.Marshal(hb); err == nil {
				body = b
				resp.ContentLength = int64(len(b))
				resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
			}
		}
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	dropThisJoin := false
	if joinAnswer && p.dropJoin && !p.joinDropped[member] {
		p.joinDropped[member] = true
		p.joinDrops++
		dropThisJoin = true
	}
	if fenced {
		p.fenceSeen++
		if p.lost[member] {
			p.needless = append(p.needless, fmt.Sprintf("%s answered %s at %s after a lost or late answer",
				member, hb.Status, time.Now().Format("15:04:05.000")))
		}
	}
	drop, delay := p.drop || dropThisJoin, p.delay
	switch {
	case drop:
		p.dropped++
		p.lost[member] = true
	case delay > 0:
		p.delayed++
		p.lost[member] = true
	default:
		delete(p.lost, member)
	}
	p.mu.Unlock()
	if drop {
		return errDropped
	}
	if delay > 0 {
		// The answer is held up in the network; a member that gives up
		// on it ends the wait.
		poll.Hold(resp.Request.Context(), delay)
	}
	return nil
}

// refuseLocked applies the refuse switch to one decoded answer: shards the
// member was told before and that this answer leaves out are put back
// (with their old ownerEpoch) while refuse is on. It tracks what each
// member was last told, and reports whether hb was changed.
func (p *hbProxy) refuseLocked(member string, hb *protocol.HeartbeatResponse, fenced bool) (changed bool) {
	if fenced {
		if len(p.kept[member]) > 0 {
			p.refuseOpen.Store(false)
			p.refuseFences++
			p.refuseHistory = append(p.refuseHistory, fmt.Sprintf("%s %s: fenced while refusing to release %v",
				time.Now().Format("15:04:05.000"), member, slices.Sorted(maps.Keys(p.kept[member]))))
		}
		delete(p.kept, member)
		delete(p.last, member)
		return false
	}
	switch hb.Status {
	case protocol.StatusOK, protocol.StatusSyncMetadata, protocol.StatusRevokePending:
	default:
		return false
	}
	prev := p.last[member]
	if p.refuse {
		has := map[int]bool{}
		for _, s := range hb.Assignment.AssignedShards {
			has[s.ShardIndex] = true
		}
		for _, s := range prev {
			if has[s.ShardIndex] || (!p.refuseOpen.Load() && !p.kept[member][s.ShardIndex]) {
				continue
			}
			hb.Assignment.AssignedShards = append(hb.Assignment.AssignedShards, s)
			changed = true
			if p.kept[member] == nil {
				p.kept[member] = map[int]bool{}
			}
			if !p.kept[member][s.ShardIndex] {
				p.kept[member][s.ShardIndex] = true
				p.refusals++
				p.refuseHistory = append(p.refuseHistory, fmt.Sprintf("%s %s: refuses to release shard %d (%s)",
					time.Now().Format("15:04:05.000"), member, s.ShardIndex, hb.Status))
			}
		}
		slices.SortFunc(hb.Assignment.AssignedShards, func(a, b protocol.Shard) int { return a.ShardIndex - b.ShardIndex })
	}
	p.last[member] = slices.Clone(hb.Assignment.AssignedShards)
	return changed
}

// fail closes the client connection for a dropped answer (no byte of it
// was written), else answers 502 like any proxy whose backend is down.
func (p *hbProxy) fail(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, errDropped) {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	}
	w.WriteHeader(http.StatusBadGateway)
}
