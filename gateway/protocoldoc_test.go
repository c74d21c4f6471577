package gateway_test

import (
	"io"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/gateway"
)

// TestProtocolDocCoversEveryRoute keeps docs/protocol.md true to the
// server: every method and path gin serves must be written out there, and
// every one written there must be served. Path parameters compare by
// position, whatever their names.
func TestProtocolDocCoversEveryRoute(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatalf("docs/protocol.md: %v", err)
	}
	documented := documentedRoutes(string(raw))
	if len(documented) < 20 {
		t.Fatalf("only %d routes found in docs/protocol.md: the parser is broken", len(documented))
	}

	s := serveFake(t, newFake(), fakeOptions{Auth: true})
	h := gateway.New(newFake(), gateway.Options{
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Auth: s.Auth,
	})
	engine, ok := h.(*gin.Engine)
	if !ok {
		t.Fatalf("gateway.New returned %T, not a *gin.Engine", h)
	}
	served := map[string]bool{}
	for _, r := range engine.Routes() {
		served[r.Method+" "+canonicalPath(r.Path)] = true
	}
	if missing := difference(served, documented); len(missing) > 0 {
		t.Errorf("routes served but not documented in docs/protocol.md: %v", missing)
	}
	if extra := difference(documented, served); len(extra) > 0 {
		t.Errorf("docs/protocol.md documents routes the server lacks: %v", extra)
	}
}

// docRoute finds "METHOD /path" in the document, as written in its tables.
var docRoute = regexp.MustCompile("`(GET|HEAD|POST|PUT|PATCH|DELETE) (/[^\\s`?]*)")

func documentedRoutes(doc string) map[string]bool {
	out := map[string]bool{}
	for _, m := range docRoute.FindAllStringSubmatch(doc, -1) {
		out[m[1]+" "+canonicalPath(m[2])] = true
	}
	return out
}

// pathParam matches gin's :name and *name and the document's {name}.
var pathParam = regexp.MustCompile(`[:*][A-Za-z]+|\{[A-Za-z]+\}|\*$`)

// canonicalPath drops the base path (the document writes paths under it
// without it) and names every parameter {}.
func canonicalPath(p string) string {
	p = strings.TrimPrefix(p, protocol.BasePath)
	return pathParam.ReplaceAllString(p, "{}")
}
