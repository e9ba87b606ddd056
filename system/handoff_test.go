package system_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

// waitCaughtUp waits until no member of systems receives a range.
func waitCaughtUp(t *testing.T, systems []*system.System) {
	t.Helper()
	systemtest.Await(t, func() error {
		for _, s := range systems {
			if n := s.Stats().Receiving; n > 0 {
				return fmt.Errorf("%s still receives %d ranges", s.Addr(), n)
			}
		}
		return nil
	})
}

// A key's state follows it to new replicas across successive ring changes
// while the key is not used at all: two members join and then the two
// first members leave, so that many keys end with none of the replicas
// that acknowledged their write. Each new replica received its ranges
// before it counted, so every count is still there.
func TestStateFollowsItsKeysAcrossJoinsAndLeavesWithoutBeingUsed(t *testing.T) {
	def := counterDef("hcounter", nil, actor.WithReplicas(3, actor.WriteMajority))
	systems := systemtest.StartCluster(t, 3, nil, def)
	waitCaughtUp(t, systems)
	const keys = 60
	for i := range keys {
		add(t, def.Ref(systems[i%len(systems)], "k"+strconv.Itoa(i)), i+1)
	}
	for range 2 {
		s := systemtest.Join(t, []string{systems[0].Addr()}, nil, def)
		systems = append(systems, s)
		systemtest.WaitAlive(t, systems, len(systems))
		waitCaughtUp(t, systems)
		if got := s.Stats().ReceivedBytes; got == 0 {
			t.Fatalf("%s joined and received no state", s.Addr())
		}
	}
	for range 2 {
		closeNow(t, systems[0])
		systems = systems[1:]
		systemtest.WaitAlive(t, systems, len(systems))
		waitCaughtUp(t, systems)
	}
	for i := range keys {
		ref := def.Ref(systems[i%len(systems)], "k"+strconv.Itoa(i))
		got := eventually(t, "read "+ref.Key(), func(ctx context.Context) (int, error) {
			return actor.Ask(ctx, ref, DGet{})
		})
		if got != i+1 {
			t.Errorf("%s: count %d after the ring changed four times, want %d", ref.Key(), got, i+1)
		}
	}
}
