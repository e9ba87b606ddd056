package chaostest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/troupe-go/troupe/internal/proctest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	proctest.Roles{"member": runMember}.RunIfChild()
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) {
		if memberExe.path != "" {
			os.RemoveAll(filepath.Dir(memberExe.path))
		}
	}))
}
