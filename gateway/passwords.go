package gateway

import (
	"context"
	"errors"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rscoord/rscoord/gateway/auth"
	"github.com/rscoord/rscoord/gateway/internal/window"
)

// maxFailureDelay is the longest a failed password check past its limit
// is held before its 429 answer: long enough that a client guessing
// passwords one after the other gets about one guess a second, short
// enough that a client's request timeout outlasts it.
const maxFailureDelay = time.Second

// maxSlowWait is the longest a password check past a failure limit waits
// for its turn (slowCheck).
const maxSlowWait = 2 * time.Second

// DefaultPasswordWait is [Options.PasswordWait] when unset. A request that
// has not authenticated yet gets DefaultUnauthenticatedWriteTimeout (10 s)
// to be answered: the wait, a bcrypt comparison and maxFailureDelay fit
// within it, so a refused check is answered 429 rather than cut off.
const DefaultPasswordWait = 5 * time.Second

// checkPassword checks a username and password under the failure limits.
//
// The limits slow failures and never lock out credentials that verify.
// Failures count per username per client address (loginUser) and per
// client address (loginAddr). Below both limits a check runs as usual. Past
// either, the check still runs, one at a time across the server, so that
// failures can keep at most one core busy with bcrypt; a failure is then
// held up to maxFailureDelay and answered 429, and a success passes. A
// proxy's address is shared by every client behind it, so a wrong password
// from one of them must not refuse the others' right ones.
//
// Credentials verified a short while ago pass before any limit: they cost
// no bcrypt work.
func (s *server) checkPassword(c *gin.Context, user, password string) (auth.Principal, *authFailure) {
	if p, ok := s.auth.Verified(user, password); ok {
		return p, nil
	}
	// Every wait below ends with this bound; a bcrypt comparison once
	// started runs to its end.
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.opts.PasswordWait)
	defer cancel()
	// The check holds its place under both limits before it runs, so that
	// checks running at once cannot together pass either limit unnoticed.
	// The username first, always: a check holding the address's place
	// never waits for another, so waits cannot go round in a circle.
	userPlace, userErr := s.loginUser.Reserve(ctx, loginUserKey(c, user))
	if userErr != nil && !limitReached(userErr) {
		return auth.Principal{}, passwordLimited(userErr, "")
	}
	defer userPlace.Release()
	addrPlace, addrErr := s.loginAddr.Reserve(ctx, c.ClientIP())
	if addrErr != nil && !limitReached(addrErr) {
		return auth.Principal{}, passwordLimited(addrErr, "")
	}
	defer addrPlace.Release()

	limited := errors.Join(userErr, addrErr)
	var p auth.Principal
	var err error
	if limited == nil {
		p, err = s.auth.CheckPassword(ctx, user, password)
	} else {
		p, err = s.slowCheck(ctx, user, password)
	}
	switch {
	case err == nil:
		return p, nil
	case !errors.Is(err, auth.ErrBadCredentials):
		return auth.Principal{}, passwordLimited(err, "")
	}
	userPlace.Commit()
	addrPlace.Commit()
	if limited == nil {
		return auth.Principal{}, unauthorized("bad username or password")
	}
	fail := passwordLimited(limited, "too many failed password checks for this user from this address; retry later")
	if addrErr != nil {
		fail = passwordLimited(limited, "too many failed password checks from this address; retry later")
	}
	holdFailure(ctx, min(fail.retryAfter, maxFailureDelay))
	return auth.Principal{}, fail
}

// slowCheck checks a password past a failure limit: one such check at a
// time across the server. A check that cannot start within maxSlowWait is
// not run (the caller answers 429 with a short Retry-After): while a flood
// of failures keeps the place busy, requests must not queue until their
// connections' write deadlines cut them off.
func (s *server) slowCheck(ctx context.Context, user, password string) (auth.Principal, error) {
	wait := time.NewTimer(maxSlowWait)
	defer wait.Stop()
	select {
	case s.slowChecks <- struct{}{}:
	case <-wait.C:
		return auth.Principal{}, errors.New("gateway: no place for a password check past its limit")
	case <-ctx.Done():
		return auth.Principal{}, ctx.Err()
	}
	defer func() { <-s.slowChecks }()
	return s.auth.CheckPassword(ctx, user, password)
}

// limitReached reports whether err is a limiter's refusal because its
// limit is reached (rather than a wait that ended with the request).
func limitReached(err error) bool {
	var limited *window.LimitError
	return errors.As(err, &limited)
}

// holdFailure waits d, or until ctx ends.
func holdFailure(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
