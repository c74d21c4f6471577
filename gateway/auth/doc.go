// Package auth holds the coordinator's credentials logic (docs/protocol.md §4):
// roles and what each may do, the users file, bcrypt password checks,
// HMAC-SHA256 signed bearer tokens, and the bootstrap of the token secret
// and the admin user in the data directory.
//
// It knows no HTTP: the gateway parses Authorization headers, answers 401,
// 403 and 429, and rate limits logins; this package only says who a
// credential belongs to.
//
// # What the caller does, in order
//
//  1. Load the token secret ([LoadOrCreateSecret]) and the users
//     ([LoadUsersFile], [BootstrapAdmin]) once at start.
//  2. Build one [Authenticator] with [New]; it is safe for concurrent use.
//  3. Per request: [Authenticator.CheckPassword] for Basic credentials,
//     [Authenticator.VerifyToken] for Bearer ones, then
//     [Principal.Allowed] with the route's [Permission].
//
// # Invariants
//
//   - Secrets are compared in constant time (hmac.Equal, bcrypt); a check
//     of an unknown user costs a bcrypt comparison like a known one.
//   - No password, hash, token or secret is ever logged or put in an error
//     message.
//   - A token is only as good as its credential: it names (by
//     fingerprint) the password hash it was issued for, so a removed user or
//     a changed password refuses it; its roles are cut to the user's
//     current roles and grants; a logout revokes it ([Revocations]).
//   - Roles may be scoped to streams (grants with Kafka-style prefix
//     patterns) and users bound to member ids: [Principal.AllowedOn] and
//     [Principal.MemberAllowed].
//   - Files this package writes (secret, admin hash) are mode 0600 and
//     hold no clear-text password.
//
// # Not here
//
// Password changes at run time (edit the users file and restart) and
// external identity providers. Replacing the secret invalidates every
// token unless the old one is kept as a previous secret
// (Config.PreviousSecrets).
package auth
