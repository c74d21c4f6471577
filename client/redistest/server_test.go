package redistest_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rscoord/rscoord/client/redistest"
)

func TestStandalonePingXAdd(t *testing.T) {
	s := redistest.Standalone(t)
	if !strings.HasPrefix(s.Addr, "127.0.0.1:") {
		t.Fatalf("Addr = %q, want a 127.0.0.1 address", s.Addr)
	}
	if s.Port > 55000 {
		t.Fatalf("Port = %d, want ≤ 55000 so the cluster bus port fits", s.Port)
	}
	ctx := context.Background()
	c := s.Client()
	if got, err := c.Ping(ctx).Result(); err != nil || got != "PONG" {
		t.Fatalf("PING = %q, %v", got, err)
	}
	id, err := c.XAdd(ctx, &redis.XAddArgs{Stream: "orders:0", Values: []any{"k", "v"}}).Result()
	if err != nil || id == "" {
		t.Fatalf("XADD = %q, %v", id, err)
	}
	if n, err := c.XLen(ctx, "orders:0").Result(); err != nil || n != 1 {
		t.Fatalf("XLEN = %d, %v; want 1", n, err)
	}
	// No persistence: nothing but the log in the directory.
	cfg, err := c.ConfigGet(ctx, "save").Result()
	if err != nil || cfg["save"] != "" {
		t.Fatalf("CONFIG GET save = %v, %v; want empty", cfg, err)
	}
	cfg, err = c.ConfigGet(ctx, "appendonly").Result()
	if err != nil || cfg["appendonly"] != "no" {
		t.Fatalf("CONFIG GET appendonly = %v, %v; want no", cfg, err)
	}
}

func TestRestartKeepsAddressAndDir(t *testing.T) {
	s := redistest.Standalone(t)
	ctx := context.Background()
	c := s.Client()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	addr, dir := s.Addr, s.Dir
	pid := serverPID(t, s)
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if s.Addr != addr || s.Dir != dir {
		t.Fatalf("after restart Addr, Dir = %s, %s; want %s, %s", s.Addr, s.Dir, addr, dir)
	}
	if got := serverPID(t, s); got == pid {
		t.Fatalf("process id %d unchanged: the server was not restarted", pid)
	}
	if processAlive(pid) {
		t.Fatalf("old process %d still alive after Restart", pid)
	}
	// The same client reconnects; without persistence the data is gone.
	if n, err := c.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS k after restart = %d, %v; want 0 (no persistence)", n, err)
	}
}

func TestKillThenRestart(t *testing.T) {
	s := redistest.Standalone(t)
	ctx := context.Background()
	c := s.Client()
	pid := serverPID(t, s)
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if s.Running() || processAlive(pid) {
		t.Fatal("server still running after Kill")
	}
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING succeeded against a killed server")
	}
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after restart: %v", err)
	}
}

func TestStopKillsProcessAndIsIdempotent(t *testing.T) {
	redistest.Require(t)
	s, err := redistest.StartServer(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pid := serverPID(t, s)
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if processAlive(pid) {
		t.Fatalf("process %d alive after Stop", pid)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.Dir, "redis.log")); err != nil {
		t.Fatalf("log missing from the server's directory: %v", err)
	}
}

func TestStartServerReportsBadArguments(t *testing.T) {
	redistest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := redistest.StartServer(ctx, t.TempDir(), "--no-such-option", "x")
	if err == nil {
		s.Stop()
		t.Fatal("StartServer accepted an unknown option")
	}
	if !strings.Contains(err.Error(), "no-such-option") {
		t.Fatalf("error does not quote redis-server's complaint: %v", err)
	}
}

func TestManyServersGetDistinctPorts(t *testing.T) {
	seen := map[string]bool{}
	for range 4 {
		s := redistest.Standalone(t)
		if seen[s.Addr] {
			t.Fatalf("address %s handed out twice", s.Addr)
		}
		seen[s.Addr] = true
	}
}

func TestCreateShardsIsIdempotent(t *testing.T) {
	s := redistest.Standalone(t)
	ctx := context.Background()
	c := s.Client()
	for range 2 {
		if err := redistest.CreateShards(ctx, c, "orders", 3, "g"); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		groups, err := c.XInfoGroups(ctx, "orders:"+strconv.Itoa(i)).Result()
		if err != nil || len(groups) != 1 || groups[0].Name != "g" {
			t.Fatalf("XINFO GROUPS orders:%d = %v, %v", i, groups, err)
		}
	}
	if n, _ := c.Exists(ctx, "orders:3").Result(); n != 0 {
		t.Fatal("orders:3 created beyond n")
	}
}

func serverPID(t *testing.T, s *redistest.Server) int {
	t.Helper()
	c := s.Client()
	defer c.Close()
	info, err := c.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "process_id:"); ok {
			pid, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
	}
	t.Fatal("no process_id in INFO server")
	return 0
}

// processAlive reports whether pid exists and is not a zombie.
func processAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	return !strings.Contains(string(stat), ") Z ")
}

// Pause returns once the process is stopped, not merely signalled: a
// command sent right after it gets no answer until Resume.
func TestPauseReturnsOnceStopped(t *testing.T) {
	s := redistest.Standalone(t)
	ctx := context.Background()
	c := s.Client()
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(info, "process_id:")
	pid, _, _ := strings.Cut(rest, "\r\n")
	// A client that gives up on an answer after 200 ms, once.
	probe := redis.NewClient(&redis.Options{Addr: s.Addr, ReadTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer probe.Close()
	for round := range 3 {
		if err := s.Pause(); err != nil {
			_ = s.Resume()
			t.Fatal(err)
		}
		stat, statErr := os.ReadFile(filepath.Join("/proc", pid, "stat"))
		pingErr := probe.Ping(ctx).Err()
		if err := s.Resume(); err != nil {
			t.Fatal(err)
		}
		if statErr != nil {
			t.Fatalf("round %d: %v", round, statErr)
		}
		if stopped := strings.Contains(string(stat), ") T "); !stopped || pingErr == nil {
			t.Fatalf("round %d, right after Pause: stat %q, PING error %v; want state T (stopped) and no answer", round, stat, pingErr)
		}
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatalf("round %d, PING after Resume: %v", round, err)
		}
	}
}
