package coordclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// DefaultMaxResponseBytes bounds how much of an answer a Client reads
// unless Options say otherwise; the largest answers (every group of a big
// deployment, the routing of 100,000 shards) stay far below it.
const DefaultMaxResponseBytes = 64 << 20

// Options tune a [Client]; the zero value is usable.
type Options struct {
	// HTTPClient sends the requests. Default: a client with a transport
	// of its own (a clone of http.DefaultTransport), whose idle
	// connections CloseIdleConnections closes.
	HTTPClient *http.Client
	// Authorization is sent as the Authorization header of every call;
	// "" sends none. Build it with BasicAuth, BearerAuth or
	// Credentials.Authorization.
	Authorization string
	// UserAgent is sent as the User-Agent header when not empty.
	UserAgent string
	// Timeout bounds each call, retries and hedges on other URLs
	// included; 0 leaves the caller's context alone.
	Timeout time.Duration
	// MemberLease is the member lease the caller works under (a member
	// runtime's own setting): a heartbeat not answered within
	// min(1 s, lease/6) of its waitMs is sent once more to another URL
	// (hedged heartbeats, see Client.Heartbeat). The client lowers it to
	// the memberLeaseMs its heartbeat answers carry. 0: the protocol's
	// default lease until an answer tells.
	MemberLease time.Duration
	// MaxResponseBytes bounds an answer; a larger one is an error.
	// Default DefaultMaxResponseBytes.
	MaxResponseBytes int64
	// H2C makes the default transport speak HTTP/2 over cleartext with
	// prior knowledge (a coordinator started with --http2): the calls of
	// the client, held heartbeats included, share a connection once it is
	// open (calls racing the first dial, or a burst, may dial for
	// themselves; a further one opens when the server's stream limit is
	// reached).
	// For http:// URLs only, and only without HTTPClient; HTTP/1.1 is
	// not tried.
	H2C bool
}

// Client calls one coordinator, or a cluster of them, over HTTP. Build it
// with [New]; it is safe for concurrent use.
type Client struct {
	bases []string
	// canon are bases in canonical form (canonicalURL), to recognise the
	// owner hint of an answer among them.
	canon []string
	// cur is the index of the base URL calls try first: the last one that
	// answered, or the one its answer named (the owner hint).
	cur atomic.Int32
	// down holds, per base URL, until when (nanoseconds on now's clock)
	// the URL counts as unable to serve: it failed to connect, timed out,
	// broke the connection, answered 502–504 or a heartbeat RETRY served
	// elsewhere. 0 while it answers. Calls try such a URL last, and an
	// owner hint naming it is not followed.
	down []atomic.Int64
	// lease is the memberLeaseMs of the last heartbeat answer that carried
	// one, in nanoseconds; 0 before.
	lease atomic.Int64
	// now is the clock of down; time.Now but in tests.
	now func() time.Time
	// heard, when not nil (tests), is called with each heartbeat copy's
	// status once the call took its answer in: tests order a second copy's
	// answer after the first's by it.
	heard func(status protocol.Status)
	http  *http.Client
	opts  Options
}

// New returns a client of the coordinators at urls. Each entry is
// "host:port" (http is assumed) or an http or https URL, optionally with a
// path prefix and the API base path (/coord/v1, which is dropped); an
// entry may list several, comma-separated. Several URLs are replicas of
// one cluster: calls move on from a replica that cannot serve them (see
// the package documentation for the rules).
func New(urls []string, o Options) (*Client, error) {
	bases, err := ParseURLs(urls...)
	if err != nil {
		return nil, err
	}
	if o.Timeout < 0 {
		return nil, fmt.Errorf("coordclient: timeout %v must not be negative", o.Timeout)
	}
	if o.MemberLease < 0 {
		return nil, fmt.Errorf("coordclient: member lease %v must not be negative", o.MemberLease)
	}
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = DefaultMaxResponseBytes
	}
	hc := o.HTTPClient
	if o.H2C {
		if hc != nil {
			return nil, errors.New("coordclient: H2C configures the default transport: set it on your HTTPClient's transport instead")
		}
		for _, b := range bases {
			if !strings.HasPrefix(b, "http://") {
				return nil, fmt.Errorf("coordclient: H2C (HTTP/2 over cleartext) needs http:// URLs, not %s (HTTPS negotiates HTTP/2 by itself)", b)
			}
		}
	}
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		if o.H2C {
			tr.Protocols = new(http.Protocols)
			tr.Protocols.SetUnencryptedHTTP2(true)
		}
		hc = &http.Client{Transport: tr}
	}
	canon := make([]string, len(bases))
	for i, b := range bases {
		canon[i] = canonicalURL(b)
	}
	return &Client{bases: bases, canon: canon, down: make([]atomic.Int64, len(bases)), now: time.Now, http: hc, opts: o}, nil
}

