package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"syscall"
	"testing"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/internal/credtest"
)

// deleteStream is DELETE /streams/{prefix} at url as the bootstrap admin.
func deleteStream(t *testing.T, url, prefix string, req protocol.DeleteStreamRequest) (int, []byte) {
	t.Helper()
	body, _ := json.Marshal(req)
	r, err := http.NewRequest(http.MethodDelete, url+protocol.BasePath+"/streams/"+prefix, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", credtest.AdminAuth())
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

// In the cluster mode a stream delete asked of a replica that does not
// run the stream is forwarded to the one that does; afterwards no replica
// lists the stream's groups, and the prefix can be created anew.
func TestClusterStreamDelete(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t)
	reps := map[string]*replicaProc{}
	for _, name := range []string{"r1", "r2"} {
		reps[name] = startReplica(t, c, name, freeLoopbackPort(t))
	}
	asAdmin(t, reps["r1"].url).CreateStream("orders", 2)
	owner := ownerOf(t, reps["r1"].url, "orders", "orders", "")
	other := "r1"
	if owner == "r1" {
		other = "r2"
	}
	status, raw := deleteStream(t, reps[other].url, "orders", protocol.DeleteStreamRequest{RequestedBy: "test"})
	if status != http.StatusConflict || !bytes.Contains(raw, []byte("STREAM_HAS_GROUPS")) {
		t.Fatalf("delete without force through %s: %d %s", other, status, raw)
	}
	status, raw = deleteStream(t, reps[other].url, "orders", protocol.DeleteStreamRequest{RequestedBy: "test", Force: true})
	var resp protocol.DeleteStreamResponse
	if status != http.StatusOK || json.Unmarshal(raw, &resp) != nil || !slices.Equal(resp.DeletedGroups, []string{"orders"}) {
		t.Fatalf("forced delete through %s: %d %s", other, status, raw)
	}
	for name, r := range reps {
		if got, _ := listGroups(t, r.url); len(got.Groups) != 0 {
			t.Fatalf("groups through %s after the delete: %v", name, groupNames(got))
		}
	}
	asAdmin(t, reps[other].url).CreateStream("orders", 3)
	ownerOf(t, reps[other].url, "orders", "orders", "")
	for _, r := range reps {
		if err := r.proc.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
}
