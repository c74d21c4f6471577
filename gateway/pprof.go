package gateway

import (
	"fmt"
	"math"
	"net/http"
	"net/http/pprof"
	runtimepprof "runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rscoord/rscoord/client/protocol"
)

// servePprof serves net/http/pprof under /debug/pprof/: the index, the
// named profiles (heap, goroutine, allocs, block, mutex, threadcreate),
// cmdline, profile (CPU, ?seconds=N, fewer than --http-write-timeout),
// symbol and trace. The route needs the ADMIN role. Every error answers
// with an error body like every other route, not net/http/pprof's plain
// text: an unknown name 404; a bad or too long ?seconds, or one with
// ?debug or on a profile without a delta form, 400; a CPU profile or trace
// while another runs 429.
func (s *server) servePprof(c *gin.Context) {
	w, r := c.Writer, c.Request
	name := strings.TrimPrefix(c.Param("profile"), "/")
	switch name {
	case "cmdline":
		pprof.Cmdline(w, r)
	case "profile":
		s.profiles.cpu.serve(c, pprof.Profile)
	case "symbol":
		pprof.Symbol(w, r)
	case "trace":
		s.profiles.trace.serve(c, pprof.Trace)
	case "":
		pprof.Index(w, r)
	default:
		// A named profile by its path, as pprof.Index serves it once it
		// knows the name.
		if runtimepprof.Lookup(name) == nil {
			abortWith(c, protocol.CodeNotFound, "no profile "+name+" under /debug/pprof/")
			return
		}
		if c.Query("seconds") != "" {
			// A delta profile: ?seconds=N waits N seconds. What
			// net/http/pprof would refuse in plain text is refused here
			// first, with an error body.
			if !deltaProfile(name) {
				abortWith(c, protocol.CodeInvalidRequest, "profile "+name+" has no delta form: leave ?seconds out")
				return
			}
			if debug, _ := strconv.Atoi(c.Query("debug")); debug != 0 {
				abortWith(c, protocol.CodeInvalidRequest, "a delta profile (?seconds) is written in the binary format only: leave ?debug out, or 0")
				return
			}
			if _, ok := pprofSeconds(c, name+" delta profile", 0, true); !ok {
				return
			}
		}
		pprof.Index(w, r)
	}
}

// deltaProfile reports whether net/http/pprof serves name's delta over
// ?seconds: the runtime's sampled and counted profiles, not one a library
// added.
func deltaProfile(name string) bool {
	switch name {
	case "allocs", "block", "goroutine", "goroutineleak", "heap", "mutex", "threadcreate":
		return true
	}
	return false
}

// profiles are the profiles the runtime takes once per process at a time,
// guarded per server rather than in package state: two servers in one
// process (tests) do not see each other's, and the second would meet the
// runtime's own refusal, net/http/pprof's plain-text 500.
type profiles struct {
	cpu, trace *exclusiveProfile
}

func newProfiles() profiles {
	return profiles{
		cpu:   &exclusiveProfile{what: "CPU profile", defaultSeconds: 30, integer: true},
		trace: &exclusiveProfile{what: "trace", defaultSeconds: 1},
	}
}

// exclusiveProfile is a profile the runtime takes once per process at a
// time (the CPU profile, the execution trace). A second request would get
// net/http/pprof's plain-text 500; it is answered 429 with the time the
// running one has left instead.
type exclusiveProfile struct {
	what string
	// defaultSeconds is net/http/pprof's duration without ?seconds.
	defaultSeconds float64
	// integer: ?seconds is a whole number (net/http/pprof parses the CPU
	// profile's as an integer, the trace's as a float).
	integer bool
	mu      sync.Mutex
	// until is when the running one ends, in Unix nanoseconds.
	until atomic.Int64
}

// serve checks ?seconds, then runs handler unless another request runs
// the same kind of profile.
func (p *exclusiveProfile) serve(c *gin.Context, handler http.HandlerFunc) {
	d, ok := pprofSeconds(c, p.what, p.defaultSeconds, p.integer)
	if !ok {
		return
	}
	// 429, not 409: nothing in the coordinator's state conflicts, the
	// one-at-a-time profiler is busy for a known time, and Retry-After
	// says when to come back.
	if !p.mu.TryLock() {
		left := time.Until(time.Unix(0, p.until.Load()))
		tooMany(c, fmt.Sprintf("another %s is running (one at a time per process); retry once it ends", p.what), left)
		return
	}
	defer p.mu.Unlock()
	p.until.Store(time.Now().Add(d).UnixNano())
	handler(c.Writer, c.Request)
}

// pprofSeconds is the duration ?seconds asks for (def seconds without
// it). It answers 400 INVALID_REQUEST, and returns false, for a value
// that is not a positive number (a whole one when integer), or one that
// is not below the server's write timeout: the answer would be cut off
// before the profile is written.
func pprofSeconds(c *gin.Context, what string, def float64, integer bool) (time.Duration, bool) {
	secs := def
	raw := c.Query("seconds")
	if raw != "" {
		var err error
		if integer {
			var n int64
			n, err = strconv.ParseInt(raw, 10, 64)
			secs = float64(n)
		} else {
			secs, err = strconv.ParseFloat(raw, 64)
		}
		kind := "number"
		if integer {
			kind = "whole number"
		}
		if err != nil || !(secs > 0) || math.IsInf(secs, 0) {
			abortWith(c, protocol.CodeInvalidRequest, fmt.Sprintf("seconds %q of the %s must be a positive %s", capField(raw), what, kind))
			return 0, false
		}
	}
	d := time.Duration(min(secs, float64(math.MaxInt64/int64(time.Second))) * float64(time.Second))
	// The server that accepted the request says its write timeout, as
	// net/http/pprof reads it; the handler needs no copy of the flag.
	if srv, ok := c.Request.Context().Value(http.ServerContextKey).(*http.Server); ok && srv.WriteTimeout > 0 && d >= srv.WriteTimeout {
		given := "?seconds=" + capField(raw)
		if raw == "" {
			given = fmt.Sprintf("without ?seconds, %g s", def)
		}
		abortWith(c, protocol.CodeInvalidRequest, fmt.Sprintf("a %s (%s) must be shorter than the server's write timeout %v (--http-write-timeout), or its answer is cut off",
			what, given, srv.WriteTimeout))
		return 0, false
	}
	return d, true
}
