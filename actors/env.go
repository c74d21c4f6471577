package actors

import (
	"context"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/internal/ratelog"
	"github.com/rscoord/rscoord/persistence"
)

// env is what every actor of one coordinator shares: read-only settings and
// the few concurrency-safe services actors use. It holds no group state.
type env struct {
	cfg    Config
	store  persistence.Store
	system *actor.ActorSystem
	log    *slog.Logger
	dir    *directory
	failed *failedGroups
	obs    Observer
	// warn logs repeated warnings once per cause and interval.
	warn *ratelog.Logger
	// budget counts the groups each principal registered on the fly.
	budget *registrationBudget
	// terminating is set once shutdown has begun: no heartbeat is held
	// any more.
	terminating atomic.Bool
	// held counts the parked heartbeats of every group against
	// cfg.MaxHeldHeartbeats.
	held heldBudget
	// incarnations numbers the group actors of this coordinator, for the
	// observer (Observer.GroupRemoved).
	incarnations atomic.Uint64
	// closing ends when the coordinator closes: work running beside the
	// actors (Redis calls, waits for asks) stops, and Close waits for it
	// in work.
	closing     context.Context
	stopClosing context.CancelFunc
	work        besideWork
	// live is every group actor's view for scrapes (Coordinator.LiveGroups).
	live liveGroups
	// groupCoolDown is how long a group whose actor kept panicking fails
	// closed before it is loaded again (streamActor.groupStopped).
	groupCoolDown time.Duration
	// mailboxes runs the group actors' mailboxes (mailboxDispatcher).
	mailboxes *mailboxDispatcher
	// timers are the stopped timers of heartbeats' waits for their
	// group actor (budgetTimer).
	timers sync.Pool
	// testHooks are set by this package's tests only.
	testHooks testHooks
}

// testHooks let tests inject faults into actors; all nil in production.
type testHooks struct {
	// afterDecide runs inside the group actor after the state machine
	// decided a heartbeat and before anything is persisted.
	afterDecide func(req *protocol.HeartbeatRequest)
	// stopping runs inside a group actor that is stopping, before it
	// tells the observer the group is gone.
	stopping func(prefix, group string)
}

func (e *env) now() time.Time { return e.cfg.Now().UTC() }

// directory maps stream prefixes and groups to their actors, so that a
// heartbeat reaches its group actor without passing through any other
// mailbox. Stream actors write it; callers read it.
type directory struct {
	mu      sync.RWMutex
	streams map[string]*streamEntry
}

type streamEntry struct {
	pid    *actor.PID
	groups map[string]*actor.PID
	// failed is set when the stream record could not be read: the stream
	// and all its groups fail closed.
	failed error
	// moved is set once the stream was dropped (cluster mode: another
	// replica takes it over): requests that still reach it here are told
	// to retry rather than that it does not exist.
	moved bool
}

func newDirectory() *directory { return &directory{streams: map[string]*streamEntry{}} }

func (d *directory) stream(prefix string) *actor.PID {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if s := d.streams[prefix]; s != nil {
		return s.pid
	}
	return nil
}

func (d *directory) group(prefix, name string) (stream, group *actor.PID, failed error) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	s := d.streams[prefix]
	if s == nil || s.pid == nil {
		return nil, nil, nil
	}
	return s.pid, s.groups[name], s.failed
}

// entry returns the entry of prefix, creating it. The caller holds d.mu.
func (d *directory) entry(prefix string) *streamEntry {
	s := d.streams[prefix]
	if s == nil {
		s = &streamEntry{groups: map[string]*actor.PID{}}
		d.streams[prefix] = s
	}
	return s
}

// putStream publishes a stream actor. Its groups may already be published:
// a new stream actor can spawn them before its spawner gets here.
func (d *directory) putStream(prefix string, pid *actor.PID, failed error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.entry(prefix)
	s.pid, s.failed, s.moved = pid, failed, false
}

// moved reports whether prefix was dropped and not added again.
func (d *directory) moved(prefix string) bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	s := d.streams[prefix]
	return s != nil && s.moved && s.pid == nil
}

func (d *directory) putGroup(prefix, name string, pid *actor.PID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.entry(prefix).groups[name] = pid
}

func (d *directory) removeGroup(prefix, name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s := d.streams[prefix]; s != nil {
		delete(s.groups, name)
	}
}

// removeStream forgets a stream's actors, marks it moved and returns the
// stream's actor, nil if there was none.
func (d *directory) removeStream(prefix string) *actor.PID {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.streams[prefix]
	d.streams[prefix] = &streamEntry{groups: map[string]*actor.PID{}, moved: true}
	if s == nil {
		return nil
	}
	return s.pid
}

// forget drops what the directory knows of a deleted stream whose actors
// are gone: requests for it answer STREAM_NOT_FOUND, not "moving".
func (d *directory) forget(prefix string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s := d.streams[prefix]; s != nil && s.pid == nil {
		delete(d.streams, prefix)
	}
}

// prefixes lists the streams with an actor, sorted.
func (d *directory) prefixes() []string {
	d.mu.RLock()
	out := make([]string, 0, len(d.streams))
	for prefix, s := range d.streams {
		if s.pid != nil {
			out = append(out, prefix)
		}
	}
	d.mu.RUnlock()
	sort.Strings(out)
	return out
}

// groupRef names one group actor.
type groupRef struct {
	prefix, name string
	pid          *actor.PID
}

// allGroups lists every group actor sorted by prefix then name.
func (d *directory) allGroups() []groupRef {
	d.mu.RLock()
	var out []groupRef
	for prefix, s := range d.streams {
		for name, pid := range s.groups {
			out = append(out, groupRef{prefix: prefix, name: name, pid: pid})
		}
	}
	d.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].prefix != out[j].prefix {
			return out[i].prefix < out[j].prefix
		}
		return out[i].name < out[j].name
	})
	return out
}

func (d *directory) streamPIDs() []*actor.PID {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make([]*actor.PID, 0, len(d.streams))
	for _, s := range d.streams {
		if s.pid != nil {
			out = append(out, s.pid)
		}
	}
	return out
}

// failedGroups remembers groups that failed closed, for health answers.
type failedGroups struct {
	mu     sync.Mutex
	groups map[string]error
}

func newFailedGroups() *failedGroups { return &failedGroups{groups: map[string]error{}} }

func (f *failedGroups) remember(prefix, name string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.groups[prefix+"/"+name] = err
}

func (f *failedGroups) forget(prefix, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.groups, prefix+"/"+name)
}

// forgetStream forgets every failed group of prefix.
func (f *failedGroups) forgetStream(prefix string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k := range f.groups {
		if strings.HasPrefix(k, prefix+"/") {
			delete(f.groups, k)
		}
	}
}

// list returns "prefix/group: error" lines, sorted.
func (f *failedGroups) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, 0, len(f.groups))
	for k, err := range f.groups {
		out = append(out, k+": "+err.Error())
	}
	sort.Strings(out)
	return out
}

// storeTimeout bounds one store call made from inside an actor.
const storeTimeout = 10 * time.Second

// storeContext is the context of one store call made from inside an
// actor's mailbox: bounded by storeTimeout, and ended when the
// coordinator closes (closing), so that no call outlives it.
func (e *env) storeContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(e.closing, storeTimeout)
}
