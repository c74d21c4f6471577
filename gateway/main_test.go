package gateway_test

import (
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/rscoord/rscoord/internal/leakcheck"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	leakcheck.VerifyTestMain(m)
}
