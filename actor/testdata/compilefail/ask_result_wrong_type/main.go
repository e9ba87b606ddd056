// Assigning Ask's result to a variable of another type than the request's
// reply type must not compile.
package main

import (
	"context"

	"github.com/troupe-go/troupe/actor"
)

type Msg interface{ msg() }

// Get is answered with an int.
type Get struct{ actor.Reply[Msg, int] }

func (Get) msg() {}

var def = actor.Define("result", func(c *actor.Context[int, Msg], m Msg) error { return nil })

func main() {
	var s string
	s, _ = actor.Ask(context.Background(), def.Ref(nil, "k"), Get{}) // want: value of type int\) as string value
	_ = s
}
