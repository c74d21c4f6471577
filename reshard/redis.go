package reshard

import (
	"errors"

	"github.com/rscoord/rscoord/client/protocol"
)

// RedisRefusal is the reply of a command Redis refused (an error reply,
// such as WRONGTYPE for a key that holds something other than a stream),
// found in err's chain, and whether there is one. Unlike a Redis that
// does not answer, a refusal is not mended by waiting: an operator must
// mend what Redis holds, so the client is told what it said.
func RedisRefusal(err error) (string, bool) {
	// go-redis marks its error replies with this method; the package
	// needs no import of it.
	var reply interface {
		error
		RedisError()
	}
	if !errors.As(err, &reply) {
		return "", false
	}
	const most = 200
	text := reply.Error()
	if len(text) > most {
		text = text[:most] + "…"
	}
	return text, true
}

// ProvisioningFailed is the client's error for shard streams Redis did not
// create: REDIS_STREAM_PROVISIONING_FAILED, saying the same request again
// resumes it, and what Redis said when it refused.
func ProvisioningFailed(err error) *protocol.Error {
	if reply, ok := RedisRefusal(err); ok {
		return protocol.Errorf(protocol.CodeRedisStreamProvisioningFailed,
			"Redis refused to create a shard stream ("+reply+"): mend the key, then repeat the request")
	}
	return protocol.Errorf(protocol.CodeRedisStreamProvisioningFailed,
		"creating the shard streams in Redis failed; repeat the request once Redis answers")
}
