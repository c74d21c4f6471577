// Package console is the operator's web page, embedded in the binary and
// served at /console: sign in, the groups, a group's members, its target
// against its current assignment per shard, its migrations and the audit
// log, refreshing on its own.
//
// The page is plain HTML and JavaScript with no build step. It holds no
// privileges of its own: it calls the same /coord/v1 API as every client,
// with the bearer token its sign-in obtained, so every role check applies.
package console

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var static embed.FS

// Files is the page's file system: index.html, app.js and style.css.
func Files() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return sub
}

// Handler serves the page under prefix (e.g. "/console"): prefix itself
// and prefix+"/" answer index.html, prefix+"/{file}" the other files.
func Handler(prefix string) http.Handler {
	files := http.FileServer(http.FS(Files()))
	return http.StripPrefix(prefix, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "" {
			r.URL.Path = "/"
		}
		// The page may render untrusted names: forbid inline script and
		// every origin but this server's. default-src does not cover
		// where forms post or what <base> may name, so those are set
		// too. No page may frame it (clickjacking): frame-ancestors, and
		// X-Frame-Options for browsers that know only that.
		w.Header().Set("Content-Security-Policy",
			"default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Referrer-Policy", "no-referrer")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	}))
}
