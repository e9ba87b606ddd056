// Responding to a request with a value of another type than its declared
// reply must not compile.
package main

import "github.com/troupe-go/troupe/actor"

type Msg interface{ msg() }

// Get is answered with an int.
type Get struct{ actor.Reply[Msg, int] }

func (Get) msg() {}

var def = actor.Define("respond", func(c *actor.Context[int, Msg], m Msg) error {
	if g, ok := m.(Get); ok {
		return actor.Respond(c, g, "forty-two") // want: cannot use "forty-two" \(untyped string constant\) as int value in argument to actor\.Respond
	}
	return nil
})

func main() { _ = def }
