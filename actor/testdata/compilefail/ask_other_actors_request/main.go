// Asking an actor with a request that belongs to another actor's message
// type must not compile.
package main

import (
	"context"

	"github.com/troupe-go/troupe/actor"
)

type AMsg interface{ a() }

type BMsg interface{ b() }

type PingA struct{}

func (PingA) a() {}

// GetB is a request to B actors.
type GetB struct{ actor.Reply[BMsg, int] }

func (GetB) b() {}

var A = actor.Define("a", func(c *actor.Context[int, AMsg], m AMsg) error { return nil })

func main() {
	_, _ = actor.Ask(context.Background(), A.Ref(nil, "k"), GetB{}) // want: Q \(type GetB\) does not satisfy actor\.Request
}
