package gateway

import (
	"crypto/rand"
	"encoding/hex"

	"github.com/gin-gonic/gin"
)

// RequestIDHeader carries a request id in and out.
const RequestIDHeader = "X-Request-Id"

const requestIDKey = "rscoord.requestId"

// requestID takes the client's X-Request-Id when it is a sane token (1–128
// characters of [A-Za-z0-9._:-]), else makes one, and echoes it in the
// response so that a client can quote it against the audit log.
func requestID(c *gin.Context) {
	id := c.GetHeader(RequestIDHeader)
	if !saneRequestID(id) {
		var b [16]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
		id = hex.EncodeToString(b[:])
	}
	c.Set(requestIDKey, id)
	c.Header(RequestIDHeader, id)
	c.Next()
}

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
