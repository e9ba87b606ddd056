package actor_test

import (
	"context"
	"fmt"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/system"
)

// A counter: its state is an int, its messages implement TourMsg.
type TourMsg interface{ tourMsg() }

// Incr adds By to the counter.
type Incr struct{ By int }

// Total asks for the counter's value; the reply is an int.
type Total struct{ actor.Reply[TourMsg, int] }

func (Incr) tourMsg()  {}
func (Total) tourMsg() {}

var Counter = actor.Define("tour-counter", func(c *actor.Context[int, TourMsg], m TourMsg) error {
	switch m := m.(type) {
	case Incr:
		c.SetState(c.State() + m.By)
	case Total:
		return actor.Respond(c, m, c.State())
	}
	return nil
})

// Example is the quick tour: define a counter, start a system, tell it,
// ask it, close the system.
func Example() {
	ctx := context.Background()
	sys, err := system.New(system.Config{Actors: []actor.Definition{Counter}})
	if err != nil {
		panic(err)
	}
	defer sys.Close(ctx)

	ref := Counter.Ref(sys, "visits") // a value: no activation yet
	_ = ref.Tell(ctx, Incr{By: 2})
	_ = ref.Tell(ctx, Incr{By: 3})
	n, err := actor.Ask(ctx, ref, Total{}) // n is an int
	fmt.Println(ref, n, err)
	// Output: tour-counter/visits 5 <nil>
}
