package system_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/client"
	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/proctest"
	"github.com/troupe-go/troupe/internal/systemtest"
)

// aliveIDs returns the ids of the members ms lists alive and ready.
func aliveIDs(ms []cluster.Member) []string {
	var out []string
	for _, m := range ms {
		if m.Status == cluster.StatusAlive && !m.Joining {
			out = append(out, m.ID.String())
		}
	}
	slices.Sort(out)
	return out
}

// TestFirstSeedRestartedWithoutSeedsMergesBackIntoTheCluster runs the
// first seed with no seeds and two members seeded with it, kills the seed
// with -9 and, once the others removed it, starts it again with its
// original command (no seeds) while the others run. The restarted seed forms a cluster alone at first; the
// others, which keep probing their seed's address, meet it and the two
// merge: within seconds a client seeded only with the restarted member
// sees all three members and reaches keys owned by each.
func TestFirstSeedRestartedWithoutSeedsMergesBackIntoTheCluster(t *testing.T) {
	addrs := proctest.FreeLoopback(t, 3)
	seeds := [][]string{nil, {addrs[0]}, {addrs[0]}}
	procs := make([]*proctest.Proc, 3)
	ids := make([]string, 3)
	for i := range procs {
		procs[i] = spawnMember(t, addrs[i], seeds[i], detectFast)
		ids[i] = memberID(t, procs[i]) // one after the other: the seed first
	}
	// Kill the seed, and restart it only once the others have removed it
	// (RemoveAfter): they no longer know any process at its address, and
	// only their seed list still names it.
	ctx, cancel := context.WithTimeout(t.Context(), 2*systemtest.Limit)
	defer cancel()
	watch, err := client.New(ctx, client.Config{ClusterName: procClusterName, Seeds: []string{addrs[1]}, SyncInterval: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close()
	procs[0].Kill()
	awaitWithin(t, 2*systemtest.Limit, func() error {
		for _, m := range watch.Members() {
			if m.ID.Addr == addrs[0] {
				return fmt.Errorf("expected the others to remove the killed seed; the client sees %v", watch.Members())
			}
		}
		return nil
	})
	restarted := time.Now()
	procs[0] = spawnMember(t, addrs[0], nil, detectFast)
	ids[0] = memberID(t, procs[0])

	c, err := client.New(ctx, client.Config{ClusterName: procClusterName, Seeds: []string{addrs[0]}, SyncInterval: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := slices.Sorted(slices.Values(ids))
	systemtest.WaitUntil(t, fmt.Sprintf("the client seeded with the restarted seed to see %v alive", want), func() bool {
		return slices.Equal(aliveIDs(c.Members()), want)
	})
	whole := time.Since(restarted)
	if ms := c.Members(); len(ms) != 3 {
		t.Fatalf("expected exactly the 3 current members; the client lists %v", ms)
	}
	// Every key answered, and by each of the three members for some key.
	servedBy := map[string]int{}
	for i := range 60 {
		key := "merge-" + strconv.Itoa(i)
		var got CountReply
		systemtest.Await(t, func() error {
			actx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			r, err := actor.Ask(actx, ccounter.Ref(c, key), Get{})
			got = r
			return err
		})
		servedBy[got.Node]++
	}
	for _, a := range addrs {
		if servedBy[a] == 0 {
			t.Errorf("expected some of 60 keys answered by %s; answered by %v", a, servedBy)
		}
	}
	t.Logf("first seed restarted without seeds: the cluster was whole again %v after the restart (a client seeded with it saw all three); keys per member %v",
		whole.Round(time.Millisecond), servedBy)
}

// awaitWithin is systemtest.Await with a bound of its own.
func awaitWithin(t *testing.T, limit time.Duration, check func() error) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(limit)
	for {
		err := check()
		if err == nil {
			return
		}
		select {
		case <-deadline:
			t.Fatalf("after %v: %v", limit, err)
		case <-tick.C:
		}
	}
}

// loadFigures are the failed asks of a client under load around one
// kill -9 and restart of a member.
type loadFigures struct {
	asks                     int64
	killFailed, rejoinFailed int64
	rejoinErrs               []string
	stderr                   []string
	killErrs                 []string
}

// killAndRejoinUnderLoad runs three members with the given failure
// detection and a client asking many keys from several goroutines; it
// kills one member with -9, waits until the client sees it dead, restarts
// it at its address and waits until the client sees it ready and a while
// more. Failures of asks started before the restart count against the
// kill, those started after against the rejoin.
//
// With immediate set, the member is restarted at once after the kill, as
// a supervisor would, before anyone detects the death; the rejoin's count
// then starts when the new process has joined (printed ready).
func killAndRejoinUnderLoad(t *testing.T, detect string, immediate bool) loadFigures {
	const n, nkeys, workers = 3, 60, 8
	addrs := proctest.FreeLoopback(t, n)
	procs := make([]*proctest.Proc, n)
	ids := make([]string, n)
	seedsFor := func(int) []string { return addrs } // one list for every member
	for i := range procs {
		procs[i] = spawnMember(t, addrs[i], seedsFor(i), detect)
	}
	for i := range procs {
		ids[i] = memberID(t, procs[i])
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cc := client.Config{ClusterName: procClusterName, Seeds: addrs}
	if detect == detectFast {
		cc.SyncInterval = 500 * time.Millisecond
	}
	c, err := client.New(ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.WaitAlive(ctx, n); err != nil {
		t.Fatal(err)
	}
	var f loadFigures
	var restartAt atomic.Int64 // unix nanos; 0 before the restart
	var mu sync.Mutex
	stop := make(chan struct{})
	var stopOnce sync.Once
	var wg sync.WaitGroup
	stopLoad := func() {
		stopOnce.Do(func() { close(stop) })
		wg.Wait()
	}
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for {
				select {
				case <-stop:
					return
				default:
				}
				key := "load-" + strconv.Itoa(rng.IntN(nkeys))
				started := time.Now()
				ownerAt, _ := ringOwner(c.Members(), "ccounter", key)
				actx, cancel := context.WithTimeout(ctx, 2*time.Second)
				_, err := actor.Ask(actx, ccounter.Ref(c, key), Get{})
				cancel()
				atomic.AddInt64(&f.asks, 1)
				if err == nil {
					continue
				}
				if r := restartAt.Load(); r != 0 && started.UnixNano() >= r {
					atomic.AddInt64(&f.rejoinFailed, 1)
					mu.Lock()
					if len(f.rejoinErrs) < 10 {
						ownerNow, _ := ringOwner(c.Members(), "ccounter", key)
						f.rejoinErrs = append(f.rejoinErrs, fmt.Sprintf("%s at +%v (placed on %s, then %s): %v", key, time.Since(time.Unix(0, r)).Round(time.Millisecond), ownerAt, ownerNow, err))
					}
					mu.Unlock()
				} else {
					atomic.AddInt64(&f.killFailed, 1)
					mu.Lock()
					if len(f.killErrs) < 5 {
						f.killErrs = append(f.killErrs, err.Error())
					}
					mu.Unlock()
				}
				if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
					return
				}
			}
		})
	}
	defer stopLoad()
	time.Sleep(500 * time.Millisecond) // a steady load before the kill
	victim := n - 1
	old := ids[victim]
	procs[victim].Kill()
	if !immediate {
		// Until the client sees it dead, asks still go to it (a suspect
		// serves): those fail because of the kill.
		// SuspectAfter + DeadAfter is 10 s with the default timings.
		awaitWithin(t, 3*systemtest.Limit, func() error {
			for _, m := range c.Members() {
				if m.ID.String() == old && (m.Status == cluster.StatusAlive || m.Status == cluster.StatusSuspect) {
					return fmt.Errorf("the client still sees the killed member %v", m.Status)
				}
			}
			return nil
		})
		// Asks count by when they started: those under way now count
		// against the kill, however late they fail.
		restartAt.Store(time.Now().UnixNano())
	}
	procs[victim] = spawnMember(t, addrs[victim], seedsFor(victim), detect)
	ids[victim] = memberID(t, procs[victim])
	if immediate {
		restartAt.Store(time.Now().UnixNano())
	}
	want := slices.Sorted(slices.Values(ids))
	systemtest.WaitUntil(t, "the client to see the restarted member ready", func() bool {
		return slices.Equal(aliveIDs(c.Members()), want)
	})
	time.Sleep(3 * time.Second) // keys move to the rejoined member under load
	stopLoad()
	for i, p := range procs {
		f.stderr = append(f.stderr, addrs[i]+": "+p.Stderr())
	}
	return f
}

func TestNoAskRefusedWhileAMemberRejoinsWithTheDefaultTimings(t *testing.T) {
	if testing.Short() {
		t.Skip("about 20 s of default failure detection")
	}
	f := killAndRejoinUnderLoad(t, detectDefault, false)
	t.Logf("default timings: %d asks; %d failed around the kill -9 (before the restart; first: %q), %d during the rejoin", f.asks, f.killFailed, f.killErrs, f.rejoinFailed)
	if f.rejoinFailed != 0 {
		t.Errorf("expected no ask to fail while the restarted member rejoins; %d did: %v", f.rejoinFailed, f.rejoinErrs)
		for _, s := range f.stderr {
			t.Log(s)
		}
	}
}

func TestFailedAsksPerKillAndRejoinWithTheFastTimings(t *testing.T) {
	f := killAndRejoinUnderLoad(t, detectFast, false)
	t.Logf("fast timings: %d asks; %d failed around the kill -9 (before the restart), %d during the rejoin: %v", f.asks, f.killFailed, f.rejoinFailed, f.rejoinErrs)
}

func TestNoAskRefusedWhenAMemberIsRestartedAtOnceAfterAKill(t *testing.T) {
	for _, detect := range []string{detectDefault, detectFast} {
		t.Run(detect, func(t *testing.T) {
			f := killAndRejoinUnderLoad(t, detect, true)
			t.Logf("%s timings, restarted at once: %d asks; %d failed between the kill and the new process's join (%q), %d after it: %v", detect, f.asks, f.killFailed, f.killErrs, f.rejoinFailed, f.rejoinErrs)
			if f.rejoinFailed != 0 {
				t.Errorf("expected no ask to fail once the restarted member has joined; %d did", f.rejoinFailed)
				for _, s := range f.stderr {
					t.Log(s)
				}
			}
		})
	}
}
