package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"time"

	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/protocol"
)

// ScaleConfig describes a scale run: Groups streams (each with its default
// group) hold Members members in all, settled and then idle. The
// coordinator must run in this process, on a store the bench may restart:
// the run measures this process's heap.
type ScaleConfig struct {
	// Server is the coordinator's base URL.
	Server string
	// Credentials authenticate every call; the zero value sends none.
	Credentials coordclient.Credentials
	// Groups is the number of streams (one default group each); Members
	// the members in all, spread evenly; Shards the shards per stream.
	Groups, Members, Shards int
	// Conns is the number of concurrent clients.
	Conns int
	// Restarts is how many times the coordinator is restarted.
	Restarts int
	// Stop stops the coordinator and closes its store; Start opens the
	// same store again, starts the coordinator and returns its new URL.
	Stop  func(context.Context) error
	Start func(context.Context) (string, error)
}

// ScaleReport is the outcome of a scale run.
type ScaleReport struct {
	Config ScaleConfig `json:"-"`
	// Members is the number of members that joined.
	Members int `json:"members"`
	// HeapGroups is the live heap (after GC) holding the groups without
	// members; HeapMembers the same once every member joined and settled.
	// Both are taken with the bench's own member state dropped and its
	// connections closed.
	HeapGroups  uint64 `json:"heapGroups"`
	HeapMembers uint64 `json:"heapMembers"`
	// PerMember is (HeapMembers − HeapGroups) / Members.
	PerMember float64 `json:"bytesPerMember"`
	// Join is how long joining and settling every member took.
	Join     time.Duration   `json:"join"`
	Restarts []RestartResult `json:"restarts"`
}

// RestartResult times one restart.
type RestartResult struct {
	// Stop is how long stopping the coordinator and closing its store took.
	Stop time.Duration `json:"stop"`
	// Start is until the coordinator was started on the reopened store;
	// Served until every group then answered with all its members.
	Start  time.Duration `json:"start"`
	Served time.Duration `json:"served"`
}

// RunScale creates the groups, measures the heap, joins every member,
// measures it again, then restarts the coordinator cfg.Restarts times.
func RunScale(ctx context.Context, cfg ScaleConfig) (ScaleReport, error) {
	if cfg.Groups <= 0 || cfg.Members < cfg.Groups || cfg.Members%cfg.Groups != 0 {
		return ScaleReport{}, fmt.Errorf("scale: members (%d) must be a positive multiple of groups (%d)", cfg.Members, cfg.Groups)
	}
	rep := ScaleReport{Config: cfg}
	hb := HeartbeatConfig{Server: cfg.Server, Credentials: cfg.Credentials, Groups: cfg.Groups, Members: cfg.Members / cfg.Groups,
		Shards: cfg.Shards, Conns: cfg.Conns}
	client, err := newClient(cfg.Server, cfg.Credentials, cfg.Conns)
	if err != nil {
		return rep, err
	}
	defer client.CloseIdleConnections()
	// The streams first, so that the heap of the empty groups is the
	// baseline.
	if err := forEach(ctx, cfg.Conns, cfg.Groups, func(g int) error {
		return CreateStream(ctx, client, benchPrefix(g), cfg.Shards)
	}); err != nil {
		return rep, err
	}
	client.CloseIdleConnections()
	rep.HeapGroups = liveHeap()
	t0 := time.Now()
	members, _, _, err := joinAll(ctx, client, hb)
	if err != nil {
		return rep, err
	}
	rep.Join = time.Since(t0)
	rep.Members = len(members)
	members = nil // the bench's own view of the members is not the coordinator's
	client.CloseIdleConnections()
	rep.HeapMembers = liveHeap()
	rep.PerMember = (float64(rep.HeapMembers) - float64(rep.HeapGroups)) / float64(rep.Members)
	for range cfg.Restarts {
		var r RestartResult
		client.CloseIdleConnections()
		t := time.Now()
		if err := cfg.Stop(ctx); err != nil {
			return rep, fmt.Errorf("scale: stop: %w", err)
		}
		r.Stop = time.Since(t)
		t = time.Now()
		server, err := cfg.Start(ctx)
		if err != nil {
			return rep, fmt.Errorf("scale: start: %w", err)
		}
		r.Start = time.Since(t)
		restarted, err := newClient(server, cfg.Credentials, cfg.Conns)
		if err != nil {
			return rep, err
		}
		err = forEach(ctx, cfg.Conns, cfg.Groups, func(g int) error {
			return served(ctx, restarted, benchPrefix(g), hb.Members)
		})
		restarted.CloseIdleConnections()
		if err != nil {
			return rep, fmt.Errorf("scale: after restart: %w", err)
		}
		r.Served = time.Since(t)
		rep.Restarts = append(rep.Restarts, r)
	}
	return rep, nil
}

// liveHeap is the heap still in use after two collections.
func liveHeap() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func benchPrefix(g int) string { return fmt.Sprintf("bench%d", g) }

// served asks for a group until it answers, and checks it has every member.
func served(ctx context.Context, client *coordclient.Client, prefix string, members int) error {
	var g protocol.GroupResponse
	if _, err := client.Do(ctx, http.MethodGet, coordclient.GroupPath(prefix, prefix), nil, &g); err != nil {
		return err
	}
	if len(g.TargetAssignmentSummary) != members {
		return fmt.Errorf("group %s restored with %d members in its target, want %d", prefix, len(g.TargetAssignmentSummary), members)
	}
	return nil
}

// forEach runs do(0..n-1) from conns goroutines and joins their errors.
func forEach(ctx context.Context, conns, n int, do func(i int) error) error {
	var mu sync.Mutex
	var errs error
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(conns, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := do(i); err != nil {
					mu.Lock()
					errs = errors.Join(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return errors.Join(errs, ctx.Err())
}
