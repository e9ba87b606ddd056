package systemtest

import (
	"context"
	"testing"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/system"
)

// StartCluster starts n members hosting defs on loopback with the fast
// timings, closes them when the test ends, and waits until each sees all
// of them alive. tweak, if not nil, adjusts each member's config.
func StartCluster(t testing.TB, n int, tweak func(i int, cfg *system.Config), defs ...actor.Definition) []*system.System {
	t.Helper()
	var systems []*system.System
	var seeds []string
	for i := range n {
		s := Join(t, seeds, func(cfg *system.Config) {
			if tweak != nil {
				tweak(i, cfg)
			}
		}, defs...)
		if seeds == nil {
			seeds = []string{s.Addr()}
		}
		systems = append(systems, s)
	}
	WaitAlive(t, systems, n)
	return systems
}

// Join starts one member hosting defs on loopback with the fast timings,
// joining through seeds (none: a new cluster), and closes it when the
// test ends.
func Join(t testing.TB, seeds []string, tweak func(cfg *system.Config), defs ...actor.Definition) *system.System {
	t.Helper()
	cc := cluster.FastConfig("127.0.0.1:0")
	cc.ClusterName = "test"
	cc.Seeds = seeds
	cfg := system.Config{Actors: defs, Cluster: &cc}
	if tweak != nil {
		tweak(&cfg)
	}
	s, err := system.Start(Ctx(t), cfg)
	if err != nil {
		t.Fatalf("start a member: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), Limit)
		defer cancel()
		s.Close(ctx)
	})
	return s
}

// WaitAlive waits until every system sees want members alive and none
// suspect (System.WaitAlive), failing the test with what a system last
// saw after Limit.
func WaitAlive(t testing.TB, systems []*system.System, want int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Limit)
	defer cancel()
	for _, s := range systems {
		if _, err := s.WaitAlive(ctx, want); err != nil {
			t.Fatalf("%s: %v", s.Addr(), err)
		}
	}
}
