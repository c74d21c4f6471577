package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// ProbeCmd GETs one URL and succeeds on a 2xx answer. It is the container
// healthcheck of the image, which has no curl: rscoord probe
// http://127.0.0.1:8080/readyz.
type ProbeCmd struct {
	URL     string        `arg:"" help:"http or https URL to GET, e.g. http://127.0.0.1:8080/readyz."`
	Timeout time.Duration `default:"3s" help:"Bound on the whole request; a healthcheck must answer before its own timeout."`
}

// Run sends the request. Redirects are not followed: a probe that answers
// 3xx is not healthy.
func (p *ProbeCmd) Run(ctx context.Context) error {
	u, err := url.Parse(p.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("probe: %q is not an http or https URL", p.URL)
	}
	if p.Timeout <= 0 {
		return errors.New("probe: --timeout must be positive")
	}
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	client := &http.Client{
		// One request, and no idle connection left behind.
		Transport:     &http.Transport{DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("probe: %s answered %s: %s", p.URL, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
