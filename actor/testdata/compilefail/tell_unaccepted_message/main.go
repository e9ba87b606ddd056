// Telling an actor a message its message type does not accept must not
// compile.
package main

import (
	"context"

	"github.com/troupe-go/troupe/actor"
)

type Msg interface{ msg() }

type Ping struct{}

func (Ping) msg() {}

// Stranger is not a Msg.
type Stranger struct{}

var def = actor.Define("tell", func(c *actor.Context[int, Msg], m Msg) error { return nil })

func main() {
	ref := def.Ref(nil, "k")
	_ = ref.Tell(context.Background(), Stranger{}) // want: Stranger does not implement Msg
}