// ParseURLs checks coordinator base URLs (see [New]) and returns them as
// "scheme://host[:port][/prefix]", without a trailing slash or API base
// path. Empty entries are skipped; at least one URL is required.
func ParseURLs(urls ...string) ([]string, error) {
	var out []string
	var errs []error
	for _, entry := range urls {
		for _, raw := range strings.Split(entry, ",") {
			raw = strings.TrimSpace(raw)
			if raw == "" {
				continue
			}
			base, err := parseURL(raw)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			out = append(out, base)
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("coordclient: %w", errors.Join(errs...))
	}
	if len(out) == 0 {
		return nil, errors.New("coordclient: a coordinator URL is required")
	}
	return out, nil
}

func parseURL(raw string) (string, error) {
	s := raw
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("coordinator URL %q: %w", raw, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("coordinator URL %q: want host:port, http://host:port or https://host:port", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("coordinator URL %q: must not carry a query, fragment or user info (use credentials options)", raw)
	}
	base := strings.TrimRight(s, "/")
	base = strings.TrimSuffix(base, protocol.BasePath)
	return strings.TrimRight(base, "/"), nil
}

// URLs are the client's base URLs, in the order given.
func (c *Client) URLs() []string { return append([]string(nil), c.bases...) }

// URL is the base URL calls try first now.
func (c *Client) URL() string { return c.bases[int(c.cur.Load())%len(c.bases)] }

// CloseIdleConnections closes the idle connections of the HTTP client.
func (c *Client) CloseIdleConnections() { c.http.CloseIdleConnections() }

// Do sends method to path (from the path functions of this package), with
// in encoded as the JSON body when not nil. A 2xx answer is decoded into out
// when out is not nil and returned raw. Any other answer is an *Error; a
// transport failure is an error naming method and URL.
//
// A GET or HEAD is a read and is sent again to the next URL when one
// cannot serve it (no connection, a broken connection, 502–504). Any other
// method may change something and is sent to another URL only when no
// connection could be made (the request never left); once it may have
// been sent, its error is returned, and only the next call moves on.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) ([]byte, error) {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return nil, fmt.Errorf("%s %s: encode: %w", method, path, err)
		}
	}
	return c.send(ctx, method, path, body, out, method == http.MethodGet || method == http.MethodHead)
}

// ProducerRouting fetches the producer routing of prefix/group.
func (c *Client) ProducerRouting(ctx context.Context, prefix, group string) (protocol.ProducerRoutingResponse, error) {
	var resp protocol.ProducerRoutingResponse
	_, err := c.Do(ctx, http.MethodGet, ProducerRoutingPath(prefix, group), nil, &resp)
	return resp, err
}

// Login exchanges a user and password for an access token.
func (c *Client) Login(ctx context.Context, user, password string) (protocol.LoginResponse, error) {
	// A login changes nothing on the coordinator: sent twice, it issues a
	// second token. It may be sent again elsewhere, as a read is.
	var resp protocol.LoginResponse
	body, err := json.Marshal(protocol.LoginRequest{Username: user, Password: password})
	if err != nil {
		return resp, fmt.Errorf("login: encode: %w", err)
	}
	_, err = c.send(ctx, http.MethodPost, LoginPath(), body, &resp, true)
	return resp, err
}

// hinted is the index of the client's URL that hint (a protocol.OwnerURLHeader
// value) names; ok is false when it names none of them, is empty or is
// not a URL.
func (c *Client) hinted(hint string) (int, bool) {
	if hint == "" || len(c.bases) < 2 {
		return 0, false
	}
	base, err := parseURL(strings.TrimSpace(hint))
	if err != nil {
		return 0, false
	}
	want := canonicalURL(base)
	for i, have := range c.canon {
		if have == want {
			return i, true
		}
	}
	return 0, false
}

// canonicalURL is base (from parseURL) with scheme and host in lower case
// and the scheme's default port dropped, so that two spellings of one
// replica's URL compare equal.
func canonicalURL(base string) string {
	u, err := url.Parse(base)
	if err != nil {
		return base
	}
	scheme := strings.ToLower(u.Scheme)
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	if port != "" {
		host = net.JoinHostPort(host, port)
	} else if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return scheme + "://" + host + strings.TrimRight(u.EscapedPath(), "/")
}
