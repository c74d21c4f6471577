package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
	"github.com/rscoord/rscoord/gateway"
	"github.com/rscoord/rscoord/gateway/auth"
)

func TestLogin(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{Auth: &coordtest.Auth{TokenTTL: time.Hour}})
	writerBasic := coordtest.Basic(coordtest.UserWriter, coordtest.Password(coordtest.UserWriter))
	tests := []struct {
		name   string
		body   string
		header string
		status int
		code   protocol.ErrorCode
	}{
		{"body", `{"username":"writer","password":"writer-pw"}`, "", 200, ""},
		{"basic with empty body", "", writerBasic, 200, ""},
		{"lowercase basic", "", "basic" + strings.TrimPrefix(writerBasic, "Basic"), 200, ""},
		{"body wins over header", `{"username":"writer","password":"writer-pw"}`, coordtest.Basic("nobody", "x"), 200, ""},
		{"wrong password", `{"username":"writer","password":"nope"}`, "", 401, protocol.CodeUnauthorized},
		{"unknown user", `{"username":"ghost","password":"nope"}`, "", 401, protocol.CodeUnauthorized},
		{"wrong basic", "", coordtest.Basic(coordtest.UserWriter, "nope"), 401, protocol.CodeUnauthorized},
		{"nothing", "", "", 401, protocol.CodeUnauthorized},
		{"bearer is not a login", "", "Bearer x", 401, protocol.CodeUnauthorized},
		{"missing password", `{"username":"writer"}`, "", 400, protocol.CodeInvalidRequest},
		{"malformed", `{"username":`, "", 400, protocol.CodeInvalidRequest},
		// §4's "empty body with a Basic header": client libraries that
		// always send a JSON body send {} or null for "nothing", or a login
		// object whose members are null.
		{"basic with an empty object", `{}`, writerBasic, 200, ""},
		{"basic with null", `null`, writerBasic, 200, ""},
		{"basic with null members", `{"username":null,"password":null}`, writerBasic, 200, ""},
		{"basic with empty members", `{"username":"","password":""}`, writerBasic, 200, ""},
		{"basic with unknown members only", `{"rememberMe":true}`, writerBasic, 200, ""},
		{"wrong basic with an empty object", `{}`, coordtest.Basic(coordtest.UserWriter, "nope"), 401, protocol.CodeUnauthorized},
		{"empty object without a header", `{}`, "", 400, protocol.CodeInvalidRequest},
		{"empty object with a bearer header", `{}`, "Bearer x", 400, protocol.CodeInvalidRequest},
		{"half a body with basic", `{"username":"writer"}`, writerBasic, 400, protocol.CodeInvalidRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, hdr, raw := send(t, s.URL, http.MethodPost, base+"/auth/login", tc.body, tc.header)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, raw)
			}
			if tc.status != 200 {
				var eb protocol.ErrorBody
				if err := json.Unmarshal(raw, &eb); err != nil || eb.ErrorCode != tc.code {
					t.Fatalf("body %s, want %s", raw, tc.code)
				}
				if status == 401 && hdr.Get("WWW-Authenticate") != `Basic realm="rscoord"` {
					t.Fatalf("401 without the Basic challenge")
				}
				return
			}
			var resp protocol.LoginResponse
			if err := json.Unmarshal(raw, &resp); err != nil {
				t.Fatal(err)
			}
			left := time.Until(resp.ExpiresAt)
			if resp.TokenType != "Bearer" || resp.AccessToken == "" || strings.Join(resp.Roles, ",") != "WRITE" ||
				left < 59*time.Minute || left > time.Hour || resp.ExpiresInSeconds < 3540 || resp.ExpiresInSeconds > 3600 {
				t.Fatalf("login answer %+v", resp)
			}
			if strings.Contains(resp.AccessToken, "writer-pw") {
				t.Fatal("the token carries the password")
			}
			// The token works where WRITE is needed.
			s.As("Bearer "+resp.AccessToken).JSON(http.MethodPost, base+"/streams/s-"+strconv.Itoa(int(time.Now().UnixNano()%1e9)),
				`{"requestedBy":"ops"}`, http.StatusCreated, nil)
		})
	}
}

