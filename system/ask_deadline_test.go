package system_test

import (
	"context"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/systemtest"
)

// An ask from one member to a key another member owns returns at its
// deadline while the owner's handler blocks without looking at its
// Context, whether the deadline is the context's or the ask timeout.
func TestAskToAnotherMemberReturnsAtItsDeadline(t *testing.T) {
	const d = 100 * time.Millisecond
	cases := []struct {
		name string
		opts []actor.Option
		ctx  func() (context.Context, context.CancelFunc)
	}{
		{"context deadline", nil, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), d)
		}},
		{"ask timeout", []actor.Option{actor.WithAskTimeout(d)}, func() (context.Context, context.CancelFunc) {
			return context.Background(), func() {}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := systemtest.NewStubborn("stubborn", tc.opts...)
			systems := systemtest.StartCluster(t, 2, nil, st.Def)
			defer st.Release()
			key := keyPlacedOn(t, systems[0], systems[1], "stubborn", "s-")
			ref := st.Def.Ref(systems[0], key)
			// Active and idle on its owner: the reader there may run the
			// handler itself.
			if _, err := actor.Ask(systemtest.Ctx(t), ref, systemtest.Ping{}); err != nil {
				t.Fatal(err)
			}
			st.ExpectDeadline(t, d, func() error {
				ctx, cancel := tc.ctx()
				defer cancel()
				_, err := actor.Ask(ctx, ref, systemtest.Hold{})
				return err
			})
		})
	}
}
