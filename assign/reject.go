package assign

import "github.com/rscoord/rscoord/client/protocol"

// InvalidRequestResponse answers INVALID_REQUEST for a heartbeat refused
// before it reaches a group: a stream prefix or group name that is not
// valid, or a body field of the wrong JSON type. The member stops and
// fails loudly.
func InvalidRequestResponse(req *protocol.HeartbeatRequest, cfg Config) protocol.HeartbeatResponse {
	return reject(req, protocol.StatusInvalidRequest, cfg)
}
