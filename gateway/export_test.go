package gateway

// AdminLimitWindows makes the gateway that New builds from *o observable:
// the function returned reports how many windows its admin rate limiter
// holds (its memory).
func AdminLimitWindows(o *Options) func() int {
	p := &probe{}
	o.probe = p
	return func() int { return p.s.adminLimit.Len() }
}

// AdminGroupsPerPrincipal is how many groups (or streams) one principal
// may change per admin rate window.
const AdminGroupsPerPrincipal = adminGroupsPerPrincipal