func TestLoginBruteForce(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{
		Auth: &coordtest.Auth{},
		Gateway: gateway.Options{
			LoginFailureLimit: 3, LoginAddressFailureLimit: 5, LoginFailureWindow: time.Hour,
		},
	})
	try := func(user, password string) (int, http.Header) {
		t.Helper()
		body, _ := json.Marshal(protocol.LoginRequest{Username: user, Password: password})
		status, hdr, _ := send(t, s.URL, http.MethodPost, base+"/auth/login", string(body), "")
		return status, hdr
	}
	for i := range 3 {
		if status, _ := try(coordtest.UserReader, "guess"); status != http.StatusUnauthorized {
			t.Fatalf("failed login %d: %d", i+1, status)
		}
	}
	// Past the username's limit a wrong password is slowed and refused with
	// Retry-After, and the right one still logs in: the limits slow
	// failures, never the credentials that verify.
	status, hdr := try(coordtest.UserReader, "guess")
	if status != http.StatusTooManyRequests {
		t.Fatalf("a wrong password past the limit: %d", status)
	}
	if secs, err := strconv.Atoi(hdr.Get("Retry-After")); err != nil || secs < 3590 || secs > 3600 {
		t.Fatalf("Retry-After %q", hdr.Get("Retry-After"))
	}
	if status, _ := try(coordtest.UserReader, coordtest.Password(coordtest.UserReader)); status != http.StatusOK {
		t.Fatalf("the right password past the limit: %d", status)
	}
	// The reader's four failures and this one fill the address's limit.
	if status, _ := try(coordtest.UserWriter, "guess"); status != http.StatusUnauthorized {
		t.Fatalf("failed login of writer: %d", status)
	}
	// The address has reached its limit: every failure from it is refused
	// now, and right passwords still pass, at login and through Basic on
	// other endpoints.
	if status, _ := try(coordtest.UserWriter, "guess"); status != http.StatusTooManyRequests {
		t.Fatalf("a wrong password from an address past its limit: %d", status)
	}
	if status, _ := try(coordtest.UserWriter, coordtest.Password(coordtest.UserWriter)); status != http.StatusOK {
		t.Fatalf("the right password from an address past its limit: %d", status)
	}
	status, hdr, _ = send(t, s.URL, http.MethodGet, base+"/monitoring/health", "", coordtest.Basic(coordtest.UserAdmin, "guess"))
	if status != http.StatusTooManyRequests || hdr.Get("Retry-After") == "" {
		t.Fatalf("a wrong Basic password from an address past its limit: %d", status)
	}
	if status, _, raw := send(t, s.URL, http.MethodGet, base+"/monitoring/health", "", coordtest.Basic(coordtest.UserAdmin, coordtest.Password(coordtest.UserAdmin))); status != http.StatusOK {
		t.Fatalf("the right Basic password from an address past its limit: %d %s", status, raw)
	}
	tok, err := s.Auth.Issue(mustPrincipal(t, s, coordtest.UserReader))
	if err != nil {
		t.Fatal(err)
	}
	checkMetric(t, s.As("Bearer "+tok.Value), "rscoord_rate_limit_refusals_total", map[string]string{"limiter": "login"}, func(v float64) bool { return v >= 3 })
}

