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

// An orderly leave hands the copies over before the member goes: keys
// kept as a single copy on the leaving member keep their state on the
// members that take them over, though the key is not used meanwhile and
// the member that held the only copy is gone.
func TestAnOrderlyLeaveHandsItsSingleCopiesOver(t *testing.T) {
	def := counterDef("lcounter", nil, actor.Durable())
	systems := systemtest.StartCluster(t, 3, nil, def)
	waitCaughtUp(t, systems)
	const keys = 30
	for i := range keys {
		add(t, def.Ref(systems[0], "k"+strconv.Itoa(i)), i+1)
	}
	leaver := systems[2]
	held := 0
	for i := range keys {
		if system.OwnerOf(systems[0], "lcounter", "k"+strconv.Itoa(i)) == leaver.Addr() {
			held++
		}
	}
	if held == 0 {
		t.Fatal("the leaving member holds none of the keys")
	}
	closeNow(t, leaver)
	systems = systems[:2]
	systemtest.WaitAlive(t, systems, 2)
	waitCaughtUp(t, systems)
	for i := range keys {
		ref := def.Ref(systems[i%2], "k"+strconv.Itoa(i))
		got := eventually(t, "read "+ref.Key(), func(ctx context.Context) (int, error) {
			return actor.Ask(ctx, ref, DGet{})
		})
		if got != i+1 {
			t.Errorf("%s: count %d after its only copy's member left, want %d", ref.Key(), got, i+1)
		}
	}
	t.Logf("%d of %d keys were held by the member that left", held, keys)
}
