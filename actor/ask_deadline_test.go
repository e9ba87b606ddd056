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

// deadlineCases are the two ways an ask gets its deadline.
var deadlineCases = systemtest.DeadlineCases(askDeadline)

func TestAskFromOutsideAHandlerReturnsAtItsDeadline(t *testing.T) {
	for _, tc := range deadlineCases {
		t.Run(tc.Name, func(t *testing.T) {
			st := systemtest.NewStubborn("stubborn", tc.Opts...)
			sys := newSystem(t, system.Config{}, st.Def)
			defer st.Release()
			// Idle: the actor a handler run on the asker's goroutine
			// would find.
			st.ExpectAskDeadline(t, st.Def.Ref(sys, "k"), askDeadline, tc)
		})
	}
}

// Relay asks the stubborn actor from a handler; the handler reports the
// ask's error on errs.
type Relay struct{}

func (Relay) probeMsg() {}

func TestAskFromAHandlerReturnsAtItsDeadline(t *testing.T) {
	for _, tc := range deadlineCases {
		t.Run(tc.Name, func(t *testing.T) {
			st := systemtest.NewStubborn("stubborn", tc.Opts...)
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
					if tc.Opts == nil {
						parent = context.WithoutCancel(c)
					}
					ctx, cancel := tc.Ctx(parent)
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
