package actor_test

import (
	"context"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

// An ask returns at its deadline even when the handler it reached blocks
// without looking at its Context: on every path, whether the deadline is
// the context's or the definition's ask timeout.

// askDeadline is the deadline the tests give their asks.
const askDeadline = 100 * time.Millisecond

// deadlineCases are the two ways an ask gets its deadline: a Stubborn
// defined with opts, asked with ctx(parent), where parent has no
// deadline.
var deadlineCases = []struct {
	name string
	opts []actor.Option
	ctx  func(parent context.Context) (context.Context, context.CancelFunc)
}{
	{"context deadline", nil, func(p context.Context) (context.Context, context.CancelFunc) {
		return context.WithTimeout(p, askDeadline)
	}},
	{"ask timeout", []actor.Option{actor.WithAskTimeout(askDeadline)}, func(p context.Context) (context.Context, context.CancelFunc) {
		return p, func() {}
	}},
}

func TestAskFromOutsideAHandlerReturnsAtItsDeadline(t *testing.T) {
	for _, tc := range deadlineCases {
		t.Run(tc.name, func(t *testing.T) {
			st := systemtest.NewStubborn("stubborn", tc.opts...)
			sys := newSystem(t, system.Config{}, st.Def)
			defer st.Release()
			ref := st.Def.Ref(sys, "k")
			// Active and idle: the actor a handler run on the asker's
			// goroutine would find.
			if _, err := actor.Ask(ctxT(t), ref, systemtest.Ping{}); err != nil {
				t.Fatal(err)
			}
			st.ExpectDeadline(t, askDeadline, func() error {
				ctx, cancel := tc.ctx(context.Background())
				defer cancel()
				_, err := actor.Ask(ctx, ref, systemtest.Hold{})
				return err
			})
		})
	}
}

// Relay asks the stubborn actor from a handler; the handler reports the
// ask's error on errs.
type Relay struct{}

func (Relay) probeMsg() {}

func TestAskFromAHandlerReturnsAtItsDeadline(t *testing.T) {
	for _, tc := range deadlineCases {
		t.Run(tc.name, func(t *testing.T) {
			st := systemtest.NewStubborn("stubborn", tc.opts...)
			errs := make(chan error, 1)
			relay := actor.Define("relay", func(c *actor.Context[int, ProbeMsg], m ProbeMsg) error {
				if _, ok := m.(Relay); ok {
					// The handler's Context has no deadline of its own (a
					// tell): the ask timeout applies to an ask given c. A
					// deadline is set on context.WithoutCancel(c), not on
					// c: package context's timer reads its parent after it
					// fires, while the runtime reuses c for the next
					// message (see docs/roadmap.md).
					parent := context.Context(c)
					if tc.opts == nil {
						parent = context.WithoutCancel(c)
					}
					ctx, cancel := tc.ctx(parent)
					defer cancel()
					_, err := actor.Ask(ctx, st.Def.Ref(c.System(), "k"), systemtest.Hold{})
					errs <- err
				}
				return nil
			})
			sys := newSystem(t, system.Config{}, st.Def, relay)
			defer st.Release()
			if _, err := actor.Ask(ctxT(t), st.Def.Ref(sys, "k"), systemtest.Ping{}); err != nil {
				t.Fatal(err)
			}
			st.ExpectDeadline(t, askDeadline, func() error {
				if err := relay.Ref(sys, "r").Tell(ctxT(t), Relay{}); err != nil {
					return err
				}
				return <-errs
			})
		})
	}
}
