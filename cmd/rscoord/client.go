package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rscoord/rscoord/protocol"
)

// maxResponseBytes bounds how much of a response body the CLI reads. The
// largest admin answer (every group of a big deployment) stays far below it.
const maxResponseBytes = 64 << 20

// Client is the small HTTP client of the admin commands: it sends JSON to the
// coordinator's /coord/v1 API and decodes answers and §3 error bodies.
// The zero value is not usable; build one with [NewClient].
type Client struct {
	base    string // server URL without a trailing slash
	timeout time.Duration
	http    *http.Client
	// authorization is sent as the Authorization header when not empty.
	authorization string
}

// NewClient returns a client for the coordinator at server (an http or https
// URL, optionally with a path prefix, or host:port for http://host:port).
// Each request is bounded by timeout; zero means no bound beyond the
// caller's context.
func NewClient(server string, timeout time.Duration) (*Client, error) {
	if !strings.Contains(server, "://") && server != "" {
		server = "http://" + server
	}
	u, err := url.Parse(server)
	if err != nil {
		return nil, fmt.Errorf("server URL %q: %w", server, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("server URL %q: want http://host:port or https://host:port", server)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("server URL %q: must not carry a query, fragment or user info", server)
	}
	if timeout < 0 {
		return nil, fmt.Errorf("timeout %s: must not be negative", timeout)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	// A CLI run makes one request: keep-alive connections would only outlive
	// the command (and show up as leaked goroutines in tests).
	transport.DisableKeepAlives = true
	return &Client{
		base:    strings.TrimRight(server, "/"),
		timeout: timeout,
		http:    &http.Client{Transport: transport},
	}, nil
}

// APIError is a non-2xx answer of the coordinator, decoded from the error
// body of docs/protocol.md §3.
type APIError struct {
	// StatusCode is the HTTP status code, e.g. 409.
	StatusCode int
	// Body is the decoded error body. When the server (or a proxy in front
	// of it) did not answer a §3 body, ErrorCode is empty and Message holds
	// the start of whatever it did answer.
	Body protocol.ErrorBody
	// RetryAfter is the Retry-After header of a 429 or 503, if any.
	RetryAfter string
}

// Error reads "409 GROUP_ALREADY_EXISTS: Group already exists".
func (e *APIError) Error() string {
	var b strings.Builder
	b.WriteString(strconv.Itoa(e.StatusCode))
	if e.Body.ErrorCode != "" {
		b.WriteString(" ")
		b.WriteString(string(e.Body.ErrorCode))
	} else if text := http.StatusText(e.StatusCode); text != "" {
		b.WriteString(" ")
		b.WriteString(text)
	}
	if e.Body.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Body.Message)
	}
	if e.RetryAfter != "" {
		b.WriteString(" (retry after ")
		b.WriteString(e.RetryAfter)
		b.WriteString("s)")
	}
	return b.String()
}

// Do sends method to the API path made of segments (each one URL-escaped,
// below /coord/v1), with in encoded as the JSON body when it is not nil.
// A 2xx answer is decoded into out when out is not nil and returned raw, for
// --json. Any other answer is returned as an *APIError.
func (c *Client) Do(ctx context.Context, method string, segments []string, in, out any) ([]byte, error) {
	return c.DoQuery(ctx, method, segments, nil, in, out)
}

// DoQuery is [Client.Do] with query parameters.
func (c *Client) DoQuery(ctx context.Context, method string, segments []string, query url.Values, in, out any) ([]byte, error) {
	target := c.url(segments)
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	var body io.Reader
	if in != nil {
		encoded, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("encode %s %s: %w", method, target, err)
		}
		body = bytes.NewReader(encoded)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return nil, fmt.Errorf("build %s %s: %w", method, target, err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "rscoord-cli/"+buildVersion())
	if c.authorization != "" {
		req.Header.Set("Authorization", c.authorization)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// Name a timeout or an interrupt plainly instead of through the
		// transport's nested error text.
		switch ctxErr := ctx.Err(); {
		case errors.Is(ctxErr, context.DeadlineExceeded) && c.timeout > 0:
			return nil, fmt.Errorf("%s %s: no answer within %s (--timeout): %w", method, target, c.timeout, ctxErr)
		case ctxErr != nil:
			return nil, fmt.Errorf("%s %s: %w", method, target, ctxErr)
		}
		// *url.Error repeats method and URL; keep only its cause.
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			err = urlErr.Err
		}
		return nil, fmt.Errorf("%s %s: %w", method, target, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: read answer: %w", method, target, err)
	}
	if len(raw) > maxResponseBytes {
		return nil, fmt.Errorf("%s %s: answer is larger than %d bytes", method, target, maxResponseBytes)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, decodeAPIError(resp, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return nil, fmt.Errorf("%s %s: decode answer: %w", method, target, err)
		}
	}
	return raw, nil
}

// url joins the server, the protocol base path and the escaped segments.
func (c *Client) url(segments []string) string {
	var b strings.Builder
	b.WriteString(c.base)
	b.WriteString(protocol.BasePath)
	for _, s := range segments {
		b.WriteString("/")
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}

// decodeAPIError turns a non-2xx answer into an *APIError, falling back to
// the first line of the body when it is not a §3 error body.
func decodeAPIError(resp *http.Response, raw []byte) *APIError {
	apiErr := &APIError{StatusCode: resp.StatusCode}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		apiErr.RetryAfter = resp.Header.Get("Retry-After")
	}
	var body protocol.ErrorBody
	if err := json.Unmarshal(raw, &body); err == nil && body.ErrorCode != "" {
		apiErr.Body = body
		return apiErr
	}
	text := strings.TrimSpace(string(raw))
	if i := strings.IndexByte(text, '\n'); i >= 0 {
		text = text[:i]
	}
	if len(text) > 200 {
		text = text[:200] + "…"
	}
	apiErr.Body.Message = text
	return apiErr
}
