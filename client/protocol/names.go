package protocol

import "fmt"

// MaxNameLength is the longest stream prefix, consumer group or member id.
const MaxNameLength = 200

// ValidateStreamPrefix checks a stream prefix: 1–200 of [A-Za-z0-9._:-].
// Braces are refused on purpose: a Redis Cluster hash tag would pin every
// shard of the stream to one slot, the very hot spot sharding removes.
func ValidateStreamPrefix(p string) error {
	return validateName("streamPrefix", p, "")
}

// ValidateConsumerGroup checks a consumer group name: 1–200 of [A-Za-z0-9._:@-].
func ValidateConsumerGroup(g string) error {
	return validateName("consumerGroup", g, "@")
}

// ValidateMemberID checks a member id: 1–200 of [A-Za-z0-9._:@-].
func ValidateMemberID(id string) error {
	return validateName("memberId", id, "@")
}

func validateName(field, v, extra string) error {
	if v == "" {
		return fmt.Errorf("%s must not be blank", field)
	}
	if v == "." || v == ".." {
		// Every name is a URL path segment, and HTTP path cleaning would
		// turn these into a different route.
		return fmt.Errorf("%s must not be %q", field, v)
	}
	if len(v) > MaxNameLength {
		return fmt.Errorf("%s is %d characters long; at most %d are allowed", field, len(v), MaxNameLength)
	}
	// By rune, so that a character outside ASCII is named whole, not by
	// its first byte.
	for i, c := range v {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.' || c == '_' || c == ':' || c == '-':
		case extra != "" && c == rune(extra[0]):
		default:
			allowed := "[A-Za-z0-9._:-]"
			if extra != "" {
				allowed = "[A-Za-z0-9._:" + extra + "-]"
			}
			return fmt.Errorf("%s %q has character %q at %d; allowed are %s", field, v, c, i, allowed)
		}
	}
	return nil
}

// MaxTextLength is the longest, in bytes, a heartbeat's requestId may be,
// and what a group keeps of its memberName and shard progress texts
// (streamKey, lastDeliveredId, lastAckedId; longer ones are cut): a group
// keeps them, in memory and in its store, for every member.
const MaxTextLength = 256

// MaxInstanceIDLength is the longest member incarnation id (instanceId).
const MaxInstanceIDLength = 128

// ValidateInstanceID checks a member incarnation id: 1–128 of
// [A-Za-z0-9._:-]. Empty means "not sent" and is not checked here.
func ValidateInstanceID(id string) error {
	if len(id) > MaxInstanceIDLength {
		return fmt.Errorf("instanceId is %d characters long; at most %d are allowed", len(id), MaxInstanceIDLength)
	}
	return validateName("instanceId", id, "")
}
