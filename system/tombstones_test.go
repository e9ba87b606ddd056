package system_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/replica"
	"github.com/troupe-go/troupe/internal/replicastore"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

// TestADeletedKeyIsCollectedOnceItsTombstoneIsOld deletes a durable key
// and lets it passivate: once its tombstone is older than TombstoneAge
// the member collects it (the store keeps only the key's promise, with a
// horizon), while a live key and a key deleted and written again keep
// their state. The collected key starts from its init state again, after
// a restart too.
func TestADeletedKeyIsCollectedOnceItsTombstoneIsOld(t *testing.T) {
	dir := t.TempDir()
	reg := prometheus.NewRegistry()
	def := counterDef("counter", nil, actor.Durable(), actor.WithIdleTimeout(20*time.Millisecond))
	def.WithInit(func(string) int { return 100 })
	cfg := system.Config{DataDir: dir, TombstoneAge: 50 * time.Millisecond, Metrics: reg}
	sys := newStandalone(t, cfg, def)
	add(t, def.Ref(sys, "gone"), 5)
	add(t, def.Ref(sys, "live"), 7)
	add(t, def.Ref(sys, "back"), 1)
	for _, k := range []string{"gone", "back"} {
		if _, err := actor.Ask(systemtest.Ctx(t), def.Ref(sys, k), DForget{}); err != nil {
			t.Fatal(err)
		}
	}
	add(t, def.Ref(sys, "back"), 2)
	systemtest.WaitUntil(t, "the deleted key is collected", func() bool {
		return systemtest.CounterValue(t, reg, "troupe_replication_tombstones_collected_total") >= 1
	})
	if got := get(t, def.Ref(sys, "gone")); got != 100 {
		t.Fatalf("a collected key's count is %d, want WithInit's 100", got)
	}
	if got := get(t, def.Ref(sys, "back")); got != 102 {
		t.Fatalf("a key written again after its delete counts %d, want 102", got)
	}
	closeNow(t, sys)

	store, err := replicastore.Open(dir, replicastore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	state := replica.Slot{Kind: replica.KindState}
	if r, ok, err := store.Get(ctx, replica.Key{Type: "counter", ID: "gone"}, state); err != nil || ok {
		t.Fatalf("the collected key still stores %+v, %v", r, err)
	}
	p, ok, err := store.Get(ctx, replica.Key{Type: "counter", ID: "gone"}, replica.Slot{Kind: replica.KindPromise})
	if _, horizon := replica.HorizonOf(p); err != nil || !ok || !horizon {
		t.Fatalf("the collected key's promise is %+v, %v, %v; want one with a horizon", p, ok, err)
	}
	for _, k := range []string{"live", "back"} {
		if r, ok, err := store.Get(ctx, replica.Key{Type: "counter", ID: k}, state); err != nil || !ok || r.Tombstone {
			t.Fatalf("key %s stores %+v, %v, %v; want its state", k, r, ok, err)
		}
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	sys = newStandalone(t, system.Config{DataDir: dir}, def)
	if got := get(t, def.Ref(sys, "gone")); got != 100 {
		t.Fatalf("after a restart the collected key counts %d, want 100", got)
	}
	if got := get(t, def.Ref(sys, "live")); got != 107 {
		t.Fatalf("after a restart the live key counts %d, want 107", got)
	}
}

// TestAReplicatedDeletedKeyIsCollectedOnEveryReplica deletes a key kept
// on three members: its owner collects it once the tombstone is old, and
// each member's store keeps only the key's promise, with its horizon; a
// key still written is left alone.
func TestAReplicatedDeletedKeyIsCollectedOnEveryReplica(t *testing.T) {
	def := counterDef("counter", nil, actor.WithReplicas(3, actor.WriteMajority), actor.WithIdleTimeout(20*time.Millisecond))
	def.WithInit(func(string) int { return 100 })
	regs := make([]*prometheus.Registry, 3)
	dirs := make([]string, 3)
	systems := systemtest.StartCluster(t, 3, func(i int, cfg *system.Config) {
		regs[i], dirs[i] = prometheus.NewRegistry(), t.TempDir()
		cfg.Metrics, cfg.DataDir, cfg.TombstoneAge = regs[i], dirs[i], 50*time.Millisecond
	}, def)
	// A sweep needs every replica to count: one still receiving the
	// ranges of the joins (slow under -race) would make each sweep give
	// up after its resends.
	waitCaughtUp(t, systems)
	add(t, def.Ref(systems[0], "gone"), 5)
	add(t, def.Ref(systems[0], "live"), 7)
	if _, err := actor.Ask(systemtest.Ctx(t), def.Ref(systems[1], "gone"), DForget{}); err != nil {
		t.Fatal(err)
	}
	owner, i := byAddr(t, systems, system.OwnerOf(systems[0], "counter", "gone"))
	systemtest.WaitUntil(t, "the owner collects the deleted key", func() bool {
		return systemtest.CounterValue(t, regs[i], "troupe_replication_tombstones_collected_total") >= 1
	})
	if got := get(t, def.Ref(systems[2], "gone")); got != 100 {
		t.Fatalf("a collected key's count is %d, want WithInit's 100", got)
	}
	if got := get(t, def.Ref(owner, "live")); got != 107 {
		t.Fatalf("a live key's count is %d, want 107", got)
	}
	for _, s := range systems {
		closeNow(t, s)
	}
	ctx := context.Background()
	for _, dir := range dirs {
		store, err := replicastore.Open(dir, replicastore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if r, ok, err := store.Get(ctx, replica.Key{Type: "counter", ID: "gone"}, replica.Slot{Kind: replica.KindState}); err != nil || ok {
			t.Errorf("%s still stores the collected key: %+v, %v", dir, r, err)
		}
		p, _, err := store.Get(ctx, replica.Key{Type: "counter", ID: "gone"}, replica.Slot{Kind: replica.KindPromise})
		if _, horizon := replica.HorizonOf(p); err != nil || !horizon {
			t.Errorf("%s's promise for the collected key is %+v, %v; want a horizon", dir, p, err)
		}
		if r, ok, err := store.Get(ctx, replica.Key{Type: "counter", ID: "live"}, replica.Slot{Kind: replica.KindState}); err != nil || !ok || r.Tombstone {
			t.Errorf("%s lost the live key: %+v, %v, %v", dir, r, ok, err)
		}
		store.Close()
	}
}

// TestACollectionPassEndsAtTheFirstSweepThatGivesUp: while a replica's
// answers do not count (it receives the whole ring, as at a hand-off),
// the first sweep of a pass gives up after its resends and the pass ends
// there instead of waiting out the same resends on every other key. A
// member that receives the ranges itself tries none. Once every replica
// counts, a pass collects every key.
func TestACollectionPassEndsAtTheFirstSweepThatGivesUp(t *testing.T) {
	def := counterDef("counter", nil, actor.WithReplicas(3, actor.WriteMajority), actor.WithIdleTimeout(20*time.Millisecond))
	// The default TombstoneAge: the members' own collectors stay idle
	// (their first pass is hours away); the test runs the passes.
	systems := systemtest.StartCluster(t, 3, nil, def)
	waitCaughtUp(t, systems)
	ctx := systemtest.Ctx(t)
	owned := map[string][]string{}
	for i := range 24 {
		k := fmt.Sprintf("k%d", i)
		add(t, def.Ref(systems[0], k), 1)
		if _, err := actor.Ask(ctx, def.Ref(systems[0], k), DForget{}); err != nil {
			t.Fatal(err)
		}
		o := system.OwnerOf(systems[0], "counter", k)
		owned[o] = append(owned[o], k)
	}
	var owner, other *system.System
	for _, s := range systems {
		if len(owned[s.Addr()]) >= 3 && owner == nil {
			owner = s
		} else if other == nil {
			other = s
		}
	}
	if owner == nil || other == nil {
		t.Fatalf("no member owns three of the deleted keys: %v", owned)
	}
	keys := owned[owner.Addr()]
	systemtest.Await(t, func() error { // every deleted key passivated
		for _, s := range systems {
			if n := s.Stats().Active; n > 0 {
				return fmt.Errorf("%s holds %d activations", s.Addr(), n)
			}
		}
		return nil
	})

	// A pass waits out a sweep's resends (about 6 s): each its own deadline.
	passCtx := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		t.Cleanup(cancel)
		return ctx
	}
	end := system.ReceiveAll(t, other)
	t.Cleanup(end) // ending twice does nothing
	if tried, gaveUp := system.CollectPass(passCtx(), owner, 0, time.Now()); tried != 1 || !gaveUp || system.Collected(owner) != 0 {
		t.Fatalf("a pass with a replica not counting tried %d keys (gave up %v) and collected %d; want one that gave up, none collected", tried, gaveUp, system.Collected(owner))
	}
	end()

	end = system.ReceiveAll(t, owner)
	t.Cleanup(end)
	if tried, gaveUp := system.CollectPass(passCtx(), owner, 0, time.Now()); tried != 0 || gaveUp {
		t.Fatalf("a member receiving every range tried to collect %d keys (gave up %v); want none", tried, gaveUp)
	}
	end()

	if tried, gaveUp := system.CollectPass(passCtx(), owner, 0, time.Now()); tried != len(keys) || gaveUp || system.Collected(owner) != uint64(len(keys)) {
		t.Fatalf("a pass with every replica counting tried %d keys (gave up %v) and collected %d; want all %d", tried, gaveUp, system.Collected(owner), len(keys))
	}
	for _, k := range keys {
		if got := get(t, def.Ref(systems[0], k)); got != 0 {
			t.Fatalf("collected key %s counts %d, want 0", k, got)
		}
	}
}
