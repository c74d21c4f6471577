package replica

import (
	"testing"

	"github.com/rscoord/rscoord/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }
