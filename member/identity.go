package member

import (
	"context"
	"net"
	"os"
	"strconv"
	"strings"
)

// memberID is the id of logical member i of a Runtime whose base id is
// base: "{base}-m{i}" (docs/protocol.md §8). It is also the member's Redis
// consumer name.
func memberID(base string, i int) string {
	return base + "-m" + strconv.Itoa(i)
}

// defaultBaseID picks the base of the member ids when WithBaseID is not
// given, and says where it came from: the POD_IP environment variable (set
// by Kubernetes through the downward API), else the first non-loopback
// address of this host, else its hostname. Characters a member id may not
// hold are replaced by '-'.
func defaultBaseID() (id, from string) {
	if ip := strings.TrimSpace(os.Getenv("POD_IP")); ip != "" {
		return cleanID(ip), "POD_IP"
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			ipnet, ok := a.(*net.IPNet)
			if !ok || ipnet.IP.IsLoopback() || ipnet.IP.IsLinkLocalUnicast() || ipnet.IP.IsUnspecified() {
				continue
			}
			return cleanID(ipnet.IP.String()), "host address"
		}
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return cleanID(h), "hostname"
	}
	return "member", "fallback"
}

// cleanID replaces every character a member id may not hold with '-'.
func cleanID(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.' || c == '_' || c == ':' || c == '@' || c == '-':
		default:
			b[i] = '-'
		}
	}
	return string(b)
}

type memberIDKey struct{}

// MemberID returns the id of the logical member a hook's or a handler's
// ctx belongs to, or "" when ctx carries none.
func MemberID(ctx context.Context) string {
	id, _ := ctx.Value(memberIDKey{}).(string)
	return id
}

func withMemberID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, memberIDKey{}, id)
}
