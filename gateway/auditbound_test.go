package gateway_test

import (
	"io/fs"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/coordtest"
)

// dirSize is the bytes of every file under dir.
func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRefusedRequestsAreAuditedWithoutBodies: 300 refused mutations with
// 100 KB bodies grow the data directory by less than 2 MB; their entries
// hold no body field.
func TestRefusedRequestsAreAuditedWithoutBodies(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{Auth: &coordtest.Auth{}})
	s.CreateStream("orders", 2)
	before := dirSize(t, s.Dir)
	body := `{"targetShardCount":3,"requestedBy":"x","reason":"` + strings.Repeat("r", 100_000) + `"}`
	for i := range 300 {
		cred := ""
		if i%2 == 1 {
			cred = coordtest.Basic(coordtest.UserReader, coordtest.Password(coordtest.UserReader)) // 403
		}
		if status, _, _ := send(t, s.URL, http.MethodPost, base+"/streams/orders/scale", body, cred); status != 401 && status != 403 {
			t.Fatalf("refused request %d: %d", i, status)
		}
	}
	if grown := dirSize(t, s.Dir) - before; grown >= 2<<20 {
		t.Fatalf("300 refused requests grew the data dir by %d bytes", grown)
	}
	var page protocol.AuditPage
	s.JSON(http.MethodGet, base+"/monitoring/audit?limit=1000", nil, http.StatusOK, &page)
	refused := 0
	for _, e := range page.Entries {
		if e.Result.Status == 401 || e.Result.Status == 403 {
			refused++
			if e.Reason != "" || e.RequestedBy != "" || e.BodySHA256 != "" || e.Requested.TargetShardCount != nil {
				t.Fatalf("a refused request's entry holds its body: %+v", e)
			}
		}
	}
	// Rate limited: at most 60 per address per minute are kept.
	if refused == 0 || refused > 60 {
		t.Fatalf("%d refused entries stored", refused)
	}
}

// TestAuditFieldsAreCapped: an accepted request with a 200 KB reason
// stores an audit entry under 8 KB, its reason marked as cut.
func TestAuditFieldsAreCapped(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{Auth: &coordtest.Auth{}})
	s.CreateStream("orders", 2)
	reason := strings.Repeat("é", 100_000) // 200 KB, two bytes a rune
	s.JSON(http.MethodPost, base+"/streams/orders/scale",
		`{"targetShardCount":2,"requestedBy":"ops","reason":"`+reason+`"}`, http.StatusAccepted, nil)
	var page protocol.AuditPage
	s.JSON(http.MethodGet, base+"/monitoring/audit?limit=1", nil, http.StatusOK, &page)
	if len(page.Entries) != 1 {
		t.Fatalf("entries %+v", page.Entries)
	}
	e := page.Entries[0]
	raw := mustMarshal(t, e)
	if len(raw) >= 8<<10 || !strings.Contains(e.Reason, "[cut ") || !strings.HasPrefix(reason, strings.Split(e.Reason, "…[cut")[0]) {
		t.Fatalf("entry of %d bytes, reason %.80q…", len(raw), e.Reason)
	}
}

// TestBlankRequestedByIsRefused: requestedBy of spaces only is a 400.
func TestBlankRequestedByIsRefused(t *testing.T) {
	t.Parallel()
	s := coordtest.Start(t, "", coordtest.Options{})
	for _, body := range []string{`{"requestedBy":"   "}`, `{"requestedBy":"\t\n"}`} {
		status, raw := s.Do(http.MethodPost, base+"/streams/orders", body)
		if status != http.StatusBadRequest || !contains(raw, protocol.CodeInvalidRequest) {
			t.Fatalf("%s: %d %s", body, status, raw)
		}
	}
}
