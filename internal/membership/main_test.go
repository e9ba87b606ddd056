package membership

import (
	"testing"

	"github.com/troupe-go/troupe/internal/proctest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	proctest.Roles{"node": runNode, "hog": runHog}.RunIfChild()
	goleak.VerifyTestMain(m)
}
