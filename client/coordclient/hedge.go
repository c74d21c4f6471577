package coordclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// maxHedgeBound is the longest a heartbeat waits for its answer, beyond
// the waitMs it asked to be held, before it is sent to another URL too.
const maxHedgeBound = time.Second

// Heartbeat posts req for its member of prefix/group and decodes the
// answer. Every answer of a working coordinator is HTTP 200 (a status in
// the body says what to do); anything else is an *Error.
//
// With several URLs a heartbeat is hedged. It goes to the URL calls start
// at; when that one cannot serve it (no connection, a broken connection,
// 502–504, or RETRY with an errorCode that says another replica may serve
// it: protocol.ErrorCode.ServedElsewhere), or has not answered within
// req.WaitMs plus the hedge bound (min(1 s, member lease / 6)), the same
// request, same requestId and requestSeq, goes to the next URL, each URL
// at most once per call. Heartbeats are idempotent by requestId and
// requestSeq (docs/protocol.md §9.2): a coordinator that gets both copies
// decides the same report twice, or answers the later one RETRY, and
// changes nothing else. The copies carry waitMs 0, since they are sent
// because time ran short. The first answer that is not RETRY wins and the
// other copies are cancelled; a RETRY from one URL waits for the copies
// still out, unless every URL has been tried and those still out are past
// their bound.
func (c *Client) Heartbeat(ctx context.Context, prefix, group string, req *protocol.HeartbeatRequest) (protocol.HeartbeatResponse, error) {
	path := HeartbeatPath(prefix, group, req.MemberID)
	first, err := json.Marshal(req)
	if err != nil {
		return protocol.HeartbeatResponse{}, fmt.Errorf("%s %s: encode: %w", http.MethodPost, path, err)
	}
	again := first
	if req.WaitMs != 0 {
		copyReq := *req
		copyReq.WaitMs = 0
		if again, err = json.Marshal(&copyReq); err != nil {
			return protocol.HeartbeatResponse{}, fmt.Errorf("%s %s: encode: %w", http.MethodPost, path, err)
		}
	}
	resp, err := c.hedge(ctx, path, first, again, time.Duration(req.WaitMs)*time.Millisecond)
	if err == nil && resp.MemberLeaseMs > 0 {
		c.lease.Store(int64(time.Duration(resp.MemberLeaseMs) * time.Millisecond))
	}
	return resp, err
}

// HedgeBound is how long a heartbeat waits for its answer, beyond the
// waitMs it asked for, before it is sent to another URL too: min(1 s,
// lease/6), with the lease of Options.MemberLease, lowered to the
// memberLeaseMs of the last answer that carried one.
func (c *Client) HedgeBound() time.Duration {
	lease := c.opts.MemberLease
	if l := time.Duration(c.lease.Load()); l > 0 && (lease <= 0 || l < lease) {
		lease = l
	}
	if lease <= 0 {
		lease = protocol.DefaultMemberLease
	}
	return min(maxHedgeBound, lease/6)
}

// beat is one heartbeat attempt: its result and its decoded answer.
type beat struct {
	result
	resp protocol.HeartbeatResponse
}

// decisive reports whether the attempt ends the call: an answer that is
// not RETRY, or an error the caller must see (a 401, a 400, an answer
// that does not decode).
func (b *beat) decisive() bool {
	return b.out == answered && (b.err != nil || b.resp.Status != protocol.StatusRetry)
}

// hedge sends a heartbeat body (first to the first URL, again to the
// others) as Heartbeat describes; wait is the hold first asked for.
func (c *Client) hedge(ctx context.Context, path string, first, again []byte, wait time.Duration) (protocol.HeartbeatResponse, error) {
	if c.opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.Timeout)
		defer cancel()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	order := c.order()
	beats := make(chan *beat, len(order))
	launched, pending := 0, map[int]bool{}
	launch := func() {
		idx, body := order[launched], again
		if launched == 0 {
			body = first
		}
		launched++
		pending[idx] = true
		go func() {
			b := &beat{}
			b.result = c.once(ctx, idx, http.MethodPost, path, body, &b.resp)
			if b.out == answered && b.err == nil && b.resp.Status == protocol.StatusRetry && b.resp.ErrorCode.ServedElsewhere() {
				b.out = unavailable
			}
			beats <- b
		}()
	}
	// end cancels the copies still out and waits for them, so that no
	// goroutine outlives the call.
	end := func() {
		cancel()
		for range pending {
			<-beats
		}
	}
	bound := c.HedgeBound()
	timer := time.NewTimer(wait + bound)
	defer timer.Stop()
	launch()
	// late: every copy still out has passed its bound.
	late := false
	var retry *beat
	var errs []error
	for len(pending) > 0 {
		select {
		case b := <-beats:
			delete(pending, b.idx)
			c.settle(b.result)
			if c.heard != nil {
				c.heard(b.resp.Status)
			}
			if b.decisive() {
				end()
				return b.resp, b.err
			}
			if b.err == nil {
				retry = b // a RETRY: the answer to return if none better comes
			} else {
				errs = append(errs, b.err)
			}
			moveOn := b.out == notSent || b.out == unavailable
			switch {
			case moveOn && launched < len(order) && ctx.Err() == nil:
				launch()
				late = false
				timer.Reset(bound)
			case retry != nil && late && launched == len(order):
				end()
				return retry.resp, nil
			}
		case <-timer.C:
			// The copies out have not answered within their bound: their
			// URLs count as timed out (an answer still clears them).
			for idx := range pending {
				c.settle(result{idx: idx, out: unavailable})
			}
			late = true
			switch {
			case launched < len(order):
				launch()
				late = false
				timer.Reset(bound)
			case retry != nil:
				end()
				return retry.resp, nil
			}
		}
	}
	// A caller that gave up is told so, RETRY or not: it cancels a held
	// heartbeat to send a report at once, and waits for that error.
	switch {
	case retry == nil:
		return protocol.HeartbeatResponse{}, errors.Join(errs...)
	case errors.Is(ctx.Err(), context.Canceled):
		return protocol.HeartbeatResponse{}, fmt.Errorf("%s %s: %w", http.MethodPost, path, ctx.Err())
	}
	return retry.resp, nil
}
