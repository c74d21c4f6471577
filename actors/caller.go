package actors

import "context"

// Caller is who asks the coordinator for a change it makes on the fly: a
// group registered by a member's join or a producer's routing request.
// The gateway attaches it to each authorized request's context
// ([WithCaller]); the coordinator names it in the registration's audit
// entry and limits the registrations of callers that are not ADMIN.
type Caller struct {
	// Principal is the authenticated user ("anonymous" with
	// authentication off).
	Principal string
	// Admin says the caller holds ADMIN on the stream it names: its
	// registrations are audited but not limited.
	Admin bool
}

type callerKey struct{}

// WithCaller returns ctx carrying c.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// callerOf is the caller ctx carries. A context without one (a request
// that did not pass the gateway's authorization) is an unnamed caller
// that is not ADMIN, so that its registrations are limited too.
func callerOf(ctx context.Context) Caller {
	if c, ok := ctx.Value(callerKey{}).(Caller); ok {
		return c
	}
	return Caller{}
}

// Origin is where a heartbeat comes from, for the members API: the
// client address (the connection's, as the gateway reads it) and the
// User-Agent header. The gateway attaches it with [WithOrigin].
type Origin struct {
	Address   string
	UserAgent string
}

type originKey struct{}

// WithOrigin returns ctx carrying o.
func WithOrigin(ctx context.Context, o Origin) context.Context {
	return context.WithValue(ctx, originKey{}, o)
}

// originOf is the origin ctx carries, zero when none.
func originOf(ctx context.Context) Origin {
	o, _ := ctx.Value(originKey{}).(Origin)
	return o
}
