package member

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/rscoord/rscoord/protocol"
)

// coordClient sends heartbeats to the coordinator over HTTP (docs/protocol.md
// §5 and §6). It is safe for concurrent use: every member of a Runtime
// shares one.
type coordClient struct {
	base          string // e.g. http://host:8080/coord/v1/streams/orders/groups/orders/members/
	http          *http.Client
	prefix, group string
	authorization string
}

func newCoordClient(cfg *config) *coordClient {
	return &coordClient{
		base: cfg.coordinator + protocol.BasePath + "/streams/" + url.PathEscape(cfg.stream) +
			"/groups/" + url.PathEscape(cfg.group) + "/members/",
		http:          cfg.httpClient,
		prefix:        cfg.stream,
		group:         cfg.group,
		authorization: cfg.authorization,
	}
}

// maxAnswerBytes bounds how much of an answer is read; a heartbeat answer
// is a few hundred bytes plus the shard lists.
const maxAnswerBytes = 4 << 20

// heartbeat posts req and decodes the answer. Every answer of a working
// coordinator is HTTP 200; anything else is an error (and so, for the
// member, a heartbeat that did not succeed).
func (c *coordClient) heartbeat(ctx context.Context, req *protocol.HeartbeatRequest) (protocol.HeartbeatResponse, error) {
	var out protocol.HeartbeatResponse
	body, err := json.Marshal(req)
	if err != nil {
		return out, fmt.Errorf("heartbeat %s: encode: %w", req.MemberID, err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+url.PathEscape(req.MemberID)+"/heartbeat", bytes.NewReader(body))
	if err != nil {
		return out, fmt.Errorf("heartbeat %s: %w", req.MemberID, err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	if c.authorization != "" {
		hreq.Header.Set("Authorization", c.authorization)
	}
	resp, err := c.http.Do(hreq)
	if err != nil {
		return out, fmt.Errorf("heartbeat %s: %w", req.MemberID, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return out, fmt.Errorf("heartbeat %s: read answer: %w", req.MemberID, err)
	}
	if resp.StatusCode != http.StatusOK {
		var eb protocol.ErrorBody
		if json.Unmarshal(raw, &eb) == nil && eb.ErrorCode != "" {
			return out, fmt.Errorf("heartbeat %s: HTTP %d %s: %s", req.MemberID, resp.StatusCode, eb.ErrorCode, eb.Message)
		}
		return out, fmt.Errorf("heartbeat %s: HTTP %d: %.200s", req.MemberID, resp.StatusCode, raw)
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return out, fmt.Errorf("heartbeat %s: decode answer: %w", req.MemberID, err)
	}
	return out, nil
}
