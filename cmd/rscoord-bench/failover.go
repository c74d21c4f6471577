package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rscoord/rscoord/bench"
	"github.com/rscoord/rscoord/client/coordclient"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/cluster"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/internal/credtest"
	"github.com/rscoord/rscoord/internal/etcdtest"
	"github.com/rscoord/rscoord/persistence"
)

// targetFailover is the failover goal (docs/cluster.md):
// owner SIGKILL → first OK heartbeat from the new owner.
const targetFailover = 3 * time.Second

// FailoverCmd measures the cluster mode: heartbeat throughput through the
// owner, through a stand-by (forwarded) and from clients given every
// replica's URL, a stand-by's first (they follow the owner hint), each as
// a ratio to a single-node Pebble server in the same run, then failover
// times.
type FailoverCmd struct {
	Rscoord      string        `help:"rscoord binary; empty builds ./cmd/rscoord with the go command into a temporary directory."`
	EtcdLeaseTTL time.Duration `default:"0s" help:"--etcd-lease-ttl of the replicas; 0 leaves the server's default (cluster.DefaultLeaseTTL)."`
	Trials       int           `default:"5" help:"Failovers measured: each SIGKILLs the owner, then restarts it as a stand-by."`
	Members      int           `default:"200" help:"Members of the group heartbeating in the throughput phases."`
	Shards       int           `default:"200" help:"Shards of the stream."`
	Conns        int           `default:"16" help:"Concurrent clients in the throughput phases."`
	Duration     time.Duration `default:"5s" help:"Length of each throughput phase."`
	Rounds       int           `default:"2" help:"Throughput rounds; the order of the three targets rotates."`
	JSON         bool          `name:"json" help:"Print the report as JSON."`
}

// FailoverReport is what the failover bench measured.
type FailoverReport struct {
	EtcdLeaseTTL time.Duration `json:"etcdLeaseTtl"`
	// Throughput of steady heartbeats (OK answers per second) per target,
	// over every round.
	Single, Owner, Forwarded float64
	// EveryURL is the throughput of clients (coordclient, one per
	// connection) given every replica's URL, a stand-by's first: they
	// follow the owner hint of the first answer.
	EveryURL float64
	// OwnerRatio, ForwardedRatio and EveryURLRatio are Owner, Forwarded
	// and EveryURL over Single.
	OwnerRatio, ForwardedRatio float64
	EveryURLRatio              float64
	// EveryURLAtOwner is how many of those clients called the owner
	// first when their last phase ended, of EveryURLClients.
	EveryURLAtOwner int
	EveryURLClients int
	Rounds          []map[string]float64
	// Failovers are owner SIGKILL → first OK heartbeat, one per trial.
	Failovers   []time.Duration
	Median, Max time.Duration
}

// proc is a server process started by the bench.
type proc struct {
	name, url string
	args, env []string
	log       string
	cmd       *exec.Cmd
	done      chan struct{}
}

