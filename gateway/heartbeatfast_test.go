package gateway

import (
	"reflect"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/rscoord/rscoord/client/protocol"
)

// A body the fast decoding takes decodes to the same request under the
// legacy options, which decide every other body.
func FuzzHeartbeatFastDecodeAgrees(f *testing.F) {
	for _, seed := range []string{
		`{"protocolVersion":1,"requestId":"r","memberId":"m1","memberEpoch":0,"metadataVersion":0,"runtimeConsumerCapacity":{"runtimeMaxConcurrency":1,"availableConcurrency":1},"ownedShards":[]}`,
		`{"protocolVersion":1,"requestId":"r","memberId":"m1","memberEpoch":7,"ownedShards":[{"shardIndex":3}],"revokingShards":[{"shard":{"shardIndex":2},"state":"REVOKED","inFlight":0,"ackedAt":"2024-01-02T03:04:05Z"}]}`,
		`{"memberId":"m1","shardProgress":[{"shardIndex":1,"updatedAt":"2024-01-02T03:04:05"},{"shardIndex":2,"updatedAt":17}]}`,
		`{"memberId":"m1","ownedShards":null,"memberEpoch":null,"unknown":{"a":[1,2]}}`,
		`{"memberid":"m1"}`, `{"memberId":"a","memberId":"b"}`, `{"memberEpoch":1.5}`, `{"memberEpoch":"x"}`,
		"{\"memberId\":\"\xff\"}", `[]`, `null`, `{`, ``,
	} {
		f.Add([]byte(seed))
	}
	fast, legacy := heartbeatFastOptions(), heartbeatOptions()
	f.Fuzz(func(t *testing.T, body []byte) {
		var a, b protocol.HeartbeatRequest
		if jsonv2.Unmarshal(body, &a, fast) != nil {
			return
		}
		if err := jsonv2.Unmarshal(body, &b, legacy); err != nil {
			t.Fatalf("%q: fast decoding took it, legacy refused it: %v", body, err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%q: fast %+v, legacy %+v", body, a, b)
		}
	})
}
