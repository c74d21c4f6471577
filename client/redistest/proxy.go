package redistest

import (
	"bytes"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy is a TCP proxy on 127.0.0.1 in front of a Redis server, for tests of
// what a client does when Redis executed a command but its answer never
// arrived: once armed (DropAnswerTo, DropAnswerContaining), it lets the
// command through to Redis and closes the connection when the answer comes
// back, the answer unsent.
type Proxy struct {
	// Addr is the proxy's "127.0.0.1:port"; point clients here.
	Addr string

	target string
	ln     net.Listener
	// armed is 1 while one answer is still to be dropped, for a command
	// whose request contains command, or for an answer containing answer.
	armed   atomic.Int32
	rule    atomic.Pointer[dropRule]
	dropped atomic.Int32

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// NewProxy starts a Proxy to target ("host:port") and closes it in
// t.Cleanup.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := StartProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("redistest: close proxy: %v", err)
		}
	})
	return p
}

// StartProxy starts a Proxy to target; the caller closes it.
func StartProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("redistest: proxy to %s: %w", target, err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.rule.Store(&dropRule{})
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// dropRule says which answer an armed proxy drops.
type dropRule struct {
	command []byte // "\r\nXADD\r\n": a request line naming the command
	answer  []byte // text the answer contains
}

// DropAnswerTo makes the proxy lose the answer to the next command named
// name (XADD, XREADGROUP; any case): the command reaches Redis, and its
// connection is closed when the answer comes back.
func (p *Proxy) DropAnswerTo(name string) {
	p.rule.Store(&dropRule{command: []byte("\r\n" + strings.ToUpper(name) + "\r\n")})
	p.armed.Store(1)
}

// DropAnswerContaining makes the proxy lose the next answer that contains
// text (a field value of a record, say), whatever command asked for it,
// closing its connection.
func (p *Proxy) DropAnswerContaining(text string) {
	p.rule.Store(&dropRule{answer: []byte(text)})
	p.armed.Store(1)
}

// Dropped says how many answers the proxy has dropped.
func (p *Proxy) Dropped() int { return int(p.dropped.Load()) }

// Close stops accepting, closes every connection and waits for the proxy's
// goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		if !p.track(client, server) {
			return
		}
		var answerLost atomic.Bool // this connection's next answer is dropped
		p.wg.Add(2)
		go p.pipe(client, server, func(b []byte) bool {
			// Decided before the command goes on, so that its answer
			// cannot come back before the other direction knows.
			if r := p.rule.Load(); r.command != nil && bytes.Contains(bytes.ToUpper(b), r.command) && p.armed.CompareAndSwap(1, 0) {
				answerLost.Store(true)
			}
			return true
		})
		go p.pipe(server, client, func(b []byte) bool {
			r := p.rule.Load()
			if answerLost.Load() || (r.answer != nil && bytes.Contains(b, r.answer) && p.armed.CompareAndSwap(1, 0)) {
				p.dropped.Add(1)
				return false
			}
			return true
		})
	}
}

// track registers both ends of a proxied connection; false once closed.
func (p *Proxy) track(a, b net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_, _ = a.Close(), b.Close()
		return false
	}
	p.conns[a], p.conns[b] = struct{}{}, struct{}{}
	return true
}

// pipe copies from src to dst while pass approves each read; then it closes
// both ends, which ends the other direction too.
func (p *Proxy) pipe(src, dst net.Conn, pass func([]byte) bool) {
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		delete(p.conns, src)
		delete(p.conns, dst)
		p.mu.Unlock()
		_, _ = src.Close(), dst.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !pass(buf[:n]) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
