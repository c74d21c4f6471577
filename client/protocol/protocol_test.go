package protocol

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func TestValidateNames(t *testing.T) {
	long := strings.Repeat("a", MaxNameLength)
	tests := []struct {
		name     string
		check    func(string) error
		value    string
		wantFail bool
		says     string // in the error
	}{
		{"prefix ok", ValidateStreamPrefix, "orders.v1:eu-west_1", false, ""},
		{"prefix max length", ValidateStreamPrefix, long, false, ""},
		{"prefix too long", ValidateStreamPrefix, long + "a", true, ""},
		{"prefix blank", ValidateStreamPrefix, "", true, ""},
		{"prefix hash tag", ValidateStreamPrefix, "{orders}", true, ""},
		{"prefix at sign", ValidateStreamPrefix, "a@b", true, ""},
		{"prefix space", ValidateStreamPrefix, "a b", true, ""},
		{"prefix unicode", ValidateStreamPrefix, "café", true, "character 'é' at 3"},
		{"member slash", ValidateMemberID, "a/b", true, "character '/' at 1"},
		{"group at sign", ValidateConsumerGroup, "billing@eu", false, ""},
		{"group slash", ValidateConsumerGroup, "a/b", true, ""},
		{"group blank", ValidateConsumerGroup, "", true, ""},
		{"member ok", ValidateMemberID, "10.0.0.7-m0", false, ""},
		{"member brace", ValidateMemberID, "m{0}", true, ""},
		{"prefix dot", ValidateStreamPrefix, ".", true, ""},
		{"group dot dot", ValidateConsumerGroup, "..", true, ""},
		{"member three dots", ValidateMemberID, "...", false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.check(tc.value)
			if (err != nil) != tc.wantFail {
				t.Fatalf("validate(%q) = %v, want failure %v", tc.value, err, tc.wantFail)
			}
			if tc.says != "" && !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("validate(%q) = %v, want it to say %q", tc.value, err, tc.says)
			}
		})
	}
}

func TestErrorCodes(t *testing.T) {
	tests := []struct {
		code   ErrorCode
		status int
		name   string
	}{
		{CodeInvalidRequest, 400, "BAD_REQUEST"},
		{CodeUnauthorized, 401, "UNAUTHORIZED"},
		{CodeGroupNotFound, 404, "NOT_FOUND"},
		{CodeGroupAlreadyExists, 409, "CONFLICT"},
		{CodeGroupHasActiveMembers, 409, "CONFLICT"},
		{CodeRollbackNotAllowed, 422, "UNPROCESSABLE_ENTITY"},
		{CodeRateLimitExceeded, 429, "TOO_MANY_REQUESTS"},
		{CodePayloadTooLarge, 413, "REQUEST_ENTITY_TOO_LARGE"},
		{CodeCoordinatorTerminating, 503, "SERVICE_UNAVAILABLE"},
		{CodeStoreUnavailable, 503, "SERVICE_UNAVAILABLE"},
		{CodeRedisUnavailable, 503, "SERVICE_UNAVAILABLE"},
		{CodeMemberLimitReached, 409, "CONFLICT"},
		{CodeMemberIDInUse, 409, "CONFLICT"},
		{CodeGroupLimitReached, 409, "CONFLICT"},
		{CodeReplicaNotOwner, 503, "SERVICE_UNAVAILABLE"},
		{CodeReplicaLeaseUncertain, 503, "SERVICE_UNAVAILABLE"},
		{CodeReplicaJoining, 503, "SERVICE_UNAVAILABLE"},
	}
	for _, tc := range tests {
		body := NewErrorBody(tc.code, "m")
		if tc.code.HTTPStatus() != tc.status || body.Status != tc.name {
			t.Errorf("%s: status %d %q, want %d %q", tc.code, tc.code.HTTPStatus(), body.Status, tc.status, tc.name)
		}
	}
	if StatusName(http.StatusInternalServerError) != "INTERNAL_SERVER_ERROR" {
		t.Errorf("StatusName(500) = %q", StatusName(500))
	}
}

func TestServedElsewhereNamesTheCodesAnotherReplicaMayServe(t *testing.T) {
	tests := []struct {
		code ErrorCode
		want bool
	}{
		{CodeReplicaNotOwner, true},
		{CodeReplicaLeaseUncertain, true},
		{CodeReplicaJoining, true},
		{CodeCoordinatorTerminating, true},
		{CodeStoreUnavailable, true},
		{CodeMemberIDInUse, false},
		{CodeMemberLimitReached, false},
		{CodeGroupLimitReached, false},
		{CodeRedisUnavailable, false},
		{CodeInvalidRequest, false},
		{"", false},
	}
	for _, tc := range tests {
		if got := tc.code.ServedElsewhere(); got != tc.want {
			t.Errorf("%q.ServedElsewhere() = %v, want %v", tc.code, got, tc.want)
		}
	}
}

func TestResponsesMarshalEmptyArrays(t *testing.T) {
	tests := []struct {
		name string
		v    any
	}{
		{"assignment", EmptyAssignment(3)},
		{"routing", NewProducerRouting("orders", "g", 0, 1)},
		{"shards", Shards(nil)},
		{"compatibility", CurrentCompatibility()},
	}
	for _, tc := range tests {
		raw, err := json.Marshal(tc.v)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		// The release versions a version has not reached are null, as
		// in the reference design; no array ever is.
		text := strings.NewReplacer(`"deprecatedIn":null`, "", `"removedIn":null`, "").Replace(string(raw))
		if strings.Contains(text, "null") {
			t.Errorf("%s marshals a null: %s", tc.name, raw)
		}
	}
}

func TestProducerRouting(t *testing.T) {
	r := NewProducerRouting("orders", "billing", 3, 9)
	if r.StreamKeyPattern != "orders:{shardIndex}" || len(r.Shards) != 3 {
		t.Fatalf("routing = %+v", r)
	}
	for i, s := range r.Shards {
		if s.ShardIndex != i || s.StreamKey != StreamKey("orders", i) || s.RedisSlot != RedisSlot(s.StreamKey) {
			t.Errorf("shard %d = %+v", i, s)
		}
	}
}

func TestAuthorizationHeaders(t *testing.T) {
	req, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
	req.Header.Set("Authorization", BasicAuthorization("ops", "p:w"))
	if u, p, ok := req.BasicAuth(); !ok || u != "ops" || p != "p:w" {
		t.Fatalf("BasicAuth() = %q %q %v", u, p, ok)
	}
	if got := BearerAuthorization("tok"); got != "Bearer tok" {
		t.Fatalf("BearerAuthorization = %q", got)
	}
}
