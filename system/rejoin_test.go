package system_test

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

// TestMemberRemovedByTheClusterRejoinsWithANewIncarnation cuts one of
// three members off for longer than RemoveAfter, so that the other two
// remove it (mark it left). After the heal it learns that, rejoins with a
// new incarnation through the same (caller-supplied) listener, and every
// member serves every key again.
func TestMemberRemovedByTheClusterRejoinsWithANewIncarnation(t *testing.T) {
	tm := cluster.FastTimings()
	tm.RemoveAfter = 2 * time.Second
	var cn systemtest.Net
	systems := startClusterTweaked(t, 3, func(i int, cfg *system.Config) {
		cfg.Cluster.Timings = tm
		if i == 2 {
			cn.Attach(t, cfg)
		}
	})
	ctx := systemtest.Ctx(t)
	keys := make([]string, 30)
	for i := range keys {
		keys[i] = "rejoin-" + strconv.Itoa(i)
	}
	lost := systems[2]
	before := lost.Members()
	var oldInc uint64
	for _, m := range before {
		if m.ID.Addr == lost.Addr() {
			oldInc = m.ID.Incarnation
		}
	}

	cn.Cut()
	systemtest.WaitUntil(t, "the majority to remove the cut member", func() bool {
		for _, s := range systems[:2] {
			for _, m := range s.Members() {
				if m.ID.Addr == lost.Addr() && m.Status != cluster.StatusLeft {
					return false
				}
			}
		}
		return true
	})
	if lost.Removed() || lost.Stats().Rejoins != 0 {
		t.Fatalf("the cut member cannot know it was removed yet: Removed %v, Rejoins %d", lost.Removed(), lost.Stats().Rejoins)
	}
	healed := time.Now()
	cn.Heal()

	systemtest.WaitUntil(t, "the removed member to rejoin", func() bool { return lost.Stats().Rejoins >= 1 && !lost.Removed() })
	systemtest.WaitAlive(t, systems, 3)
	// Views converge: the old incarnation's record can stay alive in one
	// of them for a gossip round after the rejoin.
	systemtest.Await(t, func() error {
		for _, s := range systems {
			for _, m := range s.Members() {
				if m.ID.Addr == lost.Addr() && m.Status == cluster.StatusAlive && m.ID.Incarnation <= oldInc {
					return fmt.Errorf("%s sees %v alive, want an incarnation above %d", s.Addr(), m.ID, oldInc)
				}
			}
		}
		return nil
	})
	var last sync.Map
	at := pollKeys(len(keys), systemtest.Limit, func(i int) bool { return servedEverywhere(ctx, systems, keys[i], &last, i) })
	d, ok := latest(at, healed)
	if !ok {
		f, _ := last.Load(0)
		t.Fatalf("expected every member to serve every key within %v; e.g. %v", systemtest.Limit, f)
	}
	owners := map[string]bool{}
	for _, k := range keys {
		owners[system.OwnerOf(systems[0], "ccounter", k)] = true
	}
	if !owners[lost.Addr()] {
		t.Errorf("expected the rejoined member %s to own keys again; owners %v", lost.Addr(), owners)
	}
	t.Logf("every member served all %d keys %v after the heal", len(keys), d.Round(time.Millisecond))
}

// TestForcedRejoinFailsPendingAsksAndKeepsServing makes a member rejoin
// (as if removed) twice, while one of its asks waits on another member:
// the ask fails with ErrUnavailable, and the member serves and reaches
// every key afterwards.
func TestForcedRejoinFailsPendingAsksAndKeepsServing(t *testing.T) {
	sid := stallID(t)
	systems := startCluster(t, 3)
	ctx := systemtest.Ctx(t)
	key := remoteKey(t, systems[0], systems[1])
	errc := make(chan error, 1)
	go func() {
		_, err := actor.Ask(ctx, ccounter.Ref(systems[0], key), Stall{ID: sid})
		errc <- err
	}()
	systemtest.Recv(t, stallStarted(sid), "the stall to run on the owner")
	system.ForceRejoin(systems[0])
	if err := systemtest.Recv(t, errc, "the pending ask to fail"); !errorsIs(err, actor.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	systemtest.WaitUntil(t, "the first rejoin", func() bool { return systems[0].Stats().Rejoins == 1 })
	system.ForceRejoin(systems[0])
	systemtest.WaitUntil(t, "the second rejoin", func() bool { return systems[0].Stats().Rejoins == 2 })
	systemtest.WaitAlive(t, systems, 3)
	for i := range 20 {
		k := "forced-" + strconv.Itoa(i)
		systemtest.WaitUntil(t, "key "+k+" served from every member by its owner", func() bool {
			want := system.OwnerOf(systems[0], "ccounter", k)
			for _, s := range systems {
				got, err := askOnce(ctx, s, k, 500*time.Millisecond)
				if err != nil || got.Node != want {
					return false
				}
			}
			return true
		})
	}
}

// startClusterTweaked is startCluster with a tweak of each member's config.
func startClusterTweaked(t *testing.T, n int, tweak func(i int, cfg *system.Config)) []*system.System {
	t.Helper()
	systems := systemtest.StartCluster(t, n, func(i int, cfg *system.Config) {
		cfg.LeaveTimeout = 2 * time.Second
		tweak(i, cfg)
	}, ccounter)
	recordNodes(systems)
	return systems
}