// startProc starts bin with args and, besides the bench's environment,
// env (the credentials).
func startProc(bin, name, url, logPath string, args, env []string) (*proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, url: url, args: args, env: env, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// kill sends sig and waits for the process, SIGKILL after 20 s.
func (p *proc) kill(sig syscall.Signal) {
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// freePort is a loopback port free right now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// benchClients makes the coordclients of the failover bench. They share one
// transport with many idle connections, so that the throughput phases
// measure the servers, not dials; close closes its idle connections.
type benchClients struct{ tr *http.Transport }

func newBenchClients() benchClients {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	return benchClients{tr: tr}
}

// to is a client of urls sending authz, each call bounded by timeout.
func (c benchClients) to(urls []string, authz string, timeout time.Duration) (*coordclient.Client, error) {
	return coordclient.New(urls, coordclient.Options{
		HTTPClient: &http.Client{Transport: c.tr}, Authorization: authz, UserAgent: "rscoord-bench", Timeout: timeout,
	})
}

// close closes the idle connections of every client c made.
func (c benchClients) close() { c.tr.CloseIdleConnections() }

// awaitReady polls /readyz of p until 200.
func awaitReady(ctx context.Context, p *proc, within time.Duration) error {
	cli, err := coordclient.New([]string{p.url}, coordclient.Options{UserAgent: "rscoord-bench", Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	defer cli.CloseIdleConnections()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if p.exited() {
			return fmt.Errorf("%s exited (log %s)", p.name, p.log)
		}
		if _, err := cli.Do(ctx, http.MethodGet, "/readyz", nil, nil); err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready within %v (log %s)", p.name, within, p.log)
}

// beat sends one heartbeat of m through cli and applies the answer.
func beat(ctx context.Context, cli *coordclient.Client, m *coordtest.Member) (protocol.HeartbeatResponse, error) {
	req := m.Request()
	hb, err := cli.Heartbeat(ctx, m.Prefix, m.Group, &req)
	if err != nil {
		return hb, err
	}
	m.Apply(req, hb)
	return hb, nil
}

// settle joins members through base with the Authorization authz (the
// MEMBER's token) and beats them until a whole sweep is OK with nothing
// pending or revoking.
func settle(ctx context.Context, cs benchClients, base, authz string, members []*coordtest.Member, conns int) error {
	cli, err := cs.to([]string{base}, authz, 10*time.Second)
	if err != nil {
		return err
	}
	for range 100 {
		var quiet atomic.Bool
		quiet.Store(true)
		var errs atomic.Value
		forMembers(members, conns, func(m *coordtest.Member) {
			before := len(m.Owned)
			hb, err := beat(ctx, cli, m)
			if err != nil {
				errs.Store(err)
				return
			}
			if hb.Status != protocol.StatusOK || len(hb.Assignment.PendingShards) > 0 || len(m.Revoking) > 0 || len(m.Owned) != before {
				quiet.Store(false)
			}
		})
		if err, _ := errs.Load().(error); err != nil {
			return fmt.Errorf("settle through %s: %w", base, err)
		}
		if quiet.Load() {
			return nil
		}
	}
	return errors.New("settle: the group did not reach a steady state in 100 sweeps")
}

// forMembers runs do on every member, conns at a time.
func forMembers(members []*coordtest.Member, conns int, do func(*coordtest.Member)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, conns)
	for _, m := range members {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			do(m)
		})
	}
	wg.Wait()
}

// steady beats members through base with the Authorization authz closed
// loop, conns workers sharing one client, for d, and returns OK answers
// per second; any other answer is an error.
func steady(ctx context.Context, cs benchClients, base, authz string, members []*coordtest.Member, conns int, d time.Duration) (float64, error) {
	cli, err := cs.to([]string{base}, authz, 10*time.Second)
	if err != nil {
		return 0, err
	}
	return steadyWith(ctx, members, conns, d, func(int) beatFunc {
		return func(ctx context.Context, m *coordtest.Member) (protocol.HeartbeatResponse, error) {
			return beat(ctx, cli, m)
		}
	})
}

// beatFunc sends one heartbeat of m and applies the answer.
type beatFunc func(ctx context.Context, m *coordtest.Member) (protocol.HeartbeatResponse, error)

// steadyEveryURL is steady with one coordclient per worker given urls, as
// members given every replica are: each follows the owner hint of its
// answers. atOwner is how many of them call owner first at the end.
func steadyEveryURL(ctx context.Context, cs benchClients, urls []string, owner, authz string, members []*coordtest.Member, conns int, d time.Duration) (perSecond float64, atOwner, clients int, err error) {
	var mu sync.Mutex
	var all []*coordclient.Client
	var newErr error
	perSecond, err = steadyWith(ctx, members, conns, d, func(int) beatFunc {
		cc, err := cs.to(urls, authz, 10*time.Second)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			newErr = err
			return func(context.Context, *coordtest.Member) (protocol.HeartbeatResponse, error) {
				return protocol.HeartbeatResponse{}, err
			}
		}
		all = append(all, cc)
		return func(ctx context.Context, m *coordtest.Member) (protocol.HeartbeatResponse, error) {
			return beat(ctx, cc, m)
		}
	})
	if err == nil {
		err = newErr
	}
	for _, cc := range all {
		if cc.URL() == owner {
			atOwner++
		}
	}
	return perSecond, atOwner, len(all), err
}

