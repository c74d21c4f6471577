package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/rscoord/rscoord/protocol"
)

// errDropped makes the proxy's error handler close the connection without
// an answer: the heartbeat reached the coordinator, its answer is lost.
var errDropped = errors.New("chaos: response dropped")

// hbProxy is an HTTP reverse proxy between one consumer pod and the
// coordinator. A switch drops or delays heartbeat responses after the
// coordinator answered them. It counts answers telling a member it is
// fenced or unknown while one of its previous answers was lost or late:
// a lost response must never fence (docs/protocol.md §6.1 step 5).
type hbProxy struct {
	srv       *httptest.Server
	transport *http.Transport

	mu        sync.Mutex
	drop      bool
	delay     time.Duration
	lost      map[string]bool // member → an answer since its last normal one was dropped or delayed
	dropped   int
	delayed   int
	needless  []string // fence answers after a lost answer
	fenceSeen int      // every FENCED/UNKNOWN answer that went through
}

func newHBProxy(target string) *hbProxy {
	u, err := url.Parse(target)
	if err != nil {
		panic(err)
	}
	p := &hbProxy{lost: map[string]bool{}, transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	rp := &httputil.ReverseProxy{
		Rewrite:        func(r *httputil.ProxyRequest) { r.SetURL(u) },
		Transport:      p.transport,
		ModifyResponse: p.modify,
		ErrorHandler:   p.fail,
	}
	p.srv = httptest.NewServer(rp)
	return p
}

// URL is the proxy's base URL, for the pod's --coordinator.
func (p *hbProxy) URL() string { return p.srv.URL }

func (p *hbProxy) Close() {
	p.srv.CloseClientConnections()
	p.srv.Close()
	p.transport.CloseIdleConnections()
}

// set switches the fault: drop every heartbeat answer, or delay each by d
// (both off: pass through).
func (p *hbProxy) set(drop bool, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drop, p.delay = drop, d
}

// forget clears the lost-answer marks: a fault on the pod itself (kill,
// stop, restart) makes later fences legitimate.
func (p *hbProxy) forget() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.lost)
}

func (p *hbProxy) stats() (dropped, delayed int, needless []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropped, p.delayed, append([]string(nil), p.needless...)
}

// heartbeatMember is the member id of a heartbeat path, else "".
func heartbeatMember(path string) string {
	if !strings.HasSuffix(path, "/heartbeat") {
		return ""
	}
	parts := strings.Split(path, "/")
	for i := range parts {
		if parts[i] == "members" && i+1 < len(parts) {
			return parts[i+1]
		}
	}
	return ""
}

func (p *hbProxy) modify(resp *http.Response) error {
	member := heartbeatMember(resp.Request.URL.Path)
	if member == "" {
		return nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	var hb struct {
		Status protocol.Status `json:"status"`
	}
	_ = json.Unmarshal(body, &hb)
	fenced := hb.Status == protocol.StatusFencedMemberEpoch || hb.Status == protocol.StatusUnknownMemberID

	p.mu.Lock()
	if fenced {
		p.fenceSeen++
		if p.lost[member] {
			p.needless = append(p.needless, fmt.Sprintf("%s answered %s at %s after a lost or late answer",
				member, hb.Status, time.Now().Format("15:04:05.000")))
		}
	}
	drop, delay := p.drop, p.delay
	switch {
	case drop:
		p.dropped++
		p.lost[member] = true
	case delay > 0:
		p.delayed++
		p.lost[member] = true
	default:
		delete(p.lost, member)
	}
	p.mu.Unlock()
	if drop {
		return errDropped
	}
	if delay > 0 {
		time.Sleep(delay)
	}
	return nil
}

// fail closes the client connection for a dropped answer (no byte of it
// was written), else answers 502 like any proxy whose backend is down.
func (p *hbProxy) fail(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, errDropped) {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	}
	w.WriteHeader(http.StatusBadGateway)
}
