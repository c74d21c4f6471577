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

// WithCaller returns ctx carrying c, in one allocation: every
// authorized request gets one, and context.WithValue would also copy c
// to the heap on its own.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return &callerContext{Context: ctx, c: c}
}

// callerContext is a context carrying a Caller in place.
type callerContext struct {
	context.Context
	c Caller
}

// Value is a pointer to the caller for callerKey, else the parent's value.
func (x *callerContext) Value(key any) any {
	if key == (callerKey{}) {
		return &x.c
	}
	return x.Context.Value(key)
}

// callerOf is the caller ctx carries. A context without one (a request
// that did not pass the gateway's authorization) is an unnamed caller
// that is not ADMIN, so that its registrations are limited too.
func callerOf(ctx context.Context) Caller {
	if c, ok := ctx.Value(callerKey{}).(*Caller); ok {
		return *c
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

// WithOrigin returns ctx carrying o, in one allocation (per heartbeat).
func WithOrigin(ctx context.Context, o Origin) context.Context {
	return &originContext{Context: ctx, o: o}
}

// originContext is a context carrying an Origin in place.
type originContext struct {
	context.Context
	o Origin
}

// Value is a pointer to the origin for originKey, else the parent's value.
func (x *originContext) Value(key any) any {
	if key == (originKey{}) {
		return &x.o
	}
	return x.Context.Value(key)
}

// originOf is the origin ctx carries, zero when none.
func originOf(ctx context.Context) Origin {
	if o, ok := ctx.Value(originKey{}).(*Origin); ok {
		return *o
	}
	return Origin{}
}
