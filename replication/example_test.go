package replication_test

import (
	"errors"
	"fmt"

	"github.com/troupe-go/troupe/replication"
)

// With three replicas, each level needs this many copies stored before a
// change counts as written; a member that is down still counts in the
// three.
func ExampleLevel_Quorum() {
	for _, l := range []replication.Level{replication.One, replication.Majority, replication.All} {
		fmt.Printf("%s: %d of 3\n", l, l.Quorum(3))
	}
	// Output:
	// one: 1 of 3
	// majority: 2 of 3
	// all: 3 of 3
}

func ExampleConfig_Validate() {
	err := replication.Config{Sync: true}.Validate()
	fmt.Println(errors.Is(err, replication.ErrInvalidConfig))
	fmt.Println(replication.Config{DataDir: "/var/lib/troupe", Sync: true}.Validate())
	// Output:
	// true
	// <nil>
}
