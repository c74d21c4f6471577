package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/procfs"

	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/protocol"
)

// heldLoad runs the held members (the load): in the bench's process
// (localLoad) or in a process of its own (childLoad), which runs a
// localLoad. The bench drives it step by step: settle (join every
// member), park (every member's heartbeat held), measure (count the
// answers), stop (stop the members and sum up what they timed).
type heldLoad interface {
	settle(ctx context.Context, cfg heldLoadParams) (interval, took time.Duration, err error)
	park(ctx context.Context) (heldAtOnce, membersHeld int64, err error)
	measure(ctx context.Context) error
	stop(ctx context.Context) (HeldAnswers, error)
	// ended is closed if the load ended on its own (its process died);
	// nil for a load in this process.
	ended() <-chan struct{}
	close() error
}

// heldLoadParams are the held members' parameters.
type heldLoadParams struct {
	Server         string                  `json:"server"`
	Member         coordclient.Credentials `json:"member"`
	Groups         int                     `json:"groups"`
	Members        int                     `json:"members"`
	Conns          int                     `json:"conns"`
	H2C            bool                    `json:"h2c"`
	MembersPerConn int                     `json:"membersPerConn"`
	Prefix         string                  `json:"prefix"`
}

func (p heldLoadParams) stream(g int) string { return p.Prefix + strconv.Itoa(g) }

// localLoad runs the held members in this process.
type localLoad struct {
	client    *coordclient.Client
	h2Clients []*coordclient.Client
	members   []*heldMember
	run       *heldRun
	stopLoops context.CancelFunc
	loops     sync.WaitGroup
}

// settle joins every member, unheld, Conns at a time, until a sweep is
// quiet, and closes the connections it used.
func (l *localLoad) settle(ctx context.Context, p heldLoadParams) (time.Duration, time.Duration, error) {
	auth, err := p.Member.Authorization()
	if err != nil {
		return 0, 0, err
	}
	n := p.Groups * p.Members
	// One keep-alive connection per member, as each member runtime keeps
	// its own.
	conns := n + p.Conns
	l.client, err = coordclient.New([]string{p.Server}, coordclient.Options{
		Authorization: auth, UserAgent: "rscoord-bench",
		HTTPClient: &http.Client{Transport: &http.Transport{
			MaxIdleConns: conns, MaxIdleConnsPerHost: conns, IdleConnTimeout: time.Minute,
		}},
	})
	if err != nil {
		return 0, 0, err
	}
	// Over HTTP/2, MembersPerConn members share a client: a connection
	// each.
	memberClient := func(int) *coordclient.Client { return l.client }
	if p.H2C {
		for range (n + p.MembersPerConn - 1) / p.MembersPerConn {
			c, err := coordclient.New([]string{p.Server}, coordclient.Options{Authorization: auth, UserAgent: "rscoord-bench", H2C: true})
			if err != nil {
				return 0, 0, err
			}
			l.h2Clients = append(l.h2Clients, c)
		}
		memberClient = func(i int) *coordclient.Client { return l.h2Clients[i/p.MembersPerConn] }
	}
	l.members = make([]*heldMember, 0, n)
	for g := range p.Groups {
		for i := range p.Members {
			l.members = append(l.members, &heldMember{client: memberClient(len(l.members)), prefix: p.stream(g), id: fmt.Sprintf("m%d", i),
				simState: newSimState()})
		}
	}
	t0 := time.Now()
	interval, err := settleHeld(ctx, l.client, p.Conns, l.members)
	if err != nil {
		return 0, 0, err
	}
	took := time.Since(t0)
	l.run = &heldRun{interval: interval}
	l.closeIdle()
	return interval, took, nil
}

