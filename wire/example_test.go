package wire_test

import (
	"fmt"

	"github.com/troupe-go/troupe/wire"
)

// Validate names the field that is out of range; zero fields mean their
// defaults.
func ExampleConfig_Validate() {
	c := wire.Config{
		ClusterName: "demo",
		Advertise:   "10.0.0.1:7000",
		Limits:      wire.Limits{MaxFrame: 1 << 10},
	}
	fmt.Println(c.Validate())
	c.Limits.MaxFrame = 0
	fmt.Println(c.Validate())
	// Output:
	// troupe: Limits.MaxFrame 1024 out of range [4096, 16777216]
	// <nil>
}
