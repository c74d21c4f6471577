package etcdtest

import (
	"net"
	"sync"
	"testing"
)

// Proxy forwards TCP connections from a loopback port to one target
// address and can freeze: while paused it accepts and holds connections
// but moves no bytes, as a network partition or a frozen peer would.
// Give a client Proxy.URL instead of a member's URL to cut that client off
// without touching the member.
type Proxy struct {
	// URL is http://127.0.0.1:port of the proxy.
	URL string

	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu     sync.Mutex
	paused bool
	// replies: only the bytes from the target to the clients are held
	// (PauseReplies); guarded by mu.
	replies bool
	resume  chan struct{} // closed by Resume; guarded by mu
	conns   map[net.Conn]bool
	closed  bool
}

// NewProxy starts a proxy to target ("127.0.0.1:port") and closes it in
// t.Cleanup.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{URL: "http://" + ln.Addr().String(), target: target, ln: ln, resume: make(chan struct{}), conns: map[net.Conn]bool{}}
	close(p.resume)
	p.wg.Go(p.accept)
	t.Cleanup(p.Close)
	return p
}

// Pause stops every byte in both directions until Resume.
func (p *Proxy) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.paused && !p.replies {
		p.resume = make(chan struct{})
	}
	p.paused = true
}

// PauseReplies holds the bytes from the target to the clients only, until
// Resume: requests arrive and are carried out, but a caller that gives up
// meanwhile never learns their outcome, as with an answer lost on the way
// back.
func (p *Proxy) PauseReplies() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.paused && !p.replies {
		p.resume = make(chan struct{})
	}
	p.replies = true
}

// Resume lets bytes flow again, both ways.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused || p.replies {
		p.paused, p.replies = false, false
		close(p.resume)
	}
}

// gate returns once the proxy lets bytes of the direction through (reply:
// from the target), false if it closed meanwhile.
func (p *Proxy) gate(reply bool) bool {
	for {
		p.mu.Lock()
		ch, closed, paused := p.resume, p.closed, p.paused || (reply && p.replies)
		p.mu.Unlock()
		switch {
		case closed:
			return false
		case !paused:
			return true
		}
		<-ch
	}
}

// Close stops accepting, closes every connection and waits for the copying
// goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	if p.paused || p.replies {
		p.paused, p.replies = false, false
		close(p.resume)
	}
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	_ = p.ln.Close()
	p.wg.Wait()
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns[c] = true
	return true
}

func (p *Proxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		if !p.track(in) || !p.track(out) {
			_ = in.Close()
			_ = out.Close()
			continue
		}
		p.wg.Go(func() { p.pipe(out, in, false) })
		p.wg.Go(func() { p.pipe(in, out, true) })
	}
}

// pipe copies src to dst chunk by chunk, waiting at the gate before each
// write, and closes both ends when either side ends.
func (p *Proxy) pipe(dst, src net.Conn, reply bool) {
	defer func() { _ = dst.Close(); _ = src.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.gate(reply) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil { // io.EOF or a closed connection: done either way
			return
		}
	}
}
