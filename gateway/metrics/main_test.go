package metrics_test

import (
	"testing"

	"github.com/gin-gonic/gin"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The live-scrape test serves a real gateway: no route dump.
	gin.SetMode(gin.ReleaseMode)
	goleak.VerifyTestMain(m)
}
