package gateway

import (
	_ "embed"
	"net/http"

	"github.com/gin-gonic/gin"
)

// openAPI is the OpenAPI 3 document of every route (hand-written; a test
// keeps it and the router in step).
//
//go:embed openapi.yaml
var openAPI []byte

// OpenAPI returns the OpenAPI 3 document served at /openapi.yaml.
func OpenAPI() []byte { return append([]byte(nil), openAPI...) }

// serveOpenAPI serves the document without credentials: it describes the
// API, not its data.
func serveOpenAPI(c *gin.Context) {
	c.Data(http.StatusOK, "application/yaml; charset=utf-8", openAPI)
}
