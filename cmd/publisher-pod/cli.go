package main

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/client/redisconn"
)

// CLI is publisher-pod's command line. Every flag can also be set from the
// environment variable named in its tag: RSCOORD_… for what it shares with
// consumer-pod (coordinator, Redis, stream, group, credentials, logging),
// PUBLISHER_… for what only it has.
type CLI struct {
	Coordinator     string        `default:"http://127.0.0.1:8080" env:"RSCOORD_COORDINATOR" help:"Base URL of the coordinator."`
	Redis           string        `default:"127.0.0.1:6379" env:"RSCOORD_REDIS" help:"Redis holding the shard streams: host:port (several, comma-separated: a Redis Cluster), or a redis:// or rediss:// (TLS) URL with user and password; a host:port's password comes from RSCOORD_REDIS_PASSWORD."`
	RedisUsername   string        `env:"RSCOORD_REDIS_USERNAME" help:"ACL user for a host:port --redis (a URL carries its own); its password comes from RSCOORD_REDIS_PASSWORD."`
	RedisCAFile     string        `name:"redis-ca-file" placeholder:"FILE" env:"RSCOORD_REDIS_CA_FILE" help:"PEM file of the CAs that sign the Redis server certificate of a rediss:// --redis (default: the system's)."`
	RedisNATMap     string        `name:"redis-nat-map" placeholder:"ANNOUNCED=REACHABLE,…" env:"RSCOORD_REDIS_NAT_MAP" help:"Redis Cluster nodes behind NAT: announced-host:port=connect-host:port,… maps each address the cluster announces to one this process reaches (makes --redis a cluster even with one seed)."`
	Stream          string        `required:"" env:"RSCOORD_STREAM" help:"Stream prefix to publish to."`
	Group           string        `env:"RSCOORD_GROUP" help:"Consumer group whose routing is used (default: the stream prefix)."`
	Count           int           `default:"1000" env:"PUBLISHER_COUNT" help:"Number of records to publish."`
	Rate            float64       `default:"0" env:"PUBLISHER_RATE" help:"Records per second; 0 publishes as fast as possible."`
	Batch           int           `default:"1" env:"PUBLISHER_BATCH" help:"Records per PublishBatch; 1 uses Publish."`
	PublishedLog    string        `name:"published-log" env:"PUBLISHER_PUBLISHED_LOG" help:"File receiving one JSON line per published record (eventId, partitionKey, streamKey, recordId); truncated at start."`
	KeySpace        int           `name:"key-space" default:"1000" env:"PUBLISHER_KEY_SPACE" help:"Number of distinct partition keys."`
	Pod             string        `default:"${pod}" env:"PUBLISHER_POD" help:"Pod name, the prefix of every eventId (default: $POD_NAME, else the host name)."`
	RetryTimeout    time.Duration `default:"30s" env:"PUBLISHER_RETRY_TIMEOUT" help:"How long one record (and the start) is retried before it counts as failed."`
	MaxLen          int64         `name:"max-len" default:"0" env:"PUBLISHER_MAX_LEN" help:"Trim each shard stream to about this many entries (MAXLEN ~); 0: no trimming."`
	RefreshInterval time.Duration `default:"5s" env:"PUBLISHER_REFRESH_INTERVAL" help:"Routing refresh interval."`
	RoutingLease    time.Duration `default:"30s" env:"PUBLISHER_ROUTING_LEASE" help:"Publishing stops when routing is older than this without a successful refresh."`
	LogLevel        slog.Level    `default:"info" env:"RSCOORD_LOG_LEVEL" help:"Lowest log level written: debug, info, warn or error."`
	LogFormat       string        `default:"text" enum:"text,json" env:"RSCOORD_LOG_FORMAT" help:"Log format on stderr: text or json."`
	User            string        `env:"RSCOORD_USER" help:"User for HTTP Basic credentials to the coordinator (producer routing needs READ or MEMBER)."`
	Password        string        `env:"RSCOORD_PASSWORD" help:"Password of --user."`
	Token           string        `env:"RSCOORD_TOKEN" help:"Bearer token from POST /coord/v1/auth/login, instead of --user."`
}

// validate reports every flag problem the parser does not catch, at once.
// Producer options (URL, names, durations) are checked again by
// producer.New.
func (c *CLI) validate() error {
	var errs []error
	if err := protocol.ValidateStreamPrefix(c.Stream); err != nil {
		errs = append(errs, fmt.Errorf("--stream: %w", err))
	}
	if c.Group != "" {
		if err := protocol.ValidateConsumerGroup(c.Group); err != nil {
			errs = append(errs, fmt.Errorf("--group: %w", err))
		}
	}
	if c.Count < 0 {
		errs = append(errs, fmt.Errorf("--count %d: must not be negative", c.Count))
	}
	if c.Rate < 0 {
		errs = append(errs, fmt.Errorf("--rate %g: must not be negative", c.Rate))
	}
	if c.Batch < 1 {
		errs = append(errs, fmt.Errorf("--batch %d: must be at least 1", c.Batch))
	}
	if c.KeySpace < 1 {
		errs = append(errs, fmt.Errorf("--key-space %d: must be at least 1", c.KeySpace))
	}
	if c.Pod == "" {
		errs = append(errs, errors.New("--pod: must not be empty"))
	}
	if c.RetryTimeout < 0 {
		errs = append(errs, fmt.Errorf("--retry-timeout %s: must not be negative", c.RetryTimeout))
	}
	if len(c.redisAddrs()) == 0 {
		errs = append(errs, errors.New("--redis: no address"))
	}
	if _, err := redisconn.ParseNATMap(c.RedisNATMap); err != nil {
		errs = append(errs, fmt.Errorf("--redis-nat-map: %w", err))
	}
	return errors.Join(errs...)
}

// redisAddrs splits --redis, dropping empty entries.
func (c *CLI) redisAddrs() []string {
	var out []string
	for _, a := range strings.Split(c.Redis, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}
