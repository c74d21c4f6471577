package protocol

// Coordination protocol versions this build speaks. A heartbeat outside
// [MinVersion, MaxVersion] is answered UNSUPPORTED_PROTOCOL.
const (
	MinVersion     = 1
	MaxVersion     = 1
	CurrentVersion = 1
)

// SupportsVersion reports whether v is a protocol version this build speaks.
func SupportsVersion(v int) bool { return v >= MinVersion && v <= MaxVersion }

// BasePath prefixes every HTTP endpoint of the protocol.
const BasePath = "/coord/v1"

// MaxBodyBytes is the largest request body accepted on every route but
// login (16 KiB) and heartbeats (64,065,536 bytes); larger bodies get 413.
const MaxBodyBytes = 1 << 20