// steadyWith is steady with the heartbeats of worker w sent by
// newBeat(w).
func steadyWith(ctx context.Context, members []*coordtest.Member, conns int, d time.Duration, newBeat func(w int) beatFunc) (float64, error) {
	var ok atomic.Int64
	var firstErr atomic.Value
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	for w := range min(conns, len(members)) {
		// Worker w beats members w, w+conns, …: a member is never beaten
		// by two workers at once, as in a real fleet.
		var mine []*coordtest.Member
		for i := w; i < len(members); i += conns {
			mine = append(mine, members[i])
		}
		send := newBeat(w)
		wg.Go(func() {
			for i := 0; time.Now().Before(end) && ctx.Err() == nil; i++ {
				m := mine[i%len(mine)]
				epoch := m.Epoch
				hb, err := send(ctx, m)
				if err == nil && hb.Status != protocol.StatusOK {
					err = fmt.Errorf("steady heartbeat of %s at epoch %d answered %s (epoch %d, group epoch %d) %s", m.ID, epoch, hb.Status, hb.MemberEpoch, hb.GroupEpoch, hb.Message)
				}
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return 0, err
	}
	return float64(ok.Load()) / time.Since(start).Seconds(), nil
}

// benchStream is the stream (and group) of the cluster phases.
const benchStream = "bench"

// clusterOwner asks base which replica runs the bench's stream: the
// holder of its owner key, or, while nobody holds it (not created yet, or
// moving), the live replica rendezvous hashing places it on.
func clusterOwner(ctx context.Context, cs benchClients, base string) (string, error) {
	admin, err := cs.to([]string{base}, credtest.AdminAuth(), 5*time.Second)
	if err != nil {
		return "", err
	}
	// A replica is ready once its own lease is certain; the one asked
	// learns of it through its etcd watch, a moment later.
	var view protocol.ClusterResponse
	var live []cluster.Replica
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := admin.Do(ctx, http.MethodGet, coordclient.MonitoringPath("cluster"), nil, &view); err != nil {
			return "", fmt.Errorf("cluster view: %w", err)
		}
		live = live[:0]
		for _, r := range view.Replicas {
			if r.Live {
				live = append(live, cluster.Replica{ID: r.ID, AdvertiseURL: r.AdvertiseURL})
			}
		}
		if len(live) == 3 {
			break
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("cluster view of %s: %d live replicas after 10s", base, len(live))
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	for _, g := range view.Groups {
		if g.StreamPrefix == benchStream && g.Owner != "" && slices.ContainsFunc(live, func(r cluster.Replica) bool { return r.ID == g.Owner }) {
			return g.Owner, nil
		}
	}
	placed, _ := cluster.Owner(persistence.StreamUnit(benchStream), live)
	return placed.ID, nil
}

// createStream creates prefix with shards shards through base, as the
// bootstrap admin.
func createStream(ctx context.Context, cs benchClients, base, prefix string, shards int) error {
	admin, err := cs.to([]string{base}, credtest.AdminAuth(), 10*time.Second)
	if err != nil {
		return err
	}
	return bench.CreateStream(ctx, admin, prefix, shards)
}

// memberToken signs in at base as the MEMBER user, as members do, and
// returns the Authorization of its token: every replica accepts it (one
// users file, one token secret).
func memberToken(ctx context.Context, cs benchClients, base string) (string, error) {
	cli, err := cs.to([]string{base}, "", 10*time.Second)
	if err != nil {
		return "", err
	}
	login, err := cli.Login(ctx, credtest.MemberUser, credtest.MemberPassword)
	if err != nil {
		return "", fmt.Errorf("sign-in of %s: %w", credtest.MemberUser, err)
	}
	if login.AccessToken == "" {
		return "", fmt.Errorf("sign-in of %s at %s: no access token", credtest.MemberUser, base)
	}
	return coordclient.BearerAuth(login.AccessToken), nil
}

// Run runs the failover bench.
func (f *FailoverCmd) Run(ctx context.Context, out io.Writer) error {
	if f.Trials < 1 || f.Members < 1 || f.Shards < 1 || f.Conns < 1 || f.Rounds < 1 || f.Duration <= 0 {
		return errors.New("failover: --trials, --members, --shards, --conns, --rounds and --duration must be positive")
	}
	dir, err := os.MkdirTemp("", "rscoord-bench-failover-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin, err := rscoordBinary(ctx, f.Rscoord, dir)
	if err != nil {
		return fmt.Errorf("failover: %w", err)
	}
	// Authentication on, as by default: one users file (the admin, and the
	// MEMBER the members sign in as) and one token secret for every server.
	creds, err := credtest.WriteCluster(dir)
	if err != nil {
		return fmt.Errorf("failover: %w", err)
	}
	etcd, err := etcdtest.StartCluster(ctx, filepath.Join(dir, "etcd"))
	if err != nil {
		return fmt.Errorf("failover: %w", err)
	}
	defer etcd.Stop()

	var procs []*proc
	defer func() {
		for _, p := range procs {
			if !p.exited() {
				p.kill(syscall.SIGTERM)
			}
		}
	}()
	cs := newBenchClients()
	defer cs.close()
	start := func(name string, args ...string) (*proc, error) {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		url := fmt.Sprintf("http://127.0.0.1:%d", port)
		dataDir := filepath.Join(dir, name)
		if err := os.MkdirAll(dataDir, 0o700); err != nil {
			return nil, err
		}
		args = append(append([]string{"serve", "--listen", strings.TrimPrefix(url, "http://"), "--data-dir", dataDir,
			"--log-format", "json", "--log-level", "warn"}, creds.ServerArgs()...), args...)
		if slices.Contains(args, "etcd") {
			args = append(args, "--advertise-url", url, "--replica-id", name)
		}
		p, err := startProc(bin, name, url, filepath.Join(dir, name+".log"), args, credtest.ServerEnv())
		if err == nil {
			procs = append(procs, p)
		}
		return p, err
	}
	single, err := start("single")
	if err != nil {
		return err
	}
	etcdArgs := []string{"--store", "etcd", "--etcd-endpoints", strings.Join(etcd.Endpoints(), ",")}
	lease := cluster.DefaultLeaseTTL
	if f.EtcdLeaseTTL > 0 {
		lease = f.EtcdLeaseTTL
		etcdArgs = append(etcdArgs, "--etcd-lease-ttl", lease.String())
	}
	replicas := map[string]*proc{}
	for i, name := range []string{"r1", "r2", "r3"} {
		p, err := start(name, etcdArgs...)
		if err != nil {
			return err
		}
		replicas[name] = p
		if i == 0 { // r1 first, so that the replicas join in order
			if err := awaitReady(ctx, p, 60*time.Second); err != nil {
				return err
			}
		}
	}
	for _, p := range append([]*proc{single}, replicas["r2"], replicas["r3"]) {
		if err := awaitReady(ctx, p, 60*time.Second); err != nil {
			return err
		}
	}
	owner, err := clusterOwner(ctx, cs, replicas["r2"].url)
	if err != nil {
		return err
	}
	standby := replicas["r2"]
	if owner == "r2" {
		standby = replicas["r3"]
	}

	// Throughput: one group of Members on each store, steady heartbeats.
	newMembers := func() []*coordtest.Member {
		ms := make([]*coordtest.Member, f.Members)
		for i := range ms {
			ms[i] = coordtest.NewMember(fmt.Sprintf("m%d", i), benchStream, benchStream)
		}
		return ms
	}
	singleMembers, clusterMembers := newMembers(), newMembers()
	singleToken, err := memberToken(ctx, cs, single.url)
	if err != nil {
		return fmt.Errorf("failover: %w", err)
	}
	clusterToken, err := memberToken(ctx, cs, standby.url)
	if err != nil {
		return fmt.Errorf("failover: %w", err)
	}
	for _, t := range []struct {
		url, token string
		members    []*coordtest.Member
	}{{single.url, singleToken, singleMembers}, {replicas[owner].url, clusterToken, clusterMembers}} {
		if err := createStream(ctx, cs, t.url, benchStream, f.Shards); err != nil {
			return err
		}
		if err := settle(ctx, cs, t.url, t.token, t.members, f.Conns); err != nil {
			return err
		}
	}
	rep := FailoverReport{EtcdLeaseTTL: lease}
	targets := []struct {
		name, url, token string
		members          []*coordtest.Member
		total            *float64
	}{
		{"single", single.url, singleToken, singleMembers, &rep.Single},
		{"owner", replicas[owner].url, clusterToken, clusterMembers, &rep.Owner},
		{"forwarded", standby.url, clusterToken, clusterMembers, &rep.Forwarded},
		{"everyURL", standby.url, clusterToken, clusterMembers, &rep.EveryURL},
	}
	// Clients given every replica's URL start at the stand-by, the owner
	// last: only the owner hint takes them there.
	everyURL := []string{standby.url}
	for _, name := range []string{"r1", "r2", "r3"} {
		if p := replicas[name]; p != standby && name != owner {
			everyURL = append(everyURL, p.url)
		}
	}
	everyURL = append(everyURL, replicas[owner].url)
	for r := range f.Rounds {
		round := map[string]float64{}
		for i := range targets {
			t := targets[(i+r)%len(targets)]
			// Members idle through the other phases may have outlived their
			// lease: settle again, untimed.
			if err := settle(ctx, cs, t.url, t.token, t.members, f.Conns); err != nil {
				return err
			}
			var perSecond float64
			if t.name == "everyURL" {
				perSecond, rep.EveryURLAtOwner, rep.EveryURLClients, err = steadyEveryURL(ctx, cs, everyURL, replicas[owner].url, t.token, t.members, f.Conns, f.Duration)
			} else {
				perSecond, err = steady(ctx, cs, t.url, t.token, t.members, f.Conns, f.Duration)
			}
			if err != nil {
				return fmt.Errorf("failover: %s phase: %w", t.name, err)
			}
			round[t.name] = perSecond
			*t.total += perSecond / float64(f.Rounds)
		}
		rep.Rounds = append(rep.Rounds, round)
	}
	rep.OwnerRatio, rep.ForwardedRatio, rep.EveryURLRatio = rep.Owner/rep.Single, rep.Forwarded/rep.Single, rep.EveryURL/rep.Single
	single.kill(syscall.SIGTERM)

	// Failovers: SIGKILL the owner, beat one member through the other
	// replicas until an OK answer, restart the killed one as a stand-by.
	probe := clusterMembers[0]
	asker := standby // a live replica that says who owns
	for trial := range f.Trials {
		owner, err := clusterOwner(ctx, cs, asker.url)
		if err != nil {
			return fmt.Errorf("failover: trial %d: %w", trial+1, err)
		}
		victim := replicas[owner]
		var others []*proc
		var through []*coordclient.Client // a client of each of others
		for _, name := range []string{"r1", "r2", "r3"} {
			if name != owner {
				cli, err := cs.to([]string{replicas[name].url}, clusterToken, 2*time.Second)
				if err != nil {
					return fmt.Errorf("failover: trial %d: %w", trial+1, err)
				}
				others = append(others, replicas[name])
				through = append(through, cli)
			}
		}
		if _, err := beat(ctx, through[0], probe); err != nil {
			return fmt.Errorf("failover: trial %d: heartbeat before the kill: %w", trial+1, err)
		}
		killed := time.Now()
		_ = victim.cmd.Process.Signal(syscall.SIGKILL)
		var took time.Duration
		for i := 0; took == 0; i++ {
			if time.Since(killed) > 60*time.Second || ctx.Err() != nil {
				return fmt.Errorf("failover: trial %d: no OK heartbeat within 60 s of the owner's SIGKILL", trial+1)
			}
			hb, err := beat(ctx, through[i%2], probe)
			if err == nil && hb.Status == protocol.StatusOK {
				took = time.Since(killed)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		rep.Failovers = append(rep.Failovers, took)
		<-victim.done
		restarted, err := startProc(bin, victim.name, victim.url, victim.log, victim.args, victim.env)
		if err != nil {
			return err
		}
		procs = append(procs, restarted)
		replicas[owner] = restarted
		if err := awaitReady(ctx, restarted, 60*time.Second); err != nil {
			return err
		}
		asker = others[0]
	}
	sorted := slices.Clone(rep.Failovers)
	slices.Sort(sorted)
	rep.Median, rep.Max = sorted[len(sorted)/2], sorted[len(sorted)-1]

	if f.JSON {
		return printJSON(out, rep)
	}
	fmt.Fprintf(out, "failover: 3 replicas on a 3-member etcd (--etcd-lease-ttl %v), one group of %d members on %d shards\n",
		lease, f.Members, f.Shards)
	for i, r := range rep.Rounds {
		fmt.Fprintf(out, "  round %d  single-node Pebble %7.0f/s  owner %7.0f/s  forwarded %7.0f/s  every URL %7.0f/s\n", i+1, r["single"], r["owner"], r["forwarded"], r["everyURL"])
	}
	fmt.Fprintf(out, "  steady heartbeats (%d conns): single-node Pebble %.0f/s, owner %.0f/s (%.2f×), through a stand-by %.0f/s (%.2f×)\n",
		f.Conns, rep.Single, rep.Owner, rep.OwnerRatio, rep.Forwarded, rep.ForwardedRatio)
	fmt.Fprintf(out, "  clients given every URL, a stand-by's first (following the owner hint): %.0f/s (%.2f×); %d of %d clients calling the owner at the end\n",
		rep.EveryURL, rep.EveryURLRatio, rep.EveryURLAtOwner, rep.EveryURLClients)
	var trials []string
	for _, d := range rep.Failovers {
		trials = append(trials, d.Round(time.Millisecond).String())
	}
	fmt.Fprintf(out, "  owner SIGKILL → first OK heartbeat: %s; median %v, max %v\n", strings.Join(trials, ", "),
		rep.Median.Round(time.Millisecond), rep.Max.Round(time.Millisecond))
	fmt.Fprintf(out, "  target failover ≤ %v (every trial): %s\n", targetFailover, verdict(rep.Max <= targetFailover))
	return nil
}