func mustPrincipal(t *testing.T, s *coordtest.Server, user string) auth.Principal {
	t.Helper()
	p, err := s.Auth.CheckPassword(context.Background(), user, coordtest.Password(user))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConcurrentGuessesStayWithinTheLimit: password checks sent all at
// once are held to the failure limits, as checks one after another are,
// and past them the right password still passes. Good credentials sent
// all at once from one address all pass, however many.
func TestConcurrentGuessesStayWithinTheLimit(t *testing.T) {
	t.Parallel()
	// A bcrypt cost above the test users' minimum, so that the checks
	// overlap as real ones (100 ms at the default cost) do. The race
	// detector makes bcrypt ten to twenty times slower, so under -race
	// the cost is 5, which takes about as long as 8 without it. At cost 8
	// under -race one check took seconds of CPU on a loaded machine: the
	// checks of a refused guess (queued two at a time, then the one slow
	// check past the limit, then the hold) outlasted the 10 s write
	// deadline of an unauthenticated answer, and the client saw EOF.
	cost := 8
	if raceEnabled {
		cost = 5
	}
	users := coordtest.TestUsers(t)
	for i := range users {
		hash, err := auth.HashPassword(coordtest.Password(users[i].Username), cost)
		if err != nil {
			t.Fatal(err)
		}
		users[i].PasswordHash = hash
	}
	type request struct{ method, path, body, authorization string }
	login := func(password string) request {
		body, _ := json.Marshal(protocol.LoginRequest{Username: coordtest.UserReader, Password: password})
		return request{http.MethodPost, base + "/auth/login", string(body), ""}
	}
	basic := func(password string) request {
		return request{http.MethodGet, base + "/monitoring/health", "", coordtest.Basic(coordtest.UserReader, password)}
	}
	good := coordtest.Password(coordtest.UserReader)
	const tries = 24
	tests := []struct {
		name                 string
		userLimit, addrLimit int
		try, after           request
		want                 map[int]int // statuses of the tries
		wantAfter            int
	}{
		{name: "login per username", userLimit: 3, addrLimit: 100, try: login("guess"), after: login(good),
			want: map[int]int{http.StatusUnauthorized: 3, http.StatusTooManyRequests: tries - 3}, wantAfter: http.StatusOK},
		{name: "login per address", userLimit: 100, addrLimit: 4, try: login("guess"), after: login(good),
			want: map[int]int{http.StatusUnauthorized: 4, http.StatusTooManyRequests: tries - 4}, wantAfter: http.StatusOK},
		{name: "basic per address", userLimit: 100, addrLimit: 5, try: basic("guess"), after: basic(good),
			want: map[int]int{http.StatusUnauthorized: 5, http.StatusTooManyRequests: tries - 5}, wantAfter: http.StatusOK},
		// Good credentials fail no check: none is refused, even with more
		// checks at once than the limit.
		{name: "good basic at once", userLimit: 3, addrLimit: 3, try: basic(good), after: basic(good),
			want: map[int]int{http.StatusOK: tries}, wantAfter: http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := coordtest.Start(t, "", coordtest.Options{
				Auth: &coordtest.Auth{Users: users},
				Gateway: gateway.Options{LoginFailureLimit: tc.userLimit, LoginAddressFailureLimit: tc.addrLimit,
					LoginFailureWindow: time.Hour},
			})
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: tries}}
			defer client.CloseIdleConnections()
			do := func(r request) (int, error) {
				req, err := http.NewRequest(r.method, s.URL+r.path, strings.NewReader(r.body))
				if err != nil {
					return 0, err
				}
				if r.body != "" {
					req.Header.Set("Content-Type", "application/json")
				}
				if r.authorization != "" {
					req.Header.Set("Authorization", r.authorization)
				}
				resp, err := client.Do(req)
				if err != nil {
					return 0, err
				}
				defer resp.Body.Close()
				_, err = io.Copy(io.Discard, resp.Body)
				return resp.StatusCode, err
			}
			start := make(chan struct{})
			statuses := make([]int, tries)
			var wg sync.WaitGroup
			for i := range tries {
				wg.Go(func() {
					<-start
					status, err := do(tc.try)
					if err != nil {
						t.Error(err)
					}
					statuses[i] = status
				})
			}
			close(start)
			wg.Wait()
			got := map[int]int{}
			for _, st := range statuses {
				got[st]++
			}
			if !maps.Equal(got, tc.want) {
				t.Fatalf("statuses %v, want %v", got, tc.want)
			}
			if status, err := do(tc.after); err != nil || status != tc.wantAfter {
				t.Fatalf("the right password afterwards: %d %v, want %d", status, err, tc.wantAfter)
			}
		})
	}
}
