package chaostest

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/client"
	"github.com/troupe-go/troupe/internal/proctest"
	"github.com/troupe-go/troupe/internal/replicastore"
)

// loopCluster is member processes on loopback, each with its own data
// directory, and a client: for the restart tests, which need no
// partitions and so no root.
type loopCluster struct {
	t     *testing.T
	addrs []string
	dirs  []string
	sync  bool
	// probe, if set, is the register every member probes (envProbe);
	// onProbe gets each probe line with the member's index.
	probe   string
	onProbe func(member int, line string)
	// late members start once the others each see one another ready.
	late  int
	procs []*proctest.Proc
	c     *client.Client
}

func startLoopCluster(t *testing.T, n int, sync bool) *loopCluster {
	t.Helper()
	return startLoopClusterWith(t, &loopCluster{sync: sync}, n)
}

// startLoopClusterWith starts lc (sync, probe and onProbe set) with n
// members.
func startLoopClusterWith(t *testing.T, lc *loopCluster, n int) *loopCluster {
	t.Helper()
	lc.t, lc.addrs, lc.procs = t, proctest.FreeLoopback(t, n), make([]*proctest.Proc, n)
	for i := range n {
		lc.dirs = append(lc.dirs, filepath.Join(t.TempDir(), "member"+strconv.Itoa(i)))
	}
	// The late members have the largest addresses, so that the founder
	// (the smallest: see cluster.Config.Seeds) starts first.
	slices.Sort(lc.addrs)
	early := n - lc.late
	for i := range early {
		lc.start(i)
	}
	for i := range early {
		lc.procs[i].WaitLine(t, "ready ", time.Minute)
	}
	if lc.late > 0 {
		for i := range early {
			lc.procs[i].WaitLine(t, "settled "+strconv.Itoa(early), time.Minute)
		}
		for i := early; i < n; i++ {
			lc.start(i)
		}
		for i := early; i < n; i++ {
			lc.procs[i].WaitLine(t, "ready ", time.Minute)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c, err := client.New(ctx, client.Config{ClusterName: clusterName, Seeds: lc.addrs, SyncInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	lc.c = c
	t.Cleanup(func() { c.Close() })
	lc.waitAlive(n)
	if lc.probe != "" {
		// Probes start (startProbes) once every member's own view holds
		// every member ready, not while the first rings grow.
		for i := range n {
			lc.procs[i].WaitLine(t, "settled "+strconv.Itoa(n), time.Minute)
		}
	}
	return lc
}

// startProbes has the members named probe the register lc.probe.
func (lc *loopCluster) startProbes(members ...int) {
	lc.t.Helper()
	for _, i := range members {
		if err := lc.procs[i].Signal(syscall.SIGUSR1); err != nil {
			lc.t.Fatal(err)
		}
	}
}

func (lc *loopCluster) start(i int) {
	// One seed list for every member (see labCluster.start).
	env := []string{envAddr + "=" + lc.addrs[i], envSeeds + "=" + strings.Join(lc.addrs, ","), envDataDir + "=" + lc.dirs[i]}
	if lc.sync {
		env = append(env, envSync+"=1")
	}
	spec := proctest.Spec{Role: "member", Env: env}
	if lc.probe != "" {
		settle := strconv.Itoa(len(lc.addrs))
		if i < len(lc.addrs)-lc.late {
			settle = strconv.Itoa(len(lc.addrs)-lc.late) + "," + settle
		}
		spec.Env = append(spec.Env, envProbe+"="+lc.probe, envSettle+"="+settle)
		spec.OnLine = func(line string) {
			if strings.HasPrefix(line, "probe ") {
				lc.onProbe(i, line)
			}
		}
	}
	lc.procs[i] = proctest.Start(lc.t, spec)
}

func (lc *loopCluster) waitAlive(n int) {
	lc.t.Helper()
	ctx, cancel := context.WithTimeout(lc.t.Context(), time.Minute)
	defer cancel()
	if _, err := lc.c.WaitAlive(ctx, n); err != nil {
		lc.t.Fatalf("the client did not see %d members alive: %v", n, err)
	}
}

// tallies runs writers that increment keys tallies until stop closes,
// keeping per key the highest count acknowledged.
type tallies struct {
	refs  []actor.Ref[tallyMsg]
	acked []atomic.Int64
	ok    atomic.Int64
	wg    sync.WaitGroup
	stop  chan struct{}
}

func runTallies(c *client.Client, keys, writers int) *tallies {
	ts := &tallies{refs: make([]actor.Ref[tallyMsg], keys), acked: make([]atomic.Int64, keys), stop: make(chan struct{})}
	for i := range ts.refs {
		ts.refs[i] = tally.Ref(c, "tally-"+strconv.Itoa(i))
	}
	for w := range writers {
		ts.wg.Go(func() {
			for i := w; ; i += writers {
				select {
				case <-ts.stop:
					return
				default:
				}
				k := i % keys
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				n, err := actor.Ask(ctx, ts.refs[k], tallyInc{})
				cancel()
				if err != nil {
					continue // unknown outcome: may or may not have counted
				}
				ts.ok.Add(1)
				for {
					old := ts.acked[k].Load()
					if int64(n) <= old || ts.acked[k].CompareAndSwap(old, int64(n)) {
						break
					}
				}
			}
		})
	}
	return ts
}

func (ts *tallies) halt() {
	close(ts.stop)
	ts.wg.Wait()
}

// check reads every tally (retrying until limit) and fails t for a count
// below what was acknowledged.
func (ts *tallies) check(t *testing.T, limit time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	lost := 0
	for k, ref := range ts.refs {
		var got int
		var err error
		for {
			actx, acancel := context.WithTimeout(ctx, 2*time.Second)
			got, err = actor.Ask(actx, ref, tallyGet{})
			acancel()
			if err == nil || ctx.Err() != nil {
				break
			}
		}
		if err != nil {
			t.Fatalf("tally %d could not be read: %v", k, err)
		}
		if want := ts.acked[k].Load(); int64(got) < want {
			lost++
			t.Errorf("tally %d counts %d, but %d was acknowledged", k, got, want)
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d tallies lost acknowledged increments", lost, len(ts.refs))
	}
}

// TestARollingRestartLosesNothingAcknowledged restarts every member in
// turn (an orderly Close, then a new process on the same data directory)
// while clients keep incrementing replicated tallies: every count
// acknowledged before or during the restarts is still there at the end.
func TestARollingRestartLosesNothingAcknowledged(t *testing.T) {
	const members = 3
	lc := startLoopCluster(t, members, false)
	ts := runTallies(lc.c, 40, 8)
	for i := range members {
		waitProgress(t, ts, 50)
		if err := lc.procs[i].Stop(); err != nil {
			t.Fatalf("member %d did not close cleanly: %v\n%s", i, err, lc.procs[i].Stderr())
		}
		lc.start(i)
		lc.procs[i].WaitLine(t, "ready ", time.Minute)
		lc.waitAlive(members)
	}
	waitProgress(t, ts, 50)
	ts.halt()
	ts.check(t, time.Minute)
	t.Logf("%d increments acknowledged across %d restarts", ts.ok.Load(), members)
}

// TestAWholeClusterRestartWithSyncLosesNothingAcknowledged kills every
// member with SIGKILL at once while clients write, makes it a power loss
// (replicastore.PowerLoss), then starts them all again on their data
// directories (Sync on): every count acknowledged before the crash is
// there.
func TestAWholeClusterRestartWithSyncLosesNothingAcknowledged(t *testing.T) {
	wholeClusterRestart(t, true)
}

// TestAWholeClusterKilledWithoutSyncLosesNothingAcknowledged kills every
// member with SIGKILL at once while clients write, without Sync, and
// starts them all again on the same boot: the kernel kept what each
// process wrote, so every member counts at once and every count
// acknowledged before the kill is there.
func TestAWholeClusterKilledWithoutSyncLosesNothingAcknowledged(t *testing.T) {
	wholeClusterRestart(t, false)
}

// wholeClusterRestart kills every member at once, as a power loss with
// sync, as processes killed without, and checks the counts after the
// restart.
func wholeClusterRestart(t *testing.T, sync bool) {
	const members = 3
	lc := startLoopCluster(t, members, sync)
	ts := runTallies(lc.c, 40, 8)
	waitProgress(t, ts, 200)
	for _, p := range lc.procs {
		p.Kill()
	}
	for _, p := range lc.procs {
		<-p.Exited()
	}
	ts.halt()
	for i := range members {
		if sync {
			if err := replicastore.PowerLoss(lc.dirs[i]); err != nil {
				t.Fatal(err)
			}
		}
		lc.start(i)
	}
	for i := range members {
		lc.procs[i].WaitLine(t, "ready ", time.Minute)
	}
	lc.waitAlive(members)
	ts.check(t, time.Minute)
	for i := range members {
		if strings.Contains(lc.procs[i].Stderr(), "the store was not closed cleanly") {
			t.Errorf("member %d restarted unclean:\n%s", i, lc.procs[i].Stderr())
		}
	}
	t.Logf("%d increments acknowledged before the whole cluster was killed", ts.ok.Load())
}

// waitProgress waits until n more increments were acknowledged.
func waitProgress(t *testing.T, ts *tallies, n int64) {
	t.Helper()
	want := ts.ok.Load() + n
	deadline := time.Now().Add(time.Minute)
	for ts.ok.Load() < want {
		if time.Now().After(deadline) {
			t.Fatalf("no progress: %d increments acknowledged, waiting for %d", ts.ok.Load(), want)
		}
		tick := time.NewTimer(10 * time.Millisecond)
		<-tick.C
	}
}

// TestAMemberKilledWithoutSyncCatchesUpAndCountsAgain kills a member
// (SIGKILL, no Sync) and restarts it on its data directory twice: once as
// the process died (the kernel kept what it wrote: it counts at once),
// once after a power loss (replicastore.PowerLoss: its store may have
// lost its last writes, so it restarts receiving the whole ring); each
// time it then stops another member. With three replicas on three
// members, the keys can only make progress on the two left if the
// restarted member counts (after the power loss: once it caught up from
// the others).
func TestAMemberKilledWithoutSyncCatchesUpAndCountsAgain(t *testing.T) {
	const members = 3
	lc := startLoopCluster(t, members, false)
	ts := runTallies(lc.c, 40, 8)
	waitProgress(t, ts, 100)
	for _, powerLoss := range []bool{false, true} {
		lc.procs[0].Kill()
		<-lc.procs[0].Exited()
		if powerLoss {
			if err := replicastore.PowerLoss(lc.dirs[0]); err != nil {
				t.Fatal(err)
			}
		}
		lc.start(0)
		lc.procs[0].WaitLine(t, "ready ", time.Minute)
		const lost = "the store was not closed cleanly"
		if got := strings.Contains(lc.procs[0].Stderr(), lost); got != powerLoss {
			t.Fatalf("power loss %v: the restarted member logged %q: %v, want %v; it logged:\n%s", powerLoss, lost, got, powerLoss, lc.procs[0].Stderr())
		}
		lc.waitAlive(members)
		waitProgress(t, ts, 100)
		if err := lc.procs[1].Stop(); err != nil {
			t.Fatalf("member 1 did not close cleanly: %v\n%s", err, lc.procs[1].Stderr())
		}
		lc.waitAlive(members - 1)
		waitProgress(t, ts, 100)
		if !powerLoss {
			lc.start(1)
			lc.procs[1].WaitLine(t, "ready ", time.Minute)
		}
	}
	ts.halt()
	ts.check(t, time.Minute)
}
