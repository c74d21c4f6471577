// Package explorer is the API explorer page, embedded in the binary and
// served offline: Swagger UI (swagger-ui-dist, Apache-2.0, its license and
// notices in assets/) rendering the coordinator's OpenAPI document from
// /v3/api-docs. The page is served at the paths the reference design's
// operators know: /scalar, /swagger-ui.html and /swagger-ui/index.html.
//
// The vendored bundle is kept gzip-compressed; it is sent as is to
// browsers that accept gzip (every one) and decompressed for the rest.
package explorer

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed assets page
var files embed.FS

// file is one file of the page: its bytes, gzip-compressed or not.
type file struct {
	body        []byte
	gzipped     bool
	contentType string
	etag        string
}

// Page serves the explorer's files: index.html, init.js, explorer.css,
// swagger-ui-bundle.js and swagger-ui.css, and the vendored licenses.
type Page struct {
	files map[string]file
}

// New loads the embedded files.
func New() *Page {
	p := &Page{files: map[string]file{}}
	add := func(dir string) {
		entries, err := fs.ReadDir(files, dir)
		if err != nil {
			panic(err) // the embedded tree is fixed at build time
		}
		for _, e := range entries {
			body, err := fs.ReadFile(files, dir+"/"+e.Name())
			if err != nil {
				panic(err)
			}
			name, gzipped := strings.CutSuffix(e.Name(), ".gz")
			sum := sha256.Sum256(body)
			p.files[name] = file{body: body, gzipped: gzipped, contentType: contentType(name),
				etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		}
	}
	add("assets")
	add("page")
	return p
}

func contentType(name string) string {
	switch path.Ext(name) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	}
	return "text/plain; charset=utf-8"
}

// Has reports whether name is a file of the page.
func (p *Page) Has(name string) bool {
	_, ok := p.files[name]
	return ok
}

// contentSecurityPolicy lets the page run only its own scripts. Swagger
// UI sets style attributes and shows icons as data: images, which the
// console's policy forbids; nothing else is loosened. connect-src is this
// server: "Try it out" calls the API here.
const contentSecurityPolicy = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; " +
	"frame-ancestors 'none'; form-action 'self'; base-uri 'none'"

// Serve writes the file name ("" for the page) to w.
func (p *Page) Serve(w http.ResponseWriter, r *http.Request, name string) {
	if name == "" {
		name = "index.html"
	}
	f, ok := p.files[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Type", f.contentType)
	h.Set("ETag", f.etag)
	h.Set("Vary", "Accept-Encoding")
	if match := r.Header.Get("If-None-Match"); match != "" && strings.Contains(match, f.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	if !f.gzipped {
		_, _ = w.Write(f.body)
		return
	}
	if acceptsGzip(r.Header.Get("Accept-Encoding")) {
		h.Set("Content-Encoding", "gzip")
		_, _ = w.Write(f.body)
		return
	}
	zr, err := gzip.NewReader(bytes.NewReader(f.body))
	if err != nil {
		http.Error(w, "corrupt embedded file", http.StatusInternalServerError)
		return
	}
	_, _ = io.Copy(w, zr)
}

// acceptsGzip reads an Accept-Encoding header: gzip listed without q=0.
func acceptsGzip(header string) bool {
	for part := range strings.SplitSeq(header, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(coding), "gzip") || strings.TrimSpace(coding) == "*" {
			q := strings.ReplaceAll(params, " ", "")
			return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
		}
	}
	return false
}
