//go:build !unix

package system_test

import "time"

// cpuTime is 0 where getrusage is missing: no cpu-ns/op is reported.
func cpuTime() time.Duration { return 0 }
