package continuity_test

import (
	"context"
	"fmt"

	"github.com/troupe-go/troupe/replication/continuity"
	"github.com/troupe-go/troupe/system"
)

// A charge that a retry must not run twice: the work runs under the
// ticket Submit gives, and a retry gets the response Complete kept.
func Example() {
	// The records and this node's ledger, which keeps at most
	// DefaultMaxRecords ended records here (and DefaultMaxBytes).
	defs, err := continuity.Actors(continuity.Bounds{})
	if err != nil {
		panic(err)
	}
	sys, err := system.New(system.Config{Actors: defs})
	if err != nil {
		panic(err)
	}
	defer sys.Close(context.Background())
	ctx := context.Background()
	name := continuity.Name{Scope: "payments.charge", Key: "pay-7f3a"}
	for try := 1; try <= 2; try++ {
		tk, rec, err := continuity.Submit(ctx, sys, name, []byte(`{"amount":5}`), continuity.Options{})
		if err != nil {
			panic(err)
		}
		if tk.Attempt == 0 { // ended before: answer from the record
			fmt.Printf("try %d: %s (kept)\n", try, rec.Response)
			continue
		}
		response := []byte("charged 5") // the work itself, run once
		if _, err := continuity.Complete(ctx, sys, tk, response); err != nil {
			panic(err)
		}
		fmt.Printf("try %d: %s\n", try, response)
	}
	// Output:
	// try 1: charged 5
	// try 2: charged 5 (kept)
}
