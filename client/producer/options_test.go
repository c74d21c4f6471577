package producer_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rscoord/rscoord/client/producer"
)

func TestNewValidatesOptions(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never contacted
	defer rdb.Close()
	valid := []producer.Opt{
		producer.WithCoordinator("http://127.0.0.1:8080/"),
		producer.WithStream("orders"),
		producer.WithRedis(rdb),
	}
	tests := []struct {
		name string
		opts []producer.Opt
		want []string // every substring must be in the error; none: valid
	}{
		{"minimal", valid, nil},
		{"all set", append(valid,
			producer.WithGroup("billing@eu"), producer.WithRefreshInterval(time.Second),
			producer.WithRoutingLease(3*time.Second), producer.WithMaxAttempts(3),
			producer.WithMaxLen(1000), producer.WithApproxTrim(false),
			producer.WithHTTPClient(&http.Client{}), producer.WithLogger(nil),
			producer.WithFetchTimeout(time.Second)), nil},
		{"nothing", nil, []string{"WithCoordinator is required", "WithStream is required", "WithRedis is required"}},
		{"bad names and url", []producer.Opt{
			producer.WithCoordinator("ftp://x"), producer.WithStream("or{ders}"),
			producer.WithGroup("g/1"), producer.WithRedis(nil),
		}, []string{`coordinator URL "ftp://x"`, "WithStream", "WithGroup", "WithRedis: client is nil"}},
		{"timing", append(valid,
			producer.WithRefreshInterval(time.Millisecond), producer.WithFetchTimeout(0)),
			[]string{"WithRefreshInterval(1ms)", "WithFetchTimeout(0s)"}},
		{"lease not above refresh", append(valid,
			producer.WithRefreshInterval(time.Second), producer.WithRoutingLease(time.Second)),
			[]string{"WithRoutingLease(1s): must exceed"}},
		{"counts", append(valid,
			producer.WithMaxAttempts(0), producer.WithMaxLen(-1), producer.WithHTTPClient(nil)),
			[]string{"WithMaxAttempts(0)", "WithMaxLen(-1)", "WithHTTPClient: client is nil"}},
		{"too many attempts", append(valid, producer.WithMaxAttempts(11)), []string{"WithMaxAttempts(11): must be 1 to 10"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := producer.New(tc.opts...)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				p.Close()
				return
			}
			if err == nil {
				p.Close()
				t.Fatalf("New accepted the options; want an error with %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}
