package gateway

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync/atomic"

	"github.com/gin-gonic/gin"
)

// RequestIDHeader carries a request id in and out.
const RequestIDHeader = "X-Request-Id"

// requestIDs makes the ids of requests that bring none: a random prefix
// drawn once per server and a counter, unique across restarts without a
// call for random bytes per request (a system call on every heartbeat of
// a client that sends no id).
type requestIDs struct {
	prefix string
	n      atomic.Uint64
}

func newRequestIDs() *requestIDs {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return &requestIDs{prefix: hex.EncodeToString(b[:]) + "-"}
}

// next is a new request id.
func (ids *requestIDs) next() string {
	var buf [40]byte
	out := append(buf[:0], ids.prefix...)
	return string(strconv.AppendUint(out, ids.n.Add(1), 36))
}

// requestID takes the client's X-Request-Id when it is a sane token (1–128
// characters of [A-Za-z0-9._:-]), else makes one, and echoes it in the
// response so that a client can quote it against the audit log. The
// response header is where later handlers read it (requestIDOf): kept in
// the context's keys, it cost every heartbeat a map.
func (s *server) requestID(c *gin.Context) {
	id := c.GetHeader(RequestIDHeader)
	if !saneRequestID(id) {
		id = s.requestIDs.next()
	}
	c.Writer.Header()[RequestIDHeader] = []string{id}
	c.Next()
}

// requestIDOf is the request id requestID gave c.
func requestIDOf(c *gin.Context) string { return c.Writer.Header().Get(RequestIDHeader) }

func saneRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		ch := id[i]
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '.' || ch == '_' || ch == ':' || ch == '-') {
			return false
		}
	}
	return true
}
