package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/rscoord/rscoord/client/coordclient"
)

// Client is the HTTP client of the admin commands: a thin layer over the
// wire layer (package coordclient), whose path helpers name the API paths.
// The zero value is not usable; build one with [NewClient].
type Client struct {
	base    string // server URL as checked by the wire layer
	timeout time.Duration
	http    *http.Client
	// authorization is sent as the Authorization header when not empty;
	// commands may set it after NewClient (a saved login, say).
	authorization string
}

// NewClient returns a client for the coordinator at server (an http or https
// URL, optionally with a path prefix, or host:port for http://host:port).
// Each request is bounded by timeout; zero means no bound beyond the
// caller's context.
func NewClient(server string, timeout time.Duration) (*Client, error) {
	if timeout < 0 {
		return nil, fmt.Errorf("timeout %s: must not be negative", timeout)
	}
	bases, err := coordclient.ParseURLs(server)
	if err != nil {
		return nil, fmt.Errorf("server URL %q: %w", server, err)
	}
	if len(bases) != 1 {
		return nil, fmt.Errorf("server URL %q: give one URL", server)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	// A CLI run makes one request: keep-alive connections would only outlive
	// the command (and show up as leaked goroutines in tests).
	transport.DisableKeepAlives = true
	return &Client{base: bases[0], timeout: timeout, http: &http.Client{Transport: transport}}, nil
}

// APIError is a non-2xx answer of the coordinator, decoded from the error
// body of docs/protocol.md §3 (the wire layer's one error type).
type APIError = coordclient.Error

// Do sends method to the API path (escaped, below /coord/v1: one of
// coordclient's path helpers), with in encoded as the JSON body when it is not nil.
// A 2xx answer is decoded into out when out is not nil and returned raw, for
// --json. Any other answer is returned as an error wrapping an *APIError.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) ([]byte, error) {
	return c.DoQuery(ctx, method, path, nil, in, out)
}

// DoQuery is [Client.Do] with query parameters.
func (c *Client) DoQuery(ctx context.Context, method, path string, query url.Values, in, out any) ([]byte, error) {
	// Built per call: commands set the authorization after NewClient, and
	// a CLI run makes a handful of calls.
	wire, err := coordclient.New([]string{c.base}, coordclient.Options{
		HTTPClient:    c.http,
		Authorization: c.authorization,
		UserAgent:     "rscoord-cli/" + buildVersion(),
		Timeout:       c.timeout,
	})
	if err != nil {
		return nil, err
	}
	if len(query) > 0 {
		path += "?" + query.Encode()
	}
	raw, err := wire.Do(ctx, method, path, in, out)
	var apiErr *APIError
	if c.authorization == "" && errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusUnauthorized {
		// The server's message names HTTP headers; someone who typed a
		// command without credentials needs the CLI's ways to give them.
		apiErr.Body.Message += noCredentialsHint
	}
	return raw, err
}

// noCredentialsHint ends the message of a 401 answered to a request sent
// without credentials.
const noCredentialsHint = " (this command sent no credentials: set RSCOORD_USER and RSCOORD_PASSWORD, give --token, or run rscoord login first)"
