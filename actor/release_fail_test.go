package actor_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/system"
)

type relMsg interface{ relMsg() }

type relBump struct{}
type relQuitBadly struct{}
type relRead struct{ actor.Reply[relMsg, int] }

func (relBump) relMsg()      {}
func (relQuitBadly) relMsg() {}
func (relRead) relMsg()      {}

// A handler that releases its activation and then fails still ends the
// activation: the next message starts from the initial state.
func TestReleaseThenFailStillReleases(t *testing.T) {
	def := actor.Define("release-then-fail", func(c *actor.Context[int, relMsg], m relMsg) error {
		switch m := m.(type) {
		case relBump:
			c.SetState(c.State() + 1)
		case relQuitBadly:
			c.Release()
			return errors.New("gave up")
		case relRead:
			return actor.Respond(c, m, c.State())
		}
		return nil
	}, actor.WithBackoff(time.Millisecond, time.Millisecond))
	ended := make(chan string, 8)
	sys, err := system.New(system.Config{Actors: []actor.Definition{def}, Observer: func(e system.Event) {
		if e.Kind == system.ActivationEnded {
			ended <- e.Reason
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ref := def.Ref(sys, "k")
	for _, m := range []relMsg{relBump{}, relBump{}, relQuitBadly{}} {
		if err := ref.Tell(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	n, err := actor.Ask(ctx, ref, relRead{})
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("after Release and a failure the state is %d, want the initial 0", n)
	}
	select {
	case r := <-ended:
		if r != "released" {
			t.Errorf("activation ended with reason %q, want released", r)
		}
	case <-ctx.Done():
		t.Fatal("no ActivationEnded event")
	}
}
