package gateway

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rscoord/rscoord/assign"
	"github.com/rscoord/rscoord/client/protocol"
)

// heartbeat answers 200 with a status for everything but a body that is
// not JSON at all (400), too large (413), or large while the large-body
// budget is full (429, see bodyMemory): any other non-2xx would stop
// the reference Python client's member thread. The content type is not
// checked, for the same reason.
func (s *server) heartbeat(c *gin.Context) {
	start := time.Now()
	body, perr := s.readBodyAnyType(c)
	if perr != nil {
		abortWith(c, perr.Code, perr.Message)
		return
	}
	req, problem, perr := decodeHeartbeat(body)
	if perr != nil {
		abortWith(c, perr.Code, perr.Message)
		return
	}
	if problem != "" {
		// Well-formed JSON the protocol refuses is the client's bug, told
		// the protocol's way.
		resp := assign.Invalid(problem).Answer(&req, s.coord.GroupConfig())
		s.metrics.Heartbeat(resp.Status, false, time.Since(start))
		c.JSON(http.StatusOK, resp)
		return
	}
	if req.WaitMs > 0 {
		if release, ok := holdConnection(c.Request.Context()); ok {
			defer release()
			// A held answer (waitMs) legitimately takes up to the wait:
			// the server's write timeout, counted from the request (over
			// HTTP/2, from the stream's), must not cut it. The deadline
			// moves past the longest the coordinator may take.
			rc := http.NewResponseController(c.Writer)
			_ = rc.SetWriteDeadline(time.Now().Add(s.coord.HeartbeatBudget(&req) + heldWriteSlack))
		} else {
			// Every connection held answers may keep busy is: answered
			// at once, as past the coordinator's own cap.
			req.WaitMs = 0
		}
	}
	resp := s.coord.Heartbeat(c.Request.Context(), c.Param("prefix"), c.Param("group"), c.Param("member"), &req)
	s.metrics.Heartbeat(resp.Status, req.WaitMs > 0, time.Since(start))
	c.JSON(http.StatusOK, resp)
}

// decodeHeartbeat reads a heartbeat body. A body that is not JSON at all is
// perr (400). Well-formed JSON that the protocol refuses (a field of the
// wrong type, a member named twice) is a problem, answered INVALID_REQUEST
// in a 200. Member names match exactly (decodeJSON).
func decodeHeartbeat(body []byte) (req protocol.HeartbeatRequest, problem string, perr *protocol.Error) {
	err := decodeJSON(body, &req)
	if err == nil {
		return req, "", nil
	}
	if !json.Valid(body) {
		return req, "", protocol.Errorf(protocol.CodeInvalidRequest, "malformed heartbeat JSON: "+jsonProblem(err))
	}
	if duplicateNames(body) {
		return req, "a member name appears twice in one object of the heartbeat body", nil
	}
	// Well-formed JSON whose informational times do not parse (a
	// zone-less timestamp, a number): the reference clients send such
	// values, and a non-2xx would stop them. Those times decide nothing,
	// so they are dropped and the rest is read again.
	req = protocol.HeartbeatRequest{}
	if err := decodeJSON(withoutReportTimes(body), &req); err != nil {
		return req, "heartbeat body: " + jsonProblem(err), nil
	}
	return req, "", nil
}

// withoutReportTimes returns body with the optional report times
// (shardProgress[].updatedAt, revokingShards[].ackedAt) removed, or body
// itself when it is not a JSON object of that shape.
func withoutReportTimes(body []byte) []byte {
	var doc map[string]json.RawMessage
	if json.Unmarshal(body, &doc) != nil {
		return body
	}
	for field, timeKey := range map[string]string{"shardProgress": "updatedAt", "revokingShards": "ackedAt"} {
		var items []map[string]json.RawMessage
		if raw, ok := doc[field]; !ok || json.Unmarshal(raw, &items) != nil {
			continue
		}
		for _, item := range items {
			delete(item, timeKey)
		}
		if raw, err := json.Marshal(items); err == nil {
			doc[field] = raw
		}
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return body
	}
	return out
}

// heldWriteSlack is the time a held heartbeat's answer gets to be written
// once the coordinator has it.
const heldWriteSlack = 5 * time.Second

// readBodyAnyType is readBody without the content-type check, under the
// heartbeat's own limit.
func (s *server) readBodyAnyType(c *gin.Context) ([]byte, *protocol.Error) {
	c.Request.Header.Del("Content-Type")
	return s.readBodyLimit(c, maxHeartbeatBodyBytes)
}
