package gateway_test

import (
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/rscoord/rscoord/gateway"
)

// TestOpenAPIDocumentsClientMistakes sends every route that names a stream
// a request a client may get wrong (a bad name in the path, an unknown
// stream or group, a wrong method) and checks that the status answered is
// one the OpenAPI document lists for that operation: clients generated
// from it must not meet an undocumented status.
func TestOpenAPIDocumentsClientMistakes(t *testing.T) {
	t.Parallel()
	var doc struct {
		Paths map[string]map[string]struct {
			Responses map[string]yaml.Node `yaml:"responses"`
		} `yaml:"paths"`
	}
	if err := yaml.Unmarshal(gateway.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	s := serveFake(t, newFake(), fakeOptions{})
	s.CreateStream("orders", 2)
	cases := []struct {
		name string
		args map[string]string
	}{
		{"bad stream name", map[string]string{"prefix": "%7Bbad%7D", "group": "orders"}},
		{"bad group name", map[string]string{"prefix": "orders", "group": "a%20b"}},
		{"unknown stream", map[string]string{"prefix": "nope", "group": "nope"}},
		{"unknown group", map[string]string{"prefix": "orders", "group": "nope"}},
		{"bad member id", map[string]string{"prefix": "orders", "group": "orders", "member": "a%20b"}},
		{"bad shard", map[string]string{"prefix": "orders", "group": "orders", "shard": "x"}},
	}
	body := `{"protocolVersion":1,"requestId":"r","memberId":"m","memberEpoch":0,` +
		`"runtimeConsumerCapacity":{"runtimeMaxConcurrency":1,"availableConcurrency":1},` +
		`"requestedBy":"ops","reason":"r","targetShardCount":3}`
	checked := 0
	for path, ops := range doc.Paths {
		if !strings.Contains(path, "{prefix}") {
			continue
		}
		for method, op := range ops {
			for _, tc := range cases {
				url := path
				for _, p := range []string{"prefix", "group", "member", "id", "shard"} {
					v := tc.args[p]
					if v == "" {
						v = map[string]string{"group": "orders", "member": "m", "id": "rs-1", "shard": "0"}[p]
					}
					url = strings.ReplaceAll(url, "{"+p+"}", v)
				}
				var payload any
				if method != "get" {
					payload = body
				}
				status, raw := s.Do(strings.ToUpper(method), url, payload)
				checked++
				if _, ok := op.Responses[strconv.Itoa(status)]; !ok {
					t.Errorf("%s %s (%s): answered %d, not in the document's responses: %s",
						strings.ToUpper(method), path, tc.name, status, raw)
				}
			}
		}
	}
	// Routes about no stream in the path take it, and their limits, in the
	// query.
	for path, ops := range doc.Paths {
		if strings.Contains(path, "{") || !strings.HasPrefix(path, "/coord/v1/monitoring/") {
			continue
		}
		for method, op := range ops {
			for _, query := range []string{
				"streamPrefix=%7Bbad%7D&shard=0", "streamPrefix=orders&consumerGroup=a%20b&shard=0",
				"streamPrefix=nope&shard=0", "streamPrefix=orders&shard=x", "limit=abc", "before=zz",
			} {
				status, raw := s.Do(strings.ToUpper(method), path+"?"+query, nil)
				checked++
				if _, ok := op.Responses[strconv.Itoa(status)]; !ok {
					t.Errorf("%s %s?%s: answered %d, not in the document's responses: %s",
						strings.ToUpper(method), path, query, status, raw)
				}
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d requests sent: the walk is broken", checked)
	}
}
