package membership

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/netns"
	"github.com/troupe-go/troupe/ring"

	"github.com/troupe-go/troupe/cluster"
)

// The tests in this file split a cluster with nftables between network
// namespaces (internal/netns): each member runs in this process, but its
// listener and every connection it dials live in its own host. They need
// root, ip and nft; netns.New skips otherwise.

// standingLog records every standing change and every status a member
// reports about others, with the time this test saw it.
type standingLog struct {
	mu      sync.Mutex
	owning  []standingChange
	verdict map[ring.NodeID][]time.Time // every dead verdict about each member
	done    chan struct{}
}

type standingChange struct {
	at     time.Time
	owning bool
}

func watchStanding(w *wireNode) *standingLog {
	l := &standingLog{verdict: map[ring.NodeID][]time.Time{}, done: make(chan struct{})}
	sub := w.node.Subscribe(1 << 14)
	go func() {
		defer close(l.done)
		for e := range sub.Events() {
			l.mu.Lock()
			switch {
			case e.Kind == EventStanding:
				l.owning = append(l.owning, standingChange{at: time.Now(), owning: e.Owning})
			case e.Kind == EventMemberUpdated && e.Member.Status == StatusDead:
				l.verdict[e.Member.ID] = append(l.verdict[e.Member.ID], time.Now())
			}
			l.mu.Unlock()
		}
	}()
	return l
}

// steppedDownAt returns when the member last stopped owning after since.
func (l *standingLog) steppedDownAt(since time.Time) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.owning) - 1; i >= 0; i-- {
		if c := l.owning[i]; !c.owning && c.at.After(since) {
			return c.at, true
		}
	}
	return time.Time{}, false
}

// everStoppedOwning reports whether the member stopped owning after since.
func (l *standingLog) everStoppedOwning(since time.Time) bool {
	_, ok := l.steppedDownAt(since)
	return ok
}

func (l *standingLog) firstVerdict(id ring.NodeID, since time.Time) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, at := range l.verdict[id] {
		if at.After(since) {
			return at, true
		}
	}
	return time.Time{}, false
}

// labTimings are FastTimings with a longer DeadAfter. The step-down grace
// (DeadAfter/2) is the whole safety margin between the minority stepping
// down and the majority declaring it dead, less the skew between the
// observers' clocks of silence (up to a heartbeat and a tick) and any
// scheduling delay; FastTimings leave about 150 ms of it, which a loaded
// machine running the race detector eats. Production timings leave 2.5 s.
func labTimings() Timings {
	t := cluster.FastTimings()
	t.DeadAfter = time.Second
	return t
}

// labCluster is one member per lab host, on port 7400.
type labCluster struct {
	lab   *netns.Lab
	nodes []*wireNode
	logs  []*standingLog
}

func startLabCluster(t *testing.T, n int) *labCluster {
	t.Helper()
	lab := netns.New(t.Context(), t, netns.Config{Hosts: n})
	c := &labCluster{lab: lab}
	var addrs []string
	for _, h := range lab.Hosts() {
		addrs = append(addrs, netip.AddrPortFrom(h.Addr, 7400).String())
	}
	ctx, cancel := context.WithTimeout(t.Context(), wideBound)
	defer cancel()
	c.nodes = make([]*wireNode, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, h := range lab.Hosts() {
		ln, err := h.Listen(ctx, "tcp4", addrs[i])
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			c.nodes[i], errs[i] = startWireNode(ctx, wireNodeOptions{ln: ln, seeds: addrs[:min(3, n)], dial: h.Dial, timings: labTimings()})
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, w := range c.nodes {
			if w != nil {
				w.close()
			}
		}
		for _, l := range c.logs {
			<-l.done
		}
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("expected member %d to join: %v", i, err)
		}
	}
	ids := c.ids()
	waitUntil(t, wideBound, "convergence", allSee(c.nodes, ids, StatusAlive), func() string { return views(c.nodes, ids) })
	for _, w := range c.nodes {
		c.logs = append(c.logs, watchStanding(w))
	}
	return c
}

func (c *labCluster) ids() []ring.NodeID {
	var ids []ring.NodeID
	for _, w := range c.nodes {
		ids = append(ids, w.node.ID())
	}
	return ids
}

func (c *labCluster) hosts(idx ...int) []*netns.Host {
	var hs []*netns.Host
	for _, i := range idx {
		hs = append(hs, c.lab.Host(i))
	}
	return hs
}

func (c *labCluster) pick(idx ...int) []*wireNode {
	var ws []*wireNode
	for _, i := range idx {
		ws = append(ws, c.nodes[i])
	}
	return ws
}

func groupString(groups [][]int) string {
	var parts []string
	for _, g := range groups {
		parts = append(parts, fmt.Sprint(len(g)))
	}
	return strings.Join(parts, "|")
}