// park starts every member's loop, each at its own phase of one
// interval, as members that joined at various times do, and returns once
// every member has sent a held heartbeat and all but 1% of them (each
// answered member sends its next at once, but not at the same instant)
// have had one in flight for a quarter of an interval.
func (l *localLoad) park(ctx context.Context) (int64, int64, error) {
	// Each HTTP/2 client opens its connection alone, before its members
	// race to use it (calls racing the first dial may dial for
	// themselves).
	for i, c := range l.h2Clients {
		if _, err := c.Do(ctx, http.MethodGet, "/healthz", nil, nil); err != nil {
			return 0, 0, fmt.Errorf("held: connect HTTP/2 client %d: %w", i, err)
		}
	}
	loopCtx, stop := context.WithCancel(ctx)
	l.stopLoops = stop
	rng := rand.New(rand.NewPCG(1, 2))
	interval := l.run.interval
	for _, m := range l.members {
		phase := time.Duration(rng.Int64N(int64(interval)))
		l.loops.Go(func() {
			select {
			case <-loopCtx.Done():
				return
			case <-time.After(phase):
			}
			l.run.loop(loopCtx, m)
		})
	}
	n := int64(len(l.members))
	parkedBy := time.Now().Add(3*interval + 30*time.Second)
	var stableSince time.Time
	for {
		if err := loopCtx.Err(); err != nil {
			return 0, 0, err
		}
		if l.run.membersHeld.Load() >= n && l.run.inFlight.Load() >= n-n/100 {
			if stableSince.IsZero() {
				stableSince = time.Now()
			} else if time.Since(stableSince) >= interval/4 {
				return l.run.inFlight.Load(), l.run.membersHeld.Load(), nil
			}
		} else {
			stableSince = time.Time{}
		}
		if time.Now().After(parkedBy) {
			return 0, 0, fmt.Errorf("held: %d of %d members had sent a held heartbeat and %d had one in flight after %v, not all and 99%% for %v (is the server's --max-held-heartbeats or --http-max-connections lower, or the load short of CPU?)",
				l.run.membersHeld.Load(), n, l.run.inFlight.Load(), 3*interval+30*time.Second, interval/4)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (l *localLoad) measure(context.Context) error {
	l.run.startCounting()
	return nil
}

// stop ends the count and the members' loops.
func (l *localLoad) stop(context.Context) (HeldAnswers, error) {
	a := l.run.stopCounting()
	return a, l.close()
}

func (l *localLoad) ended() <-chan struct{} { return nil }

func (l *localLoad) close() error {
	if l.stopLoops != nil {
		l.stopLoops()
	}
	l.loops.Wait()
	l.closeIdle()
	return nil
}

func (l *localLoad) closeIdle() {
	if l.client != nil {
		l.client.CloseIdleConnections()
	}
	for _, c := range l.h2Clients {
		c.CloseIdleConnections()
	}
}

// settleHeld heartbeats every member, unheld, conns at a time, until a
// whole sweep is quiet (every answer OK, nothing pending, nothing moved),
// and returns the heartbeat interval the coordinator answered.
func settleHeld(ctx context.Context, client *coordclient.Client, conns int, members []*heldMember) (time.Duration, error) {
	var interval atomic.Int64
	for sweep := 0; sweep < 100; sweep++ {
		var quiet atomic.Bool
		quiet.Store(true)
		err := forEach(ctx, conns, len(members), func(i int) error {
			m := members[i]
			before := len(m.owned)
			req := m.request(0)
			resp, err := client.Heartbeat(ctx, m.prefix, m.prefix, &req)
			for try := 1; err != nil && try < 5 && ctx.Err() == nil; try++ {
				// A transient connection failure: the same request again.
				time.Sleep(time.Duration(try) * errBackoffMin)
				resp, err = client.Heartbeat(ctx, m.prefix, m.prefix, &req)
			}
			if err != nil {
				return fmt.Errorf("join %s/%s: %w", m.prefix, m.id, err)
			}
			m.apply(resp)
			if resp.Status != protocol.StatusOK || len(resp.Assignment.PendingShards) > 0 || len(m.revoking) > 0 || before != len(m.owned) {
				quiet.Store(false)
			}
			interval.Store(resp.HeartbeatIntervalMs)
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("held: settle: %w", err)
		}
		if quiet.Load() {
			d := time.Duration(interval.Load()) * time.Millisecond
			if d <= 0 {
				return 0, errors.New("held: the coordinator answered no heartbeat interval")
			}
			return d, nil
		}
	}
	return 0, errors.New("held: the groups did not settle in 100 sweeps")
}

// heldLoadMsg is a line of the pipe between the bench and the process
// running its held members: the bench sends a step (start with Params,
// park, measure, stop), the process answers it when done (settled with
// Interval and Settle, parked with HeldAtOnce and MembersHeld, measuring, stopped with
// Answers) or with "error" and Error.
type heldLoadMsg struct {
	Step        string          `json:"step"`
	Params      *heldLoadParams `json:"params,omitempty"`
	Interval    time.Duration   `json:"interval,omitempty"`
	Settle      time.Duration   `json:"settle,omitempty"`
	HeldAtOnce  int64           `json:"heldAtOnce,omitempty"`
	MembersHeld int64           `json:"membersHeld,omitempty"`
	Answers     *HeldAnswers    `json:"answers,omitempty"`
	Error       string          `json:"error,omitempty"`
}

// ServeHeldLoad is the main of the process running the held members for
// RunHeld (HeldConfig.LoadCommand): it reads the bench's steps as JSON
// lines from in and answers each on out once done, until stop or the end
// of in (the bench gone), and then stops its members.
func ServeHeldLoad(ctx context.Context, in io.Reader, out io.Writer) error {
	dec, enc := json.NewDecoder(in), json.NewEncoder(out)
	load := &localLoad{}
	defer load.close()
	for started := false; ; {
		var m heldLoadMsg
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return errors.New("held load: the bench closed the pipe before stop")
			}
			return fmt.Errorf("held load: read a step: %w", err)
		}
		var reply heldLoadMsg
		var err error
		switch {
		case m.Step == "start" && !started && m.Params != nil:
			started = true
			reply.Step = "settled"
			reply.Interval, reply.Settle, err = load.settle(ctx, *m.Params)
		case m.Step == "park" && load.run != nil:
			reply.Step = "parked"
			reply.HeldAtOnce, reply.MembersHeld, err = load.park(ctx)
		case m.Step == "measure" && load.run != nil:
			reply.Step = "measuring"
			err = load.measure(ctx)
		case m.Step == "stop" && load.run != nil:
			reply.Step = "stopped"
			var a HeldAnswers
			a, err = load.stop(ctx)
			reply.Answers = &a
		default:
			err = fmt.Errorf("held load: step %q out of order", m.Step)
		}
		if err != nil {
			reply = heldLoadMsg{Step: "error", Error: err.Error()}
		}
		if werr := enc.Encode(reply); werr != nil {
			return errors.Join(err, fmt.Errorf("held load: answer %s: %w", m.Step, werr))
		}
		if err != nil || m.Step == "stop" {
			return err
		}
	}
}

// childLoad runs the held members in a process of their own (its main
// calls ServeHeldLoad), started with nice when it is to run at a lower
// CPU priority: all its threads start niced.
type childLoad struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	enc     *json.Encoder
	replies chan heldLoadMsg // closed at the end of its output
	done    chan struct{}    // closed once it exited
	waitErr error
	closed  bool
}

// startChildLoad starts argv (prefixed with nice -n niceness when
// niceness is not 0) with env added to this process's environment.
func startChildLoad(argv, env []string, niceness int) (*childLoad, error) {
	if len(argv) == 0 {
		return nil, errors.New("held: no load command")
	}
	if niceness != 0 {
		nice, err := exec.LookPath("nice")
		if err != nil {
			return nil, fmt.Errorf("held: the load's niceness needs nice (coreutils) on the PATH: %w", err)
		}
		argv = append([]string{nice, "-n", strconv.Itoa(niceness)}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = sysProcAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("held: start the load process %s: %w", filepath.Base(argv[0]), err)
	}
	c := &childLoad{cmd: cmd, stdin: stdin, enc: json.NewEncoder(stdin),
		replies: make(chan heldLoadMsg, 1), done: make(chan struct{})}
	go func() {
		dec := json.NewDecoder(stdout)
		for {
			var m heldLoadMsg
			if err := dec.Decode(&m); err != nil {
				break
			}
			c.replies <- m
		}
		close(c.replies)
		c.waitErr = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// call sends step m and waits for its answer, want.
func (c *childLoad) call(ctx context.Context, m heldLoadMsg, want string) (heldLoadMsg, error) {
	if err := c.enc.Encode(m); err != nil {
		return heldLoadMsg{}, fmt.Errorf("held: send %s to the load process: %w", m.Step, err)
	}
	select {
	case <-ctx.Done():
		return heldLoadMsg{}, ctx.Err()
	case r, ok := <-c.replies:
		switch {
		case !ok:
			<-c.done
			if c.waitErr == nil {
				return heldLoadMsg{}, fmt.Errorf("held: the load process exited 0 before it answered %s", m.Step)
			}
			return heldLoadMsg{}, fmt.Errorf("held: the load process ended before it answered %s: %w", m.Step, c.waitErr)
		case r.Step == "error":
			return r, fmt.Errorf("held: load process: %s", r.Error)
		case r.Step != want:
			return r, fmt.Errorf("held: the load process answered %s with %q", m.Step, r.Step)
		}
		return r, nil
	}
}

func (c *childLoad) settle(ctx context.Context, p heldLoadParams) (time.Duration, time.Duration, error) {
	r, err := c.call(ctx, heldLoadMsg{Step: "start", Params: &p}, "settled")
	return r.Interval, r.Settle, err
}

func (c *childLoad) park(ctx context.Context) (int64, int64, error) {
	r, err := c.call(ctx, heldLoadMsg{Step: "park"}, "parked")
	return r.HeldAtOnce, r.MembersHeld, err
}

func (c *childLoad) measure(ctx context.Context) error {
	_, err := c.call(ctx, heldLoadMsg{Step: "measure"}, "measuring")
	return err
}

func (c *childLoad) stop(ctx context.Context) (HeldAnswers, error) {
	r, err := c.call(ctx, heldLoadMsg{Step: "stop"}, "stopped")
	if err != nil {
		return HeldAnswers{}, err
	}
	if r.Answers == nil {
		return HeldAnswers{}, errors.New("held: the load process stopped without its counts")
	}
	return *r.Answers, c.close()
}

func (c *childLoad) ended() <-chan struct{} { return c.done }

// close ends the pipe, which ends the process; one that does not exit
// within 10 s is killed.
func (c *childLoad) close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	_ = c.stdin.Close()
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
		return errors.New("held: the load process did not exit within 10 s of the end of its pipe; killed")
	}
	return nil
}

// niceness is the niceness of every thread of process pid.
func niceness(pid int) ([]int, error) {
	threads, err := procfs.AllThreads(pid)
	if err != nil {
		return nil, fmt.Errorf("niceness: %w", err)
	}
	var out []int
	for _, t := range threads {
		st, err := t.Stat()
		if err != nil {
			continue // the thread exited
		}
		out = append(out, st.Nice)
	}
	return out, nil
}
