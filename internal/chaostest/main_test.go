package chaostest

import (
	"testing"

	"github.com/troupe-go/troupe/internal/proctest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	proctest.Roles{"member": runMember}.RunIfChild()
	goleak.VerifyTestMain(m)
}
