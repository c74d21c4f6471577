package member

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"time"
)

// memberID is the id of logical member i of a Runtime whose base id is
// base: "{base}-m{i}" (docs/protocol.md §8). It is also the member's Redis
// consumer name.
func memberID(base string, i int) string {
	return base + "-m" + strconv.Itoa(i)
}

// defaultBaseID picks the base of the member ids when WithBaseID is not
// given, and says where it came from: the POD_NAME environment variable
// (a stable name, set by Kubernetes through the downward API), else the
// host name plus the process id, so that two processes on one host never
// share member ids (docs/protocol.md, member incarnations: two processes
// with one id would be told apart only by their instanceId, and one of
// them would wait). Characters a member id may not hold are replaced by
// '-'.
func defaultBaseID() (id, from string) {
	if name := strings.TrimSpace(os.Getenv("POD_NAME")); name != "" {
		return cleanID(name), "POD_NAME"
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "member"
	}
	return cleanID(host) + "-" + strconv.Itoa(os.Getpid()), "host name and process id"
}

// newInstanceID is a random incarnation id (docs/protocol.md, instanceId):
// a UUID-shaped string of 128 random bits, new for every Runtime.
func newInstanceID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand never fails on supported platforms; if it did, a
		// clock-based id is still unique enough per process.
		return "t-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + strconv.Itoa(os.Getpid())
	}
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // variant 10
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
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
