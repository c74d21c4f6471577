package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/rscoord/rscoord/protocol"
)

// readBody reads the request body, refusing more than protocol.MaxBodyBytes
// (413) and bodies that announce a content type other than JSON (415). A
// missing content type is accepted: some clients send none.
func readBody(c *gin.Context) ([]byte, *protocol.Error) {
	if ct := c.GetHeader("Content-Type"); ct != "" {
		media, _, err := mime.ParseMediaType(ct)
		if err != nil || !(media == "application/json" || strings.HasSuffix(media, "+json")) {
			return nil, protocol.Errorf(protocol.CodeUnsupportedMediaType,
				fmt.Sprintf("content type %q is not JSON; send application/json", ct))
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, protocol.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, protocol.Errorf(protocol.CodePayloadTooLarge,
				fmt.Sprintf("request body is over %d bytes", protocol.MaxBodyBytes))
		}
		return nil, protocol.Errorf(protocol.CodeInvalidRequest, "could not read the request body: "+err.Error())
	}
	return body, nil
}

// decodeBody decodes an admin request body into v. An empty body decodes
// as {} so that optional-only bodies may be left out.
func decodeBody(c *gin.Context, v any) bool {
	body, perr := readBody(c)
	if perr == nil && len(strings.TrimSpace(string(body))) > 0 {
		if err := json.Unmarshal(body, v); err != nil {
			perr = protocol.Errorf(protocol.CodeInvalidRequest, "malformed JSON body: "+jsonProblem(err))
		}
	}
	if perr != nil {
		abortWith(c, perr.Code, perr.Message)
		return false
	}
	return true
}

// jsonProblem describes a decoding failure without echoing the body.
func jsonProblem(err error) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return fmt.Sprintf("syntax error at byte %d", syntax.Offset)
	case errors.As(err, &typ):
		return fmt.Sprintf("field %q must be %s, not %s", typ.Field, typ.Type, typ.Value)
	default:
		return err.Error()
	}
}
