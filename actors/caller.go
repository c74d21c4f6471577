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
// authorized request gets one (valueContext).
func WithCaller(ctx context.Context, c Caller) context.Context {
	return &valueContext[callerKey, Caller]{Context: ctx, v: c}
}

// callerOf is the caller ctx carries. A context without one (a request
// that did not pass the gateway's authorization) is an unnamed caller
// that is not ADMIN, so that its registrations are limited too.
func callerOf(ctx context.Context) Caller {
	return valueOf[callerKey, Caller](ctx)
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
	return &valueContext[originKey, Origin]{Context: ctx, v: o}
}

// originOf is the origin ctx carries, zero when none.
func originOf(ctx context.Context) Origin {
	return valueOf[originKey, Origin](ctx)
}

// valueContext is a context carrying one V under the key type K, in
// place: context.WithValue would take a second allocation to copy v to
// the heap, on a path every heartbeat takes.
type valueContext[K comparable, V any] struct {
	context.Context
	v V
}

// Value is a pointer to the carried value for a key of type K, else the
// parent's value.
func (x *valueContext[K, V]) Value(key any) any {
	if _, ok := key.(K); ok {
		return &x.v
	}
	return x.Context.Value(key)
}

// valueOf is the V that ctx carries under the key type K, zero when none.
func valueOf[K comparable, V any](ctx context.Context) V {
	var k K
	if v, ok := ctx.Value(k).(*V); ok {
		return *v
	}
	var zero V
	return zero
}
