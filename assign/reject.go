package assign

import "github.com/rscoord/rscoord/client/protocol"

// InvalidRequestResponse answers INVALID_REQUEST, with errorCode
// INVALID_REQUEST and problem as its message (docs/protocol.md §9.7): a
// heartbeat refused before it reaches a group (Validate; a stream prefix or
// group name that is not valid; a body field of the wrong JSON type) or by
// it (an epoch from the future). The member stops and fails loudly.
func InvalidRequestResponse(req *protocol.HeartbeatRequest, cfg Config, problem string) protocol.HeartbeatResponse {
	resp := reject(req, protocol.StatusInvalidRequest, cfg)
	resp.ErrorCode, resp.Message = protocol.CodeInvalidRequest, problem
	return resp
}
