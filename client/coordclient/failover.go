package coordclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// downFor is how long a URL that could not serve a call stays behind the
// others when no answer of its own clears it sooner. It is tried last
// meanwhile, and an owner hint naming it is not followed; after it, the
// hint is followed again, so a replica that is back is found without a
// probe of its own.
const downFor = 10 * time.Second

// outcome is what one attempt at one URL says about that URL.
type outcome int

const (
	// answered: the URL answered, and the answer stands (a 2xx, or an
	// error the caller must see, such as a 404).
	answered outcome = iota
	// notSent: no connection could be made, so the request never left;
	// any call may be sent to another URL.
	notSent
	// unavailable: the URL cannot serve now. It did not answer in time,
	// broke the connection, answered 502, 503 or 504, or answered a
	// heartbeat RETRY whose errorCode says another replica may serve it
	// (protocol.ErrorCode.ServedElsewhere). The request may have been
	// carried out, so only a read or a heartbeat is sent again.
	unavailable
	// cancelled: the caller gave up (or another attempt won); that says
	// nothing about the URL.
	cancelled
)

// result is one attempt at one URL.
type result struct {
	idx  int
	raw  []byte
	hint string
	err  error
	out  outcome
}

// send runs one call: at the URL order gives first, then, while the
// outcome allows, at the next. resend says the call may be carried out
// twice without harm (a read, a login): it is sent again after an
// unavailable outcome too, not only after notSent.
func (c *Client) send(ctx context.Context, method, path string, body []byte, out any, resend bool) ([]byte, error) {
	if c.opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.Timeout)
		defer cancel()
	}
	var errs []error
	for _, idx := range c.order() {
		r := c.once(ctx, idx, method, path, body, out)
		c.settle(r)
		switch {
		case r.out == answered:
			return r.raw, r.err
		case r.out == notSent, r.out == unavailable && resend:
			errs = append(errs, r.err)
			if ctx.Err() != nil {
				return nil, errors.Join(errs...)
			}
		default:
			return nil, errors.Join(append(errs, r.err)...)
		}
	}
	return nil, errors.Join(errs...)
}

// order is the sequence in which a call tries the URLs: from the current
// one on, round the list, those not marked down first, then those marked
// down (in the same rotation), so that a call still reaches a replica when
// every URL failed lately.
func (c *Client) order() []int {
	n := len(c.bases)
	first := int(c.cur.Load()) % n
	up := make([]int, 0, n)
	var down []int
	for i := range n {
		idx := (first + i) % n
		if c.isDown(idx) {
			down = append(down, idx)
		} else {
			up = append(up, idx)
		}
	}
	return append(up, down...)
}

// isDown reports whether URL idx failed lately and has not answered since.
func (c *Client) isDown(idx int) bool {
	until := c.down[idx].Load()
	return until != 0 && c.now().UnixNano() < until
}

// settle records what an attempt says about its URL. An answer clears the
// URL's mark and makes the next calls start there, or at the URL its
// owner hint names when that one is not marked down. A URL that could not
// serve is marked down, and calls that would start at it start at the
// next URL not marked instead. A cancelled attempt changes nothing.
func (c *Client) settle(r result) {
	switch r.out {
	case answered:
		c.down[r.idx].Store(0)
		next := r.idx
		if owner, ok := c.hinted(r.hint); ok && !c.isDown(owner) {
			next = owner
		}
		c.cur.Store(int32(next))
	case notSent, unavailable:
		c.down[r.idx].Store(c.now().Add(downFor).UnixNano())
		c.cur.CompareAndSwap(int32(r.idx), int32(c.after(r.idx)))
	}
}

// after is the first URL after idx, round the list, that is not marked
// down; the one right after idx when every URL is.
func (c *Client) after(idx int) int {
	n := len(c.bases)
	for i := 1; i < n; i++ {
		if j := (idx + i) % n; !c.isDown(j) {
			return j
		}
	}
	return (idx + 1) % n
}

// once runs the call against URL idx and says what came of it. A 2xx
// answer is decoded into out when out is not nil.
func (c *Client) once(ctx context.Context, idx int, method, path string, body []byte, out any) result {
	target := c.bases[idx] + path
	r := result{idx: idx}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		r.err = fmt.Errorf("%s %s: %w", method, target, err)
		return r
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.opts.Authorization != "" {
		req.Header.Set("Authorization", c.opts.Authorization)
	}
	if c.opts.UserAgent != "" {
		req.Header.Set("User-Agent", c.opts.UserAgent)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		r.err, r.out = c.transportError(ctx, method, target, err), failed(ctx, err)
		return r
	}
	defer resp.Body.Close()
	r.hint = resp.Header.Get(protocol.OwnerURLHeader)
	limit := c.opts.MaxResponseBytes
	raw, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		// The connection broke (or the call timed out) in the middle of
		// the answer: the replica did not serve it.
		r.err = fmt.Errorf("%s %s: read answer: %w", method, target, err)
		r.out = failed(ctx, err)
		if r.out == notSent {
			r.out = unavailable
		}
		return r
	}
	if int64(len(raw)) > limit {
		r.err = fmt.Errorf("%s %s: answer is larger than %d bytes", method, target, limit)
		return r
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		r.err = fmt.Errorf("%s %s: %w", method, target, DecodeError(resp, raw))
		if gatewayFailure(resp.StatusCode) {
			r.out = unavailable
		}
		return r
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			r.err = fmt.Errorf("%s %s: decode answer: %w", method, target, err)
			return r
		}
	}
	r.raw = raw
	return r
}

// gatewayFailure reports whether an HTTP status says this replica (or a
// proxy in front of it) cannot serve the call now, while another may:
// 503 (the coordinator's own: shutting down, store unavailable, the stream
// on the move; or a proxy's), and 502 and 504, which only proxies answer.
func gatewayFailure(status int) bool {
	switch status {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// failed is the outcome of a transport error: notSent when no connection
// was made, cancelled when the caller gave up (or another attempt won),
// unavailable otherwise: a timeout (the call's deadline passed while this
// URL held it), a reset or closed connection.
func failed(ctx context.Context, err error) outcome {
	switch ctxErr := ctx.Err(); {
	case errors.Is(ctxErr, context.Canceled):
		return cancelled
	case ctxErr != nil:
		return unavailable
	case dialFailed(err):
		return notSent
	}
	return unavailable
}

// transportError names a timeout or cancellation plainly instead of
// through the transport's nested error text.
func (c *Client) transportError(ctx context.Context, method, target string, err error) error {
	switch ctxErr := ctx.Err(); {
	case errors.Is(ctxErr, context.DeadlineExceeded) && c.opts.Timeout > 0:
		return fmt.Errorf("%s %s: no answer within %v: %w", method, target, c.opts.Timeout, ctxErr)
	case ctxErr != nil:
		return fmt.Errorf("%s %s: %w", method, target, ctxErr)
	}
	// *url.Error repeats method and URL; keep only its cause.
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		err = urlErr.Err
	}
	return fmt.Errorf("%s %s: %w", method, target, err)
}

// dialFailed reports whether err means no connection was made, so the
// request was never sent and another replica may take it.
func dialFailed(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}
