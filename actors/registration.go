package actors

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
)

// Defaults of the bounds on groups registered on the fly.
const (
	DefaultMaxGroupsPerStream                = 256
	DefaultMaxGroupRegistrationsPerPrincipal = 64
	DefaultGroupRegistrationWindow           = time.Hour
)

// maxBudgetPrincipals bounds the principals whose registrations the
// coordinator counts at once. Principals are authenticated users, so a
// users file rarely comes near it; past it, a principal not yet counted
// may register nothing until a window ends.
const maxBudgetPrincipals = 10000

// registration explains, for the audit entry, how a group came to be
// registered on the fly.
type registrationVia string

const (
	viaJoin    registrationVia = "a member's join heartbeat"
	viaRouting registrationVia = "a producer's routing request"
)

// onTheFly is an ask to register a group that no admin route asked for:
// who asks, and through which request.
type onTheFly struct {
	by  Caller
	via registrationVia
}

// registrationBudget counts, per principal, the groups registered on the
// fly in the current fixed window. It is shared by every stream actor of
// the coordinator, so that a principal's budget spans streams.
type registrationBudget struct {
	mu     sync.Mutex
	max    int
	window time.Duration
	used   map[string]budgetWindow
}

type budgetWindow struct {
	start time.Time
	n     int
}

func newRegistrationBudget(max int, window time.Duration) *registrationBudget {
	return &registrationBudget{max: max, window: window, used: map[string]budgetWindow{}}
}

// take counts one registration of principal at now, or reports how long
// until its window ends when the budget is spent.
func (b *registrationBudget) take(principal string, now time.Time) (ok bool, retryAfter time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w, known := b.used[principal]
	if known && now.Sub(w.start) >= b.window {
		w, known = budgetWindow{}, false
	}
	if !known {
		if len(b.used) >= maxBudgetPrincipals {
			b.dropExpired(now)
		}
		if len(b.used) >= maxBudgetPrincipals {
			return false, b.window
		}
		w = budgetWindow{start: now}
	}
	if w.n >= b.max {
		return false, w.start.Add(b.window).Sub(now)
	}
	w.n++
	b.used[principal] = w
	return true, 0
}

// dropExpired forgets the windows that ended. The caller holds b.mu.
func (b *registrationBudget) dropExpired(now time.Time) {
	for p, w := range b.used {
		if now.Sub(w.start) >= b.window {
			delete(b.used, p)
		}
	}
}

// admitRegistration decides whether the stream actor may register the new
// group name for an on-the-fly ask: an ADMIN caller always may; any other
// is refused GROUP_LIMIT_REACHED once the stream holds (or is
// provisioning) Config.MaxGroupsPerStream groups, or once its principal
// registered Config.MaxGroupRegistrationsPerPrincipal groups in the
// current window. The check comes before any provisioning, so that a
// refused registration costs neither Redis nor the store.
func (s *streamActor) admitRegistration(name string, fly *onTheFly) error {
	if fly == nil || fly.by.Admin {
		return nil
	}
	cfg := s.env.cfg
	if n := len(s.groups) + len(s.registering); n >= cfg.MaxGroupsPerStream {
		s.env.warn.Warn("group registration refused: the stream holds the most groups registered on the fly",
			"stream-cap\x00"+s.prefix, "stream", s.prefix, "group", name, "principal", fly.by.Principal, "limit", cfg.MaxGroupsPerStream)
		return protocol.Errorf(protocol.CodeGroupLimitReached,
			fmt.Sprintf("stream %q holds %d groups, the most a caller without ADMIN may have registered on the fly; ask an admin to create group %q", s.prefix, n, name))
	}
	if ok, retry := s.env.budget.take(fly.by.Principal, s.env.now()); !ok {
		s.env.warn.Warn("group registration refused: the principal registered the most groups of its window",
			"principal-cap\x00"+fly.by.Principal, "stream", s.prefix, "group", name, "principal", fly.by.Principal,
			"limit", cfg.MaxGroupRegistrationsPerPrincipal, "window", cfg.GroupRegistrationWindow)
		return protocol.Errorf(protocol.CodeGroupLimitReached,
			fmt.Sprintf("these credentials registered %d groups on the fly within %v, the most allowed; retry in %v or ask an admin to create group %q",
				cfg.MaxGroupRegistrationsPerPrincipal, cfg.GroupRegistrationWindow, retry.Round(time.Second), name))
	}
	return nil
}

// auditRegistration records a group registered on the fly, naming who
// asked, before the group is saved: every registration then has its entry
// (a save that fails after it leaves an entry of a registration that did
// not happen, which the group's absence shows).
func (s *streamActor) auditRegistration(ctx context.Context, name string, fly *onTheFly) error {
	start := time.Now()
	_, err := s.env.store.AppendAudit(ctx, protocol.AuditEntry{
		Time: s.env.now(), Operation: protocol.AuditRegisterGroup, StreamPrefix: s.prefix, ConsumerGroup: name,
		Reason:    "registered on the fly by " + string(fly.via),
		Principal: fly.by.Principal, Roles: []string{},
		Result: protocol.AuditResult{Outcome: protocol.AuditAccepted, Status: 200},
	})
	s.env.obs.StoreWrite("audit", time.Since(start), err)
	if err != nil {
		return storeError("audit group registration", err)
	}
	return nil
}
