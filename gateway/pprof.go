package gateway

import (
	"net/http/pprof"
	runtimepprof "runtime/pprof"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/rscoord/rscoord/client/protocol"
)

// servePprof serves net/http/pprof under /debug/pprof/: the index, the
// named profiles (heap, goroutine, allocs, block, mutex, threadcreate),
// cmdline, profile (CPU, ?seconds=N, fewer than --http-write-timeout),
// symbol and trace. The route needs the ADMIN role. An unknown name
// answers 404 with an error body like every other route, not
// net/http/pprof's plain text.
func servePprof(c *gin.Context) {
	w, r := c.Writer, c.Request
	name := strings.TrimPrefix(c.Param("profile"), "/")
	switch name {
	case "cmdline":
		pprof.Cmdline(w, r)
	case "profile":
		pprof.Profile(w, r)
	case "symbol":
		pprof.Symbol(w, r)
	case "trace":
		pprof.Trace(w, r)
	case "":
		pprof.Index(w, r)
	default:
		// A named profile by its path, as pprof.Index serves it once it
		// knows the name.
		if runtimepprof.Lookup(name) == nil {
			abortWith(c, protocol.CodeNotFound, "no profile "+name+" under /debug/pprof/")
			return
		}
		pprof.Index(w, r)
	}
}
