package member

import (
	"errors"
	"fmt"

	"github.com/rscoord/rscoord/client/coordclient"
)

// Errors [Runtime.Run] returns for what will not heal by retrying. Each is
// a pointer type to use with errors.As; each names the stream and group.
// Everything else (coordinator unreachable, RETRY, 5xx, 429, Redis down)
// is retried with backoff and logged at WARN: it may heal.

// StreamNotFoundError: the coordinator does not know the stream prefix
// (a misspelt WithStream, or a stream not created yet). It matches
// coordclient.ErrStreamNotFound with errors.Is.
type StreamNotFoundError struct {
	Stream, Group string
	// Message is the coordinator's explanation.
	Message string
}

func (e *StreamNotFoundError) Error() string {
	return fmt.Sprintf("stream %q does not exist on the coordinator (create it, or check WithStream): %s", e.Stream, e.Message)
}

// Is matches coordclient.ErrStreamNotFound.
func (e *StreamNotFoundError) Is(target error) bool { return target == coordclient.ErrStreamNotFound }

// GroupNotFoundError: the stream exists but the consumer group does not,
// and the coordinator does not register groups on the fly (or the group
// was deleted). It matches coordclient.ErrGroupNotFound with errors.Is.
type GroupNotFoundError struct {
	Stream, Group string
	// Message is the coordinator's explanation.
	Message string
}

func (e *GroupNotFoundError) Error() string {
	return fmt.Sprintf("consumer group %q of stream %q does not exist on the coordinator (create it, or check WithGroup): %s",
		e.Group, e.Stream, e.Message)
}

// Is matches coordclient.ErrGroupNotFound.
func (e *GroupNotFoundError) Is(target error) bool { return target == coordclient.ErrGroupNotFound }

// ProtocolError: the coordinator answered UNSUPPORTED_PROTOCOL or
// INVALID_REQUEST: this runtime and the coordinator do not agree on the
// protocol, and no retry can help.
type ProtocolError struct {
	Stream, Group, MemberID string
	// Status is UNSUPPORTED_PROTOCOL or INVALID_REQUEST.
	Status string
	// Version is the protocol version this runtime speaks.
	Version int
	// Message is the coordinator's explanation, if it gave one.
	Message string
}

func (e *ProtocolError) Error() string {
	s := fmt.Sprintf("member %s of stream %q group %q: coordinator answered %s to protocol version %d",
		e.MemberID, e.Stream, e.Group, e.Status, e.Version)
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// AuthError: the coordinator refused the credentials (401: missing or
// wrong, see WithBasicAuth and WithBearerToken) or they lack the MEMBER
// role (403). It unwraps to the coordinator's *coordclient.Error, so
// errors.Is matches coordclient.ErrUnauthorized or ErrForbidden.
type AuthError struct {
	Stream, Group string
	// StatusCode is 401 or 403.
	StatusCode int
	Err        error
}

func (e *AuthError) Error() string {
	return fmt.Sprintf("coordinator refused the heartbeats of stream %q group %q (%d; check WithBasicAuth/WithBearerToken and the MEMBER role): %v",
		e.Stream, e.Group, e.StatusCode, e.Err)
}

func (e *AuthError) Unwrap() error { return e.Err }

// authError returns an *AuthError when err is a 401 or 403 answer.
func authError(stream, group string, err error) *AuthError {
	var ce *coordclient.Error
	if !errors.As(err, &ce) {
		return nil
	}
	if errors.Is(ce, coordclient.ErrUnauthorized) || errors.Is(ce, coordclient.ErrForbidden) {
		return &AuthError{Stream: stream, Group: group, StatusCode: ce.StatusCode, Err: ce}
	}
	return nil
}
