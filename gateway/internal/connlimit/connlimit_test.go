package connlimit

import (
	"net"
	"net/http"
	"testing"
	"time"
)

// pipeListener accepts the server ends of net.Pipe pairs, one per dial.
type pipeListener struct{ conns chan net.Conn }

func (p *pipeListener) Accept() (net.Conn, error) { return <-p.conns, nil }
func (p *pipeListener) Close() error              { return nil }
func (p *pipeListener) Addr() net.Addr            { return &net.TCPAddr{} }

// closed says whether c's server end was closed: a read of its client end
// then ends.
func closed(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	return err != nil && !isTimeout(err)
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// At the cap, a new connection closes the one idle longest; a connection
// with a request in flight is never closed, and when every one is busy
// Accept waits for one to end.
func TestTheLongestIdleConnectionMakesRoom(t *testing.T) {
	clock := time.Unix(1000, 0)
	evictions := 0
	l := New(2, func() { evictions++ })
	l.now = func() time.Time { return clock }
	pl := &pipeListener{conns: make(chan net.Conn, 1)}
	ln := l.Listener(pl)
	accept := func() (server, client net.Conn) {
		t.Helper()
		s, c := net.Pipe()
		pl.conns <- s
		got, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		return got, c
	}
	a, aClient := accept()
	clock = clock.Add(time.Second)
	b, bClient := accept()
	l.ConnState(a, http.StateActive)
	clock = clock.Add(time.Second)
	_, cClient := accept() // a is busy: b, idle since it came, goes
	if !closed(bClient) || closed(aClient) || evictions != 1 {
		t.Fatalf("after the third: b closed %v, a closed %v, %d evictions; want b alone", closed(bClient), closed(aClient), evictions)
	}
	l.ConnState(b, http.StateClosed) // the server sees b's read fail
	clock = clock.Add(time.Second)
	l.ConnState(a, http.StateIdle) // idle since now, after c
	clock = clock.Add(time.Second)
	accept() // c, idle since it came, is older than a
	if !closed(cClient) || closed(aClient) || l.Open() != 2 {
		t.Fatalf("after the fourth: c closed %v, a closed %v, %d open; want c alone and 2", closed(cClient), closed(aClient), l.Open())
	}

	// Both busy: the next Accept waits until one of them is closed.
	for c := range l.conns {
		l.ConnState(c, http.StateActive)
	}
	s, _ := net.Pipe()
	pl.conns <- s
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		if _, err := ln.Accept(); err != nil {
			t.Error(err)
		}
	}()
	select {
	case <-accepted:
		t.Fatal("accepted past the cap while every connection was busy")
	case <-time.After(50 * time.Millisecond):
	}
	_ = a.Close()
	<-accepted
	if l.Open() != 2 || evictions != 2 {
		t.Fatalf("%d open, %d evictions; want 2 and 2", l.Open(), evictions)
	}
}
