package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
	"go.yaml.in/yaml/v3"

	"github.com/rscoord/rscoord/client/protocol"
	"github.com/rscoord/rscoord/gateway/explorer"
)

// explorerPage serves the API explorer (package explorer) at /scalar,
// /swagger-ui.html and /swagger-ui/{file}, the reference design's paths.
// Like the console it needs no credentials: "Try it out" calls carry the
// credentials its Authorize dialog takes. A path that names no file
// answers 404 with a §3 error body.
func explorerPage() gin.HandlerFunc {
	page := explorer.New()
	return func(c *gin.Context) {
		name := strings.TrimPrefix(c.Param("file"), "/")
		if name != "" && !page.Has(name) {
			notFound(c)
			return
		}
		page.Serve(c.Writer, c.Request, name)
	}
}

// openAPIJSON converts the OpenAPI document to JSON once, for
// /v3/api-docs (where the reference design's tools look for it).
func openAPIJSON() ([]byte, error) {
	var doc any
	if err := yaml.Unmarshal(openAPI, &doc); err != nil {
		return nil, fmt.Errorf("openapi.yaml: %w", err)
	}
	return json.Marshal(jsonable(doc))
}

// jsonable turns YAML mappings with keys other than strings (response
// codes such as 200) into JSON objects.
func jsonable(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = jsonable(e)
		}
		return x
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[fmt.Sprint(k)] = jsonable(e)
		}
		return out
	case []any:
		for i, e := range x {
			x[i] = jsonable(e)
		}
		return x
	}
	return v
}

// serveOpenAPIJSON answers the OpenAPI document as JSON, without
// credentials like /openapi.yaml.
func serveOpenAPIJSON() gin.HandlerFunc {
	doc, err := openAPIJSON()
	return func(c *gin.Context) {
		if err != nil {
			abortWith(c, protocol.CodeInternal, err.Error())
			return
		}
		c.Data(http.StatusOK, "application/json", doc)
	}
}
