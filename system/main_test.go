package system_test

import (
	"flag"
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
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
