package producerit_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/rscoord/rscoord/client/producer"
	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
)

func TestStartFailsClearly(t *testing.T) {
	rdb := standaloneClient(t)
	tests := []struct {
		name      string
		autoGroup bool
		setup     func(t *testing.T, s *coordtest.Server, prefix string)
		group     string
		wantIs    error
		wantCode  protocol.ErrorCode
	}{
		{
			name:     "unknown stream",
			setup:    func(*testing.T, *coordtest.Server, string) {},
			wantIs:   producer.ErrStreamNotFound,
			wantCode: protocol.CodeStreamNotFound,
		},
		{
			name:     "unknown group without auto-create",
			setup:    func(_ *testing.T, s *coordtest.Server, p string) { s.CreateStream(p, 2) },
			group:    "nobody",
			wantIs:   producer.ErrGroupNotFound,
			wantCode: protocol.CodeGroupNotFound,
		},
		{
			name: "stream scaled to zero shards",
			setup: func(t *testing.T, s *coordtest.Server, p string) {
				s.CreateStream(p, 2)
				zero := 0
				s.JSON(http.MethodPost, protocol.BasePath+"/streams/"+p+"/scale",
					protocol.ScaleRequest{TargetShardCount: &zero, RequestedBy: "t", Reason: "r"}, http.StatusAccepted, nil)
			},
			wantIs: producer.ErrNoShards,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := coordtest.Start(t, "", coordtest.Options{AutoCreateGroups: tc.autoGroup})
			prefix := prefixFor(t)
			tc.setup(t, s, prefix)
			opts := []producer.Opt{producer.WithCoordinator(s.URL), producer.WithStream(prefix), producer.WithRedis(rdb)}
			if tc.group != "" {
				opts = append(opts, producer.WithGroup(tc.group))
			}
			p, err := producer.New(opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			err = p.Start(context.Background())
			if !errors.Is(err, tc.wantIs) {
				t.Fatalf("Start = %v, want %v", err, tc.wantIs)
			}
			if tc.wantCode != "" {
				var ce *producer.CoordinatorError
				if !errors.As(err, &ce) || ce.StatusCode != http.StatusNotFound || ce.Body.ErrorCode != tc.wantCode {
					t.Fatalf("Start = %v, want a 404 %s CoordinatorError", err, tc.wantCode)
				}
			}
			if _, _, err := p.Publish(context.Background(), "k", []any{"f", "v"}); !errors.Is(err, producer.ErrNotStarted) {
				t.Fatalf("Publish after failed Start = %v, want ErrNotStarted", err)
			}
		})
	}
}

func TestStartUnreachableCoordinator(t *testing.T) {
	p, err := producer.New(producer.WithCoordinator("http://127.0.0.1:1"), producer.WithStream("orders"),
		producer.WithRedis(standaloneClient(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Start(context.Background()); err == nil {
		t.Fatal("Start succeeded without a coordinator")
	}
}

func TestLifecycleErrors(t *testing.T) {
	f := newFixture(t, standaloneClient(t), 2)
	p := f.producer(t)
	if err := p.Start(context.Background()); err == nil {
		t.Fatal("second Start succeeded")
	}
	p.Close()
	p.Close() // idempotent
	if _, _, err := p.Publish(context.Background(), "k", []any{"f", "v"}); !errors.Is(err, producer.ErrClosed) {
		t.Fatalf("Publish after Close = %v, want ErrClosed", err)
	}
	res := p.PublishBatch(context.Background(), []producer.Record{{PartitionKey: "k", Fields: []any{"f", "v"}}})
	if !errors.Is(res[0].Err, producer.ErrClosed) {
		t.Fatalf("PublishBatch after Close = %v, want ErrClosed", res[0].Err)
	}
	if err := p.Start(context.Background()); !errors.Is(err, producer.ErrClosed) {
		t.Fatalf("Start after Close = %v, want ErrClosed", err)
	}
}