// splitAndHeal partitions the cluster into groups and checks standing:
// members of the group with a majority keep owning throughout; every other
// member steps down, within DeadAfter/2 of losing its majority and before
// any majority member declares it dead, so no key has two owners. After
// the heal every member sees every member alive and owns again.
func (c *labCluster) splitAndHeal(t *testing.T, groups [][]int) {
	ctx := t.Context()
	tm := labTimings()
	n := len(c.nodes)
	var majority []int
	var minority []int
	for _, g := range groups {
		if 2*len(g) > n {
			majority = g
		} else {
			minority = append(minority, g...)
		}
	}
	var hostGroups [][]*netns.Host
	for _, g := range groups {
		hostGroups = append(hostGroups, c.hosts(g...))
	}
	cut := time.Now()
	if err := c.lab.Partition(ctx, hostGroups...); err != nil {
		t.Fatal(err)
	}
	minorityIDs := make([]ring.NodeID, 0, len(minority))
	for _, i := range minority {
		minorityIDs = append(minorityIDs, c.nodes[i].node.ID())
	}
	waitUntil(t, wideBound, "every minority member to step down",
		func() bool {
			for _, i := range minority {
				if _, ok := c.logs[i].steppedDownAt(cut); !ok {
					return false
				}
			}
			return true
		}, func() string { return views(c.pick(minority...), c.ids()) })
	if majority != nil {
		waitUntil(t, wideBound, "the majority to declare every minority member dead",
			allSee(c.pick(majority...), minorityIDs, StatusDead), func() string { return views(c.pick(majority...), minorityIDs) })
	} else {
		// Nobody can declare anyone dead without a majority; let the
		// verdicts that could come, come.
		time.Sleep(2 * (tm.SuspectAfter + tm.DeadAfter))
	}
	var lastDown time.Duration
	for _, i := range minority {
		at, ok := c.logs[i].steppedDownAt(cut)
		if !ok {
			t.Fatalf("expected minority member %d to report stepping down", i)
		}
		lastDown = max(lastDown, at.Sub(cut))
	}
	firstVerdict := time.Duration(-1)
	for _, i := range majority {
		if c.logs[i].everStoppedOwning(cut) {
			t.Errorf("expected majority member %d to keep owning through the split", i)
		}
		for _, id := range minorityIDs {
			if at, ok := c.logs[i].firstVerdict(id, cut); ok && (firstVerdict < 0 || at.Sub(cut) < firstVerdict) {
				firstVerdict = at.Sub(cut)
			}
		}
	}
	verdict := "none (no side has a majority)"
	if firstVerdict >= 0 {
		verdict = firstVerdict.Round(time.Millisecond).String()
	}
	t.Logf("split %s (heartbeat %v, suspect %v, dead %v): last minority step-down %v after the cut (SuspectAfter + DeadAfter/2 = %v); first dead verdict about a minority member %s after the cut",
		groupString(groups), tm.Heartbeat, tm.SuspectAfter, tm.DeadAfter, lastDown.Round(time.Millisecond), tm.SuspectAfter+tm.DeadAfter/2, verdict)
	if firstVerdict >= 0 && lastDown >= firstVerdict {
		t.Errorf("expected every minority member to step down before the majority declared any of them dead: last step-down %v, first verdict %v", lastDown, firstVerdict)
	}

	healed := time.Now()
	if err := c.lab.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	ids := c.ids()
	took := waitUntil(t, wideBound, "every member to see every member alive after the heal",
		allSee(c.nodes, ids, StatusAlive), func() string { return views(c.nodes, ids) })
	waitUntil(t, wideBound, "every member to own again after the heal",
		func() bool {
			for _, w := range c.nodes {
				if !w.node.Owning() {
					return false
				}
			}
			return true
		}, func() string { return views(c.nodes, ids) })
	owningAfter := time.Since(healed)
	// Membership converges through whichever members reach each other
	// first; a pair whose wire session sat in redial backoff through the
	// split can stay out of direct touch for longer, and its silence keeps
	// counting. Wait until every pair hears each other directly, so the
	// next split starts every observer's clock at the cut.
	waitUntil(t, wideBound, "every member to hear every other directly after the heal",
		func() bool {
			for _, w := range c.nodes {
				for _, o := range c.nodes {
					if o != w && time.Since(w.mt.LastHeard(o.addr)) > 2*tm.Heartbeat {
						return false
					}
				}
			}
			return true
		}, func() string { return c.heardTable() })
	t.Logf("split %s: heal to full view %v, to every member owning %v, to every pair in direct touch %v",
		groupString(groups), took.Round(time.Millisecond), owningAfter.Round(time.Millisecond), time.Since(healed).Round(time.Millisecond))
}

// heardTable describes how long ago each member last heard each other.
func (c *labCluster) heardTable() string {
	var b strings.Builder
	for _, w := range c.nodes {
		fmt.Fprintf(&b, "\n  %s last heard:", w.addr)
		for _, o := range c.nodes {
			if o != w {
				fmt.Fprintf(&b, " %s %v ago;", o.addr, time.Since(w.mt.LastHeard(o.addr)).Round(time.Millisecond))
			}
		}
	}
	return b.String()
}

func TestPartitionedMinorityStepsDownAndTheMajorityKeepsOwning(t *testing.T) {
	c := startLabCluster(t, 5)
	for _, groups := range [][][]int{
		{{0, 1}, {2, 3, 4}},
		{{0}, {1}, {2, 3, 4}},
	} {
		t.Run(groupString(groups), func(t *testing.T) { c.splitAndHeal(t, groups) })
	}
}

func TestEvenSplitLeavesNoSideOwning(t *testing.T) {
	c := startLabCluster(t, 4)
	c.splitAndHeal(t, [][]int{{0, 1}, {2, 3}})
	if slices.ContainsFunc(c.nodes, func(w *wireNode) bool { return !w.node.Owning() }) {
		t.Error("expected every member to own again after the heal")
	}
}
