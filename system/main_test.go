package system_test

import (
	"flag"
	"os"
	"testing"

	"github.com/troupe-go/troupe/internal/proctest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	proctest.Roles{"member": runMember}.RunIfChild()
	// Keep the property test bounded unless the caller asks for more
	// (-rapid.checks or RAPID_CHECKS).
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if !set && os.Getenv("RAPID_CHECKS") == "" {
		_ = flag.Set("rapid.checks", "40")
	}
	goleak.VerifyTestMain(m)
}
