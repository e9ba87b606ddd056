package system_test

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

// TestTenMembersAgreeOnEveryOwnerAndServeThere starts ten members on
// loopback and asks 200 keys from every one of them: each member must
// place each key on the same owner, and the reply must come from that
// owner, from one activation (the count grows by one per member).
func TestTenMembersAgreeOnEveryOwnerAndServeThere(t *testing.T) {
	const n, keys, workers = 10, 200, 8
	start := time.Now()
	systems := startClusterWith(t, n, steadyTimings())
	unstable := watchMembership(t, systems)
	t.Logf("%d members up and converged in %v", n, time.Since(start).Round(time.Millisecond))

	// Placement first: every member names the same owner for every key.
	// Members' placement follows their membership view shortly (on its
	// events, and every heartbeat), so wait for it to agree.
	owners := make([]string, keys)
	served := map[string]int{}
	start = time.Now()
	systemtest.Await(t, func() error {
		clear(served)
		for i := range keys {
			key := "ten-" + strconv.Itoa(i)
			owners[i] = system.OwnerOf(systems[0], "ccounter", key)
			for j, s := range systems {
				if got := system.OwnerOf(s, "ccounter", key); got != owners[i] {
					return fmt.Errorf("members disagree on placement after their views converged: %s: member %d (%s) places it on %s, member 0 on %s", key, j, s.Addr(), got, owners[i])
				}
			}
			served[owners[i]]++
		}
		return nil
	})
	t.Logf("placement agreed everywhere %v after the membership views did", time.Since(start).Round(time.Millisecond))
	if len(served) != n {
		t.Fatalf("keys placed on %d members, want all %d: %v", len(served), n, served)
	}
	counts := slices.Sorted(maps.Values(served))
	t.Logf("%d keys over %d members: fewest %d, most %d per member", keys, n, counts[0], counts[len(counts)-1])

	// Then traffic: per key, each member in turn tells Add{1} and asks;
	// the ask follows the tell from the same sender on the same key, and
	// the earlier members' tells were answered already, so the count is
	// exactly the number of members so far. Keys run in parallel.
	start = time.Now()
	var (
		mu   sync.Mutex
		lat  []time.Duration
		errs []error
		wg   sync.WaitGroup
	)
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			for i := range next {
				key := "ten-" + strconv.Itoa(i)
				for j, s := range systems {
					ctx := systemtest.Ctx(t)
					ref := ccounter.Ref(s, key)
					if err := ref.Tell(ctx, Add{N: 1}); err != nil {
						mu.Lock()
						errs = append(errs, fmt.Errorf("%s: tell from member %d: %w", key, j, err))
						mu.Unlock()
						break
					}
					at := time.Now()
					got, err := actor.Ask(ctx, ref, Get{})
					took := time.Since(at)
					mu.Lock()
					lat = append(lat, took)
					switch {
					case err != nil:
						err = fmt.Errorf("%s: ask from member %d: %w (after %v)", key, j, err, took)
					case got.Node != owners[i]:
						err = fmt.Errorf("%s: asked from member %d, served by %s, owner is %s", key, j, got.Node, owners[i])
					case got.Count != j+1:
						err = fmt.Errorf("%s: asked from member %d, count %d, want %d (one activation counting every member's tell)", key, j, got.Count, j+1)
					}
					if err != nil {
						errs = append(errs, err)
					}
					mu.Unlock()
					if err != nil {
						break
					}
				}
			}
		})
	}
	for i := range keys {
		next <- i
	}
	close(next)
	wg.Wait()
	if u := unstable(); len(u) > 0 {
		t.Errorf("membership changed during the run (false suspicions under load? the errors below may follow from it): %s", strings.Join(u, "; "))
	}
	for _, err := range errs {
		t.Error(err)
	}
	slices.Sort(lat)
	q := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))].Round(time.Microsecond) }
	t.Logf("%d keys x %d members (tell then ask, %d keys at a time): %v; ask latency p50 %v, p99 %v, max %v",
		keys, n, workers, time.Since(start).Round(time.Millisecond), q(0.5), q(0.99), q(1))
}

// steadyTimings are FastTimings with failure detection slow enough that
// ten members in one process under the race detector, on a loaded 2-core
// machine, are not suspected while they merely wait for a CPU: with
// FastTimings (suspect after 500 ms, dead 500 ms later, step-down at
// 750 ms of silence) members of this test were declared dead and stepped
// down under a load average of 14.
func steadyTimings() cluster.Timings {
	tm := cluster.FastTimings()
	tm.SuspectAfter = 2 * time.Second
	tm.DeadAfter = 2 * time.Second
	tm.RemoveAfter = 12 * time.Second
	return tm
}

// startClusterWith is startCluster with timings tm.
func startClusterWith(t *testing.T, n int, tm cluster.Timings, defs ...actor.Definition) []*system.System {
	t.Helper()
	systems := systemtest.StartCluster(t, n, func(_ int, cfg *system.Config) {
		cfg.LeaveTimeout = 2 * time.Second
		cfg.Cluster.Timings = tm
	}, append([]actor.Definition{ccounter}, defs...)...)
	recordNodes(systems)
	return systems
}

// watchMembership polls every member's view until the test ends; the
// returned func stops it and describes the first views in which some
// member saw another one not alive, as "<observer> saw <addr#inc>
// <status> at <time>" (none if none did).
func watchMembership(t *testing.T, systems []*system.System) func() []string {
	var mu sync.Mutex
	var seen []string
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for _, s := range systems {
				for _, m := range s.Members() {
					if m.Status != cluster.StatusAlive {
						mu.Lock()
						if len(seen) < 50 {
							seen = append(seen, fmt.Sprintf("%s saw %s %s at %s", s.Addr(), m.ID, m.Status, time.Now().Format("15:04:05.000")))
						}
						mu.Unlock()
					}
				}
			}
		}
	}()
	var once sync.Once
	finish := func() { once.Do(func() { close(stop); <-done }) }
	t.Cleanup(finish)
	return func() []string {
		finish()
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}
