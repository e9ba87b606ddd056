package actor_test

import (
	"context"
	"errors"
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

// A wallet refuses a withdrawal it cannot cover with an error it
// declares: the asker gets that error, here or on any other node, and the
// wallet goes on without a restart.
type WalletMsg interface{ walletMsg() }

type Spend struct {
	actor.Reply[WalletMsg, int]
	N int
}

func (Spend) walletMsg() {}

var ErrShort = errors.New("wallet: not enough")

var Wallet = actor.Define("wallet", func(c *actor.Context[int, WalletMsg], m WalletMsg) error {
	switch m := m.(type) {
	case Spend:
		if m.N > c.State() {
			return fmt.Errorf("spend %d: %w", m.N, ErrShort)
		}
		c.SetState(c.State() - m.N)
		return actor.Respond(c, m, c.State())
	}
	return nil
}, actor.WithErrors(ErrShort)).WithInit(func(string) int { return 10 })

func ExampleWithErrors() {
	ctx := context.Background()
	sys, err := system.New(system.Config{Actors: []actor.Definition{Wallet}})
	if err != nil {
		panic(err)
	}
	defer sys.Close(ctx)

	w := Wallet.Ref(sys, "alice")
	_, err = actor.Ask(ctx, w, Spend{N: 25})
	fmt.Println(err, errors.Is(err, ErrShort), errors.Is(err, actor.ErrActorFailed), actor.Temporary(err))
	left, err := actor.Ask(ctx, w, Spend{N: 4})
	fmt.Println(left, err, sys.Stats().Restarts)
	// Output:
	// spend 25: wallet: not enough true false false
	// 6 <nil> 0
}
