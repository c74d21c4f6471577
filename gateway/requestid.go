package gateway

import (
	"crypto/rand"
	"encoding/hex"

	"github.com/gin-gonic/gin"
)

// RequestIDHeader carries a request id in and out.
const RequestIDHeader = "X-Request-Id"

// requestID takes the client's X-Request-Id when it is a sane token (1–128
// characters of [A-Za-z0-9._:-]), else makes one, and echoes it in the
// response so that a client can quote it against the audit log. The
// response header is where later handlers read it (requestIDOf): kept in
// the context's keys, it cost every heartbeat a map.
func requestID(c *gin.Context) {
	id := c.GetHeader(RequestIDHeader)
	if !saneRequestID(id) {
		var b [16]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
		id = hex.EncodeToString(b[:])
	}
	c.Header(RequestIDHeader, id)
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
