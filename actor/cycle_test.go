package actor_test

import (
	"errors"
	"testing"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/system"
)

type hopMsg interface{ hopMsg() }

// hop asks the next key in Path, which asks the one after, and so on.
type hop struct {
	actor.Reply[hopMsg, string]
	Path []string
}

func (hop) hopMsg() {}

var hopper *actor.Def[int, hopMsg]

func init() {
	hopper = actor.Define("hopper", func(c *actor.Context[int, hopMsg], m hopMsg) error {
		h := m.(hop)
		if len(h.Path) == 0 {
			return actor.Respond(c, h, "end")
		}
		r, err := actor.Ask(c, hopper.Ref(c.System(), h.Path[0]), hop{Path: h.Path[1:]})
		if err != nil {
			return err
		}
		return actor.Respond(c, h, r)
	})
}

func TestAskCycleFailsAtOnceInOneSystem(t *testing.T) {
	sys := newSystem(t, system.Config{}, hopper)
	// a asks b, b asks a: without the check, both wait for the ask timeout.
	_, err := actor.Ask(ctxT(t), hopper.Ref(sys, "a"), hop{Path: []string{"b", "a"}})
	if !errors.Is(err, actor.ErrAskCycle) || !errors.Is(err, actor.ErrActorFailed) {
		t.Fatalf("err = %v, want ErrAskCycle inside ErrActorFailed", err)
	}
	var ce *actor.CycleError
	if !errors.As(err, &ce) || len(ce.Chain) != 3 || ce.Chain[0] != "hopper/a" || ce.Chain[2] != "hopper/a" {
		t.Fatalf("chain %v, want hopper/a -> hopper/b -> hopper/a", ce)
	}
	// A longer chain without a repeat is fine; so is a self-ask of a
	// different key.
	got, err := actor.Ask(ctxT(t), hopper.Ref(sys, "a"), hop{Path: []string{"b", "c", "d"}})
	if err != nil || got != "end" {
		t.Fatalf("got %q, %v", got, err)
	}
}
