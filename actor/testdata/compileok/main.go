// Command compileok is the control for the compilefail cases: the same
// shapes, used correctly, must build.
package main

import (
	"context"

	"github.com/troupe-go/troupe/actor"
)

type Msg interface{ msg() }

type Ping struct{}

type Get struct{ actor.Reply[Msg, int] }

func (Ping) msg() {}
func (Get) msg()  {}

var def = actor.Define("ok", func(c *actor.Context[int, Msg], m Msg) error {
	if g, ok := m.(Get); ok {
		return actor.Respond(c, g, 1)
	}
	return nil
})

func main() {
	ctx := context.Background()
	ref := def.Ref(nil, "k")
	_ = ref.Tell(ctx, Ping{})
	var n int
	n, _ = actor.Ask(ctx, ref, Get{})
	_ = n
}
