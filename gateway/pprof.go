package gateway

import (
	"net/http/pprof"
	"strings"

	"github.com/gin-gonic/gin"
)

// servePprof serves net/http/pprof under /debug/pprof/: the index, the
// named profiles (heap, goroutine, allocs, block, mutex, threadcreate),
// cmdline, profile (CPU, ?seconds=N, fewer than --http-write-timeout),
// symbol and trace. The route needs the ADMIN role.
func servePprof(c *gin.Context) {
	w, r := c.Writer, c.Request
	switch strings.TrimPrefix(c.Param("profile"), "/") {
	case "cmdline":
		pprof.Cmdline(w, r)
	case "profile":
		pprof.Profile(w, r)
	case "symbol":
		pprof.Symbol(w, r)
	case "trace":
		pprof.Trace(w, r)
	default:
		// The index, and any named profile by its path (404 for an
		// unknown one).
		pprof.Index(w, r)
	}
}
