package auth

import (
	"fmt"
	"strings"

	"github.com/rscoord/rscoord/client/protocol"
)

// Roles is a set of roles (docs/protocol.md §4).
type Roles uint8

// The roles, one bit each.
const (
	Read Roles = 1 << iota
	Write
	Member
	Admin
	Monitor
)

var roleNames = []struct {
	role Roles
	name string
}{
	{Read, protocol.RoleRead}, {Write, protocol.RoleWrite}, {Member, protocol.RoleMember},
	{Admin, protocol.RoleAdmin}, {Monitor, protocol.RoleMonitor},
}

// ParseRoles parses role names (exact, upper case); an unknown name is an
// error naming it.
func ParseRoles(names []string) (Roles, error) {
	var r Roles
next:
	for _, n := range names {
		for _, rn := range roleNames {
			if rn.name == n {
				r |= rn.role
				continue next
			}
		}
		return 0, fmt.Errorf("unknown role %q (known: %s)", n, strings.Join(protocol.AllRoles(), ", "))
	}
	return r, nil
}

// Names lists the roles in r in the order of docs/protocol.md §4; never nil.
func (r Roles) Names() []string {
	out := []string{}
	for _, rn := range roleNames {
		if r&rn.role != 0 {
			out = append(out, rn.name)
		}
	}
	return out
}

// Permission is what a route needs.
type Permission int

// Permissions of the routes of docs/protocol.md §5.
const (
	// PermRead: every GET. READ, MONITOR, WRITE or ADMIN.
	PermRead Permission = iota + 1
	// PermWrite: admin mutations. WRITE or ADMIN.
	PermWrite
	// PermRouting: producer routing. READ, MONITOR, WRITE, MEMBER or ADMIN.
	PermRouting
	// PermMember: heartbeats when member auth is on. MEMBER or ADMIN (WRITE
	// does not imply MEMBER).
	PermMember
	// PermAdmin: the runtime profiles under /debug/pprof. ADMIN only, on
	// every stream (they show the whole process).
	PermAdmin
)

// String names p for logs and error messages.
func (p Permission) String() string {
	switch p {
	case PermRead:
		return "READ"
	case PermWrite:
		return "WRITE"
	case PermRouting:
		return "READ or MEMBER"
	case PermMember:
		return "MEMBER"
	case PermAdmin:
		return "ADMIN"
	}
	return fmt.Sprintf("Permission(%d)", int(p))
}

// grants lists the roles that satisfy each permission.
func (p Permission) grants() Roles {
	switch p {
	case PermRead:
		return Read | Monitor | Write | Admin
	case PermWrite:
		return Write | Admin
	case PermRouting:
		return Read | Monitor | Write | Member | Admin
	case PermMember:
		return Member | Admin
	case PermAdmin:
		return Admin
	}
	return 0
}

// Allows reports whether roles r satisfy p.
func (r Roles) Allows(p Permission) bool { return r&p.grants() != 0 }
