package gateway

import (
	"io/fs"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/rscoord/rscoord/gateway/console"
)

// consolePage serves the console under /console. A path that names no
// file of the page answers 404 with a §3 error body like every other
// route, not the file server's plain text (nor a directory listing).
func consolePage() gin.HandlerFunc {
	files := console.Files()
	page := console.Handler("/console")
	return func(c *gin.Context) {
		name := strings.TrimPrefix(c.Param("file"), "/")
		if name != "" {
			if st, err := fs.Stat(files, name); err != nil || st.IsDir() {
				notFound(c)
				return
			}
		}
		page.ServeHTTP(c.Writer, c.Request)
	}
}
