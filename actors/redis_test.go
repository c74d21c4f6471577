package actors

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rscoord/rscoord/client/protocol"
)

// replyError is an error reply as go-redis returns one.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

func TestRedisRefusal(t *testing.T) {
	t.Parallel()
	wrongType := replyError("WRONGTYPE Operation against a key holding the wrong kind of value")
	for _, tc := range []struct {
		name    string
		err     error
		refused bool
		message string // in provisioningFailed's message
	}{
		{"a refusal", wrongType, true, "Redis refused to create a shard stream (WRONGTYPE Operation"},
		{"a wrapped refusal", fmt.Errorf("provision: %w", errors.Join(context.DeadlineExceeded, wrongType)), true, "mend the key, then repeat the request"},
		{"no answer", context.DeadlineExceeded, false, "repeat the request once Redis answers"},
		{"a refusal too long to repeat", replyError("ERR " + strings.Repeat("x", 1000)), true, "…): mend the key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, refused := redisRefusal(tc.err); refused != tc.refused {
				t.Errorf("refusal %v, want %v", refused, tc.refused)
			}
			perr := provisioningFailed(tc.err)
			if perr.Code != protocol.CodeRedisStreamProvisioningFailed || !strings.Contains(perr.Message, tc.message) || len(perr.Message) > 300 {
				t.Errorf("%s %q: want a short message saying %q", perr.Code, perr.Message, tc.message)
			}
		})
	}
}
