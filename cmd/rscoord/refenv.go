package main

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kong"
)

// envReferenceKeyPrefix is the environment variable of import-reference's
// --key-prefix.
const envReferenceKeyPrefix = "RSCOORD_REFERENCE_KEY_PREFIX"

// referenceEnv is an environment variable of the reference design
// (ghkdqhrbals/redis-stream-coordinator: its application.yaml names, and
// Spring's environment spelling of its coordinator.* properties) that
// rscoord takes in place of one of its own, so that a deployment moves
// over with its environment. Ours wins when both are set.
type referenceEnv struct {
	alias, ours string
	// convert turns the reference's spelling into ours; nil: as is.
	convert func(string) (string, error)
}

// referenceEnvs lists every alias, in the order they are looked at: for
// one of ours, the first alias set is taken.
func referenceEnvs() []referenceEnv {
	return []referenceEnv{
		{alias: "REDIS_STREAM_COORDINATOR_ADMIN_PASSWORD", ours: envAdminPassword},
		{alias: "COORDINATOR_API_ADMINPASSWORD", ours: envAdminPassword},
		{alias: "REDIS_STREAM_COORDINATOR_TOKEN_SECRET", ours: envTokenSecret},
		{alias: "COORDINATOR_API_TOKENSECRET", ours: envTokenSecret},
		{alias: "REDIS_STREAM_COORDINATOR_TOKEN_TTL", ours: "RSCOORD_TOKEN_TTL", convert: springDuration},
		{alias: "COORDINATOR_API_TOKENTTL", ours: "RSCOORD_TOKEN_TTL", convert: springDuration},
		{alias: "COORDINATOR_HEARTBEATINTERVAL", ours: "RSCOORD_HEARTBEAT_INTERVAL", convert: springDuration},
		{alias: "COORDINATOR_MEMBERLEASETTL", ours: "RSCOORD_MEMBER_LEASE", convert: springDuration},
		{alias: "COORDINATOR_REBALANCETIMEOUT", ours: "RSCOORD_REBALANCE_TIMEOUT", convert: springDuration},
		{alias: "COORDINATOR_STALEMEMBERRETENTION", ours: "RSCOORD_STALE_MEMBER_RETENTION", convert: springDuration},
		{alias: "COORDINATOR_DEFAULTS_INITIALSHARDCOUNT", ours: "RSCOORD_DEFAULT_SHARDS"},
		{alias: "COORDINATOR_API_AUTHENTICATEMEMBERAPI", ours: "RSCOORD_MEMBER_AUTH", convert: springBool},
		{alias: "COORDINATOR_API_RATELIMIT_ADMINMUTATIONSPERMINUTE", ours: "RSCOORD_ADMIN_RATE_LIMIT"},
		{alias: "COORDINATOR_STORE_KEYPREFIX", ours: envReferenceKeyPrefix},
	}
}

// aliasUse is one alias found set.
type aliasUse struct {
	alias, ours string
	// ignored: ours is set too and wins.
	ignored bool
	// value is the alias's value in our spelling ("" when ignored).
	value string
	err   error
}

// lookupFunc reads the environment (os.LookupEnv, or a test's map).
type lookupFunc func(string) (string, bool)

// referenceAliases returns every alias set in the environment: the one
// taken for each of our variables that is not set itself, and those
// ignored.
func referenceAliases(lookup lookupFunc) []aliasUse {
	var out []aliasUse
	taken := map[string]bool{}
	for _, r := range referenceEnvs() {
		v, ok := lookup(r.alias)
		if !ok || v == "" {
			continue
		}
		if ours, set := lookup(r.ours); set && ours != "" || taken[r.ours] {
			out = append(out, aliasUse{alias: r.alias, ours: r.ours, ignored: true})
			continue
		}
		taken[r.ours] = true
		u := aliasUse{alias: r.alias, ours: r.ours, value: v}
		if r.convert != nil {
			if u.value, u.err = r.convert(v); u.err != nil {
				u.err = fmt.Errorf("%s (alias of %s): %w", r.alias, r.ours, u.err)
			}
		}
		out = append(out, u)
	}
	return out
}

