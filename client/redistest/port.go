package redistest

import (
	"errors"
	"fmt"
	"net"
	"strconv"
)

// maxPort is the highest client port handed out: the Redis Cluster bus
// listens on port+10000, which must stay a valid port.
const maxPort = 55000

// busOffset is the distance between a Redis Cluster node's client port and
// its cluster bus port.
const busOffset = 10000

// freePort returns a loopback port that was free, together with its bus
// port (port+10000), a moment ago. Another process may take it before
// redis-server binds it; StartServer retries with a new port when the
// server fails to start.
func freePort() (int, error) {
	var errs []error
	for range 50 {
		port, err := listenAndClose(0)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if port > maxPort {
			continue
		}
		if _, err := listenAndClose(port + busOffset); err != nil {
			continue
		}
		return port, nil
	}
	return 0, fmt.Errorf("find free loopback port (≤ %d with port+%d free): %w", maxPort, busOffset, errors.Join(errs...))
}

// listenAndClose listens on 127.0.0.1:port, closes at once and returns the
// port that was bound (the kernel's choice when port is 0).
func listenAndClose(port int) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