// envOrAlias is our variable name, or else the value of its alias.
func envOrAlias(lookup lookupFunc, name string) string {
	if v, ok := lookup(name); ok && v != "" {
		return v
	}
	for _, u := range referenceAliases(lookup) {
		if u.ours == name && !u.ignored && u.err == nil {
			return u.value
		}
	}
	return ""
}

// logReferenceAliases says which aliases were used, and which were
// ignored because ours is set too. The values are never logged: some are
// secrets.
func logReferenceAliases(log *slog.Logger, lookup lookupFunc) {
	for _, u := range referenceAliases(lookup) {
		if u.ignored {
			log.Warn("environment variable of the reference design ignored: ours is set too and wins",
				slog.String("alias", u.alias), slog.String("variable", u.ours))
			continue
		}
		log.Info("environment variable of the reference design used in place of ours",
			slog.String("alias", u.alias), slog.String("variable", u.ours))
	}
}

// aliasResolver gives a flag the value of an alias of its environment
// variable when neither the command line nor the variable set it. It runs
// after the --config file's resolver, so the environment (ours or an
// alias) overrides the file.
type aliasResolver struct{ lookup lookupFunc }

var _ kong.Resolver = aliasResolver{}

func (aliasResolver) Validate(*kong.Application) error { return nil }

func (r aliasResolver) Resolve(_ *kong.Context, _ *kong.Path, flag *kong.Flag) (any, error) {
	for _, env := range flag.Tag.Envs {
		for _, u := range referenceAliases(r.lookup) {
			if u.ours != env || u.ignored {
				continue
			}
			if u.err != nil {
				return nil, u.err
			}
			return u.value, nil
		}
	}
	return nil, nil
}

// aliasSetFor reports whether an alias of one of envs is set (and taken).
func aliasSetFor(lookup lookupFunc, envs []string) bool {
	for _, u := range referenceAliases(lookup) {
		for _, env := range envs {
			if u.ours == env && !u.ignored {
				return true
			}
		}
	}
	return false
}

// springDuration reads a duration as Spring Boot does (a number with a
// unit such as 7d, 30s or 500ms; a bare number of milliseconds; or ISO
// 8601 such as PT168H or P7D) and writes it as Go does.
func springDuration(s string) (string, error) {
	s = strings.TrimSpace(s)
	bad := fmt.Errorf("%q is not a duration (want e.g. 7d, 30s, 500ms, PT168H)", s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return (time.Duration(n) * time.Millisecond).String(), nil
	}
	if strings.HasPrefix(strings.ToUpper(s), "P") {
		d, err := isoDuration(strings.ToUpper(s))
		if err != nil {
			return "", bad
		}
		return d.String(), nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n < 0 || n > 106751 {
			return "", bad
		}
		return (time.Duration(n) * 24 * time.Hour).String(), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return "", bad
	}
	return d.String(), nil
}

// isoDuration reads the day and time parts of an ISO 8601 duration
// (PnDTnHnMnS, seconds possibly fractional), as java.time.Duration does.
func isoDuration(s string) (time.Duration, error) {
	rest, ok := strings.CutPrefix(s, "P")
	if !ok || rest == "" {
		return 0, errors.New("no P")
	}
	var total time.Duration
	datePart, timePart, hasTime := strings.Cut(rest, "T")
	if datePart != "" {
		days, ok := strings.CutSuffix(datePart, "D")
		n, err := strconv.ParseInt(days, 10, 64)
		if !ok || err != nil {
			return 0, errors.New("bad days")
		}
		total += time.Duration(n) * 24 * time.Hour
	}
	if hasTime {
		if timePart == "" {
			return 0, errors.New("empty time part")
		}
		d, err := time.ParseDuration(strings.ToLower(timePart))
		if err != nil {
			return 0, err
		}
		total += d
	}
	return total, nil
}

// springBool reads a boolean as Spring does (true or false, any case).
func springBool(s string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true":
		return "true", nil
	case "false":
		return "false", nil
	}
	return "", fmt.Errorf("%q is not true or false", s)
}
