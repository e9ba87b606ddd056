package membership

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/proctest"
	"github.com/troupe-go/troupe/ring"
)

// The tests in this file run members as separate processes, in the
// proctest role "node" (see TestMain) with the environment variables
// below; each child reports what its Node sees on stdout, one line per
// change:
//
//	start <unixnano> <addr>
//	joined <unixnano> <id>
//	member <unixnano> <status> <id>
//	standing <unixnano> <owning>
//	missed <count>
//
// Times are the child's wall clock; every process shares the machine's.

const (
	envAddr    = "TROUPE_NODE_ADDR"    // address to listen on and advertise
	envSeeds   = "TROUPE_NODE_SEEDS"   // comma-separated
	envTimings = "TROUPE_NODE_TIMINGS" // see parseTimings
	envFigures = "TROUPE_FIGURES"      // "1" runs the long figure tests
)

// parseTimings reads "fast" (the default), "default", or
// "heartbeat,suspect,dead" durations with the other timings derived.
func parseTimings(s string) (Timings, error) {
	switch s {
	case "", "fast":
		return cluster.FastTimings(), nil
	case "default":
		return cluster.DefaultTimings(), nil
	}
	parts := strings.Split(s, ",")
	if len(parts) != 3 {
		return Timings{}, fmt.Errorf("timings %q: want fast, default or heartbeat,suspect,dead", s)
	}
	var d [3]time.Duration
	for i, p := range parts {
		v, err := time.ParseDuration(p)
		if err != nil {
			return Timings{}, err
		}
		d[i] = v
	}
	return Timings{Heartbeat: d[0], SuspectAfter: d[1], DeadAfter: d[2],
		RemoveAfter: 12 * d[2], AntiEntropy: 30 * d[0], TombstoneTTL: 300 * d[0]}, nil
}

// runNode is the body of a member process, the role "node".
func runNode() int {
	out := bufio.NewWriter(os.Stdout)
	var outMu sync.Mutex
	say := func(format string, args ...any) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Fprintf(out, format+"\n", args...)
		out.Flush()
	}
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "node:", err)
		return 2
	}
	timings, err := parseTimings(os.Getenv(envTimings))
	if err != nil {
		return fail(err)
	}
	addr := os.Getenv(envAddr)
	var seeds []string
	if s := os.Getenv(envSeeds); s != "" {
		seeds = strings.Split(s, ",")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fail(err)
	}
	say("start %d %s", time.Now().UnixNano(), addr)
	// The parent's stdin closes when it ends: so does this process.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	go func() {
		io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	var w *wireNode
	var sub *Subscription
	joinCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	w, err = startWireNode(joinCtx, wireNodeOptions{ln: ln, seeds: seeds, timings: timings, logger: testLogger()})
	if err != nil {
		return fail(err)
	}
	defer w.close()
	// Subscribing after Start misses nothing: the view already holds what
	// the join taught, and it is reported first.
	sub = w.node.Subscribe(1 << 16)
	now := time.Now().UnixNano()
	say("joined %d %s", now, w.node.ID())
	for _, m := range w.node.Members() {
		say("member %d %s %s", now, m.Status, m.ID)
	}
	say("standing %d %t", now, w.node.Owning())
	for {
		select {
		case <-ctx.Done():
			return 0
		case e := <-sub.Events():
			switch e.Kind {
			case EventMemberUpdated:
				say("member %d %s %s", e.At.UnixNano(), e.Member.Status, e.Member.ID)
			case EventStanding:
				say("standing %d %t", e.At.UnixNano(), e.Owning)
			}
			if n := sub.Missed(); n > 0 {
				say("missed %d", n)
			}
		}
	}
}

// proc is one member process, as its parent sees it: the child and what
// its reports said.
type proc struct {
	*proctest.Proc
	addr string

	mu       sync.Mutex
	id       ring.NodeID
	started  time.Time
	joinedAt time.Time
	status   map[ring.NodeID]Status
	firstAt  map[ring.NodeID]map[Status]time.Time // when this process first saw each status
	owning   bool
	missed   bool
}

func parseID(s string) (ring.NodeID, error) {
	i := strings.LastIndexByte(s, '#')
	if i < 0 {
		return ring.NodeID{}, fmt.Errorf("bad id %q", s)
	}
	inc, err := strconv.ParseUint(s[i+1:], 10, 64)
	return ring.NodeID{Addr: s[:i], Incarnation: inc}, err
}

func parseStatus(s string) Status {
	for st := StatusAlive; st <= StatusLeft; st++ {
		if st.String() == s {
			return st
		}
	}
	return Status(255)
}

// spawn starts a member process at addr.
func spawn(t testing.TB, addr string, seeds []string, timings string) *proc {
	t.Helper()
	p := &proc{addr: addr, status: map[ring.NodeID]Status{}, firstAt: map[ring.NodeID]map[Status]time.Time{}}
	p.Proc = proctest.Start(t, proctest.Spec{Role: "node", OnLine: p.line, Env: []string{
		envAddr + "=" + addr, envSeeds + "=" + strings.Join(seeds, ","), envTimings + "=" + timings,
	}})
	return p
}

func (p *proc) line(s string) {
	f := strings.Fields(s)
	if len(f) < 2 {
		return
	}
	ns, _ := strconv.ParseInt(f[1], 10, 64)
	at := time.Unix(0, ns)
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case f[0] == "start" && len(f) == 3:
		p.started = at
	case f[0] == "joined" && len(f) == 3:
		p.joinedAt = at
		p.id, _ = parseID(f[2])
	case f[0] == "member" && len(f) == 4:
		id, err := parseID(f[3])
		if err != nil {
			return
		}
		st := parseStatus(f[2])
		p.status[id] = st
		if p.firstAt[id] == nil {
			p.firstAt[id] = map[Status]time.Time{}
		}
		if _, ok := p.firstAt[id][st]; !ok {
			p.firstAt[id][st] = at
		}
	case f[0] == "standing" && len(f) == 3:
		p.owning = f[2] == "true"
	case f[0] == "missed":
		p.missed = true
	}
}

func (p *proc) ID() ring.NodeID {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.id
}

// sees reports whether this process holds every id with a status in want.
func (p *proc) sees(ids []ring.NodeID, want ...Status) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range ids {
		if st, ok := p.status[id]; !ok || !slices.Contains(want, st) {
			return false
		}
	}
	return true
}

// firstSaw returns when this process first saw id with one of want.
func (p *proc) firstSaw(id ring.NodeID, want ...Status) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var first time.Time
	for _, st := range want {
		if at, ok := p.firstAt[id][st]; ok && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	return first, !first.IsZero()
}

func (p *proc) describe(ids []ring.NodeID) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "\n  %s (%v) sees:", p.addr, p.id)
	for _, id := range ids {
		if st, ok := p.status[id]; ok {
			fmt.Fprintf(&b, " %s:%s", id, st)
		} else {
			fmt.Fprintf(&b, " %s:unknown", id)
		}
	}
	if p.missed {
		b.WriteString(" (missed events)")
	}
	if tail := p.Stderr(); tail != "" {
		fmt.Fprintf(&b, "\n  stderr: %.2000s", tail)
	}
	return b.String()
}

// procCluster is a set of member processes on loopback. Its processes
// belong to the test that started the cluster, t, even those restarted
// in a subtest: they run until that test ends.
type procCluster struct {
	t       testing.TB
	timings string
	addrs   []string
	procs   []*proc
}

// startProcs starts n member processes at once, each seeded with the
// first three addresses.
func startProcs(t testing.TB, n int, timings string) *procCluster {
	t.Helper()
	c := &procCluster{t: t, timings: timings, addrs: proctest.FreeLoopback(t, n)}
	for _, a := range c.addrs {
		c.procs = append(c.procs, spawn(t, a, c.seedsFor(a), timings))
	}
	// Registered after the processes' own cleanups, so it runs before
	// them: every process is killed at once rather than stopped in turn.
	t.Cleanup(c.killAll)
	return c
}

func (c *procCluster) seedsFor(addr string) []string {
	var seeds []string
	for _, a := range c.addrs[:min(3, len(c.addrs))] {
		if a != addr {
			seeds = append(seeds, a)
		}
	}
	if len(seeds) == 0 {
		seeds = c.addrs[len(c.addrs)-1:]
	}
	return seeds
}

func (c *procCluster) killAll() {
	var wg sync.WaitGroup
	for _, p := range c.procs {
		wg.Go(p.Kill)
	}
	wg.Wait()
}

// restart kills process i and starts a new one at its address.
func (c *procCluster) restart(i int) {
	c.procs[i].Kill()
	c.procs[i] = spawn(c.t, c.addrs[i], c.seedsFor(c.addrs[i]), c.timings)
}

func (c *procCluster) ids() []ring.NodeID {
	var ids []ring.NodeID
	for _, p := range c.procs {
		ids = append(ids, p.ID())
	}
	return ids
}

func (c *procCluster) others(skip int) []*proc {
	var out []*proc
	for i, p := range c.procs {
		if i != skip {
			out = append(out, p)
		}
	}
	return out
}

func describeProcs(ps []*proc, ids []ring.NodeID) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.describe(ids))
	}
	return b.String()
}

func allProcsSee(ps []*proc, ids func() []ring.NodeID, want ...Status) func() bool {
	return func() bool {
		ids := ids()
		for _, id := range ids {
			if id.IsZero() {
				return false
			}
		}
		for _, p := range ps {
			if !p.sees(ids, want...) {
				return false
			}
		}
		return true
	}
}

// waitConverged waits until every process sees every process alive and
// returns how long that took.
func (c *procCluster) waitConverged(t testing.TB, bound time.Duration) time.Duration {
	t.Helper()
	return waitUntil(t, bound, "every process to see every process alive",
		allProcsSee(c.procs, c.ids, StatusAlive), func() string { return describeProcs(c.procs, c.ids()) })
}

// killAndMeasure kills process i with SIGKILL and returns how long after
// the kill the last survivor first saw it dead.
func (c *procCluster) killAndMeasure(t testing.TB, i int, bound time.Duration) time.Duration {
	t.Helper()
	victim := c.procs[i].ID()
	survivors := c.others(i)
	killedAt := time.Now()
	c.procs[i].Kill()
	waitUntil(t, bound, "every survivor to see the killed process dead",
		allProcsSee(survivors, func() []ring.NodeID { return []ring.NodeID{victim} }, StatusDead, StatusLeft),
		func() string { return describeProcs(survivors, []ring.NodeID{victim}) })
	var last time.Duration
	for _, p := range survivors {
		at, _ := p.firstSaw(victim, StatusDead, StatusLeft)
		last = max(last, at.Sub(killedAt))
	}
	return last
}

// sendSignal sends sig to p, failing the test if it cannot.
func sendSignal(t testing.TB, p *proc, sig os.Signal) {
	t.Helper()
	if err := p.Signal(sig); err != nil {
		t.Fatalf("send %v to %s: %v", sig, p.addr, err)
	}
}

func TestProcessesJoinDetectKillSurvivePauseAndRejoin(t *testing.T) {
	c := startProcs(t, 5, "fast")
	took := c.waitConverged(t, wideBound)
	t.Logf("5 processes: full view everywhere %v after spawning", took.Round(time.Millisecond))
	fast := cluster.FastTimings()

	t.Run("kill -9 is seen as dead by every survivor", func(t *testing.T) {
		d := c.killAndMeasure(t, 4, wideBound)
		t.Logf("kill -9 to dead at every survivor: %v (SuspectAfter+DeadAfter = %v)", d.Round(time.Millisecond), fast.SuspectAfter+fast.DeadAfter)
		for _, p := range c.others(4) {
			p.mu.Lock()
			owning := p.owning
			p.mu.Unlock()
			if !owning {
				t.Errorf("expected %s to keep owning with 4 of 5 alive", p.addr)
			}
		}
	})

	t.Run("a process restarted at the same address rejoins", func(t *testing.T) {
		old := c.procs[4].ID()
		c.restart(4)
		took := c.waitConverged(t, wideBound)
		if c.procs[4].ID() == old {
			t.Fatalf("expected a new process incarnation, got %v again", old)
		}
		t.Logf("restart to full view everywhere: %v", took.Round(time.Millisecond))
	})

	t.Run("SIGSTOP shorter than DeadAfter is not death", func(t *testing.T) {
		victim := c.procs[3]
		id := victim.ID()
		pause := fast.DeadAfter * 8 / 10
		sendSignal(t, victim, syscall.SIGSTOP)
		time.Sleep(pause)
		sendSignal(t, victim, syscall.SIGCONT)
		// Give every survivor time to reach a verdict if one were coming.
		time.Sleep(2 * (fast.SuspectAfter + fast.DeadAfter))
		for _, p := range c.others(3) {
			if at, ok := p.firstSaw(id, StatusDead, StatusLeft); ok {
				t.Errorf("expected %s never to declare the paused process dead; it did at %v", p.addr, at)
			}
		}
		c.waitConverged(t, wideBound)
	})

	t.Run("a process paused past its death verdict refutes it when resumed", func(t *testing.T) {
		victim := c.procs[2]
		id := victim.ID()
		survivors := c.others(2)
		sendSignal(t, victim, syscall.SIGSTOP)
		waitUntil(t, wideBound, "every survivor to declare the paused process dead",
			allProcsSee(survivors, func() []ring.NodeID { return []ring.NodeID{id} }, StatusDead),
			func() string { return describeProcs(survivors, []ring.NodeID{id}) })
		sendSignal(t, victim, syscall.SIGCONT)
		took := c.waitConverged(t, wideBound)
		if c.procs[2].ID() != id {
			t.Fatalf("expected the same process to come back, got %v", c.procs[2].ID())
		}
		t.Logf("resumed to alive again everywhere: %v (RemoveAfter %v)", took.Round(time.Millisecond), fast.RemoveAfter)
	})
}

func TestTwentyProcessesJoiningAtOnceConverge(t *testing.T) {
	if testing.Short() {
		t.Skip("20 processes: skipped in -short")
	}
	c := startProcs(t, 20, "fast")
	took := c.waitConverged(t, 2*wideBound)
	j := c.joinFigures()
	t.Logf("20 processes spawned at once: full view everywhere %v after spawning; %s", took.Round(time.Millisecond), j)
}

// joinFigure is how a join at once went, from the processes' own clocks.
type joinFigure struct {
	lastStart   time.Duration // spawn of the first to start of the last process
	fullView    time.Duration // start of the last process to full view at the last
	maxPerNode  time.Duration // the longest any process took from its own start to its full view
	medPerNode  time.Duration
	perNodeFull []time.Duration
}

func (j joinFigure) String() string {
	return fmt.Sprintf("processes started over %v; from the last start to full view at every process %v; per process, own start to full view: median %v, max %v",
		j.lastStart.Round(time.Millisecond), j.fullView.Round(time.Millisecond), j.medPerNode.Round(time.Millisecond), j.maxPerNode.Round(time.Millisecond))
}

// joinFigures reads, from each process's report, when it started and when
// it first saw every process alive.
func (c *procCluster) joinFigures() joinFigure {
	ids := c.ids()
	var first, last, lastFull time.Time
	var j joinFigure
	for _, p := range c.procs {
		p.mu.Lock()
		st := p.started
		var full time.Time
		for _, id := range ids {
			at := p.firstAt[id][StatusAlive]
			if at.After(full) {
				full = at
			}
		}
		p.mu.Unlock()
		if first.IsZero() || st.Before(first) {
			first = st
		}
		if st.After(last) {
			last = st
		}
		if full.After(lastFull) {
			lastFull = full
		}
		j.perNodeFull = append(j.perNodeFull, full.Sub(st))
	}
	slices.Sort(j.perNodeFull)
	j.lastStart = last.Sub(first)
	j.fullView = lastFull.Sub(last)
	j.maxPerNode = j.perNodeFull[len(j.perNodeFull)-1]
	j.medPerNode = j.perNodeFull[len(j.perNodeFull)/2]
	return j
}

// Figures for BENCHMARKS.md. They run only with TROUPE_FIGURES=1:
//
//	TROUPE_FIGURES=1 go test -race -run '^TestFigures' -v -timeout 30m ./internal/membership/
//
// TROUPE_FIGURES_TIMINGS picks the timings (see parseTimings; default
// fast), TROUPE_FIGURES_N the cluster size for detection (default 5),
// TROUPE_FIGURES_TRIALS the kill trials (default 30), TROUPE_FIGURES_BUDGET
// the time they may take (default 2m), TROUPE_FIGURES_JOIN the sizes of the
// joins at once (default 20,50) and TROUPE_FIGURES_JOIN_RUNS their
// repetitions (default 3).

func figuresOnly(t *testing.T) {
	if os.Getenv(envFigures) != "1" {
		t.Skip("figures run only with " + envFigures + "=1")
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func TestFiguresKillToDeadAtEverySurvivor(t *testing.T) {
	figuresOnly(t)
	timings := envOr("TROUPE_FIGURES_TIMINGS", "fast")
	n, _ := strconv.Atoi(envOr("TROUPE_FIGURES_N", "5"))
	trials, _ := strconv.Atoi(envOr("TROUPE_FIGURES_TRIALS", "30"))
	budget, _ := time.ParseDuration(envOr("TROUPE_FIGURES_BUDGET", "2m"))
	tm, err := parseTimings(timings)
	if err != nil {
		t.Fatal(err)
	}
	c := startProcs(t, n, timings)
	c.waitConverged(t, 2*wideBound)
	bound := 10 * (tm.SuspectAfter + tm.DeadAfter + 10*tm.Heartbeat)
	var ds []time.Duration
	start := time.Now()
	for trial := 0; trial < trials && time.Since(start) < budget; trial++ {
		victim := trial % n
		ds = append(ds, c.killAndMeasure(t, victim, bound))
		c.restart(victim)
		c.waitConverged(t, 2*wideBound)
		// Let the restarted process settle into the overlay.
		time.Sleep(2 * tm.Heartbeat)
	}
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	t.Logf("kill -9 to dead at every survivor, %d processes, timings %s (heartbeat %v, suspect %v, dead %v): %d trials in %v: p50 %v, p99 %v, min %v, max %v; all: %v",
		n, timings, tm.Heartbeat, tm.SuspectAfter, tm.DeadAfter, len(ds), time.Since(start).Round(time.Second),
		percentile(sorted, 0.5).Round(time.Millisecond), percentile(sorted, 0.99).Round(time.Millisecond),
		sorted[0].Round(time.Millisecond), sorted[len(sorted)-1].Round(time.Millisecond), roundAll(ds))
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}

func TestFiguresProcessesJoiningAtOnce(t *testing.T) {
	figuresOnly(t)
	timings := envOr("TROUPE_FIGURES_TIMINGS", "fast")
	runs, _ := strconv.Atoi(envOr("TROUPE_FIGURES_JOIN_RUNS", "3"))
	for _, s := range strings.Split(envOr("TROUPE_FIGURES_JOIN", "20,50"), ",") {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		for run := range runs {
			t.Run(fmt.Sprintf("%d processes run %d", n, run), func(t *testing.T) {
				c := startProcs(t, n, timings)
				took := c.waitConverged(t, 4*wideBound)
				t.Logf("%d processes spawned at once, timings %s: full view everywhere %v after spawning; %s",
					n, timings, took.Round(time.Millisecond), c.joinFigures())
			})
		}
	}
}

// TestFiguresNoFalseDeadUnderStarvation runs an in-process cluster the
// way the memberlist anchor was measured: GOMAXPROCS=1, 64 busy goroutines
// and two external CPU hogs (child processes spinning), and counts death
// verdicts about members that are all alive. TROUPE_FIGURES_STARVE sets the
// duration (default 60s; the issue asks 10m), TROUPE_FIGURES_TIMINGS the
// timings (default 1s,2s,2s, comparable to memberlist's LocalConfig).
func TestFiguresNoFalseDeadUnderStarvation(t *testing.T) {
	figuresOnly(t)
	d, err := time.ParseDuration(envOr("TROUPE_FIGURES_STARVE", "60s"))
	if err != nil {
		t.Fatal(err)
	}
	timings := envOr("TROUPE_FIGURES_TIMINGS", "1s,2s,2s")
	tm, err := parseTimings(timings)
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	lns := make([]net.Listener, n)
	addrs := make([]string, n)
	for i := range lns {
		lns[i] = listenLoopback(t)
		addrs[i] = lns[i].Addr().String()
	}
	c := &testCluster{t: t, nodes: make([]*wireNode, n)}
	t.Cleanup(c.closeAll)
	ctx, cancel := context.WithTimeout(t.Context(), 2*wideBound)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			c.nodes[i], errs[i] = startWireNode(ctx, wireNodeOptions{ln: lns[i], seeds: addrs[:3], timings: tm})
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	ids := c.ids()
	waitUntil(t, 2*wideBound, "convergence", allSee(c.nodes, ids, StatusAlive), func() string { return views(c.nodes, ids) })

	var mu sync.Mutex
	counts := map[Status]int{}
	var subsDone sync.WaitGroup
	for _, w := range c.nodes {
		sub := w.node.Subscribe(1 << 14)
		defer sub.Close()
		subsDone.Go(func() {
			for e := range sub.Events() {
				if e.Kind == EventMemberUpdated && e.Member.ID != w.node.ID() {
					mu.Lock()
					counts[e.Member.Status]++
					mu.Unlock()
				}
			}
		})
	}

	// Starve: two spinning child processes, one P, 64 spinning goroutines.
	hogs := []*proctest.Proc{proctest.Start(t, proctest.Spec{Role: "hog"}), proctest.Start(t, proctest.Spec{Role: "hog"})}
	defer func() {
		for _, h := range hogs {
			h.Kill()
		}
	}()
	prev := runtime.GOMAXPROCS(1)
	var stop atomic.Bool
	var spin sync.WaitGroup
	for range 64 {
		spin.Go(func() {
			for !stop.Load() {
			}
		})
	}
	// Measure how late a timer fires meanwhile.
	var late time.Duration
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		at := time.Now()
		time.Sleep(100 * time.Millisecond)
		late = max(late, time.Since(at)-100*time.Millisecond)
	}
	stop.Store(true)
	spin.Wait()
	runtime.GOMAXPROCS(prev)
	// Let verdicts reached during the starvation arrive.
	time.Sleep(tm.SuspectAfter + tm.DeadAfter)
	for _, w := range c.nodes {
		w.node.Close()
	}
	subsDone.Wait()
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d members, timings %s, %v of starvation (GOMAXPROCS=1, 64 spinning goroutines, 2 hog processes; a 100ms sleep woke up to %v late): false dead %d, false left %d, suspicions %d, refutations to alive %d",
		n, timings, d, late.Round(time.Millisecond), counts[StatusDead], counts[StatusLeft], counts[StatusSuspect], counts[StatusAlive])
	if counts[StatusDead] > 0 || counts[StatusLeft] > 0 {
		t.Errorf("expected no member to be declared dead or removed while all were alive; got %d dead and %d left verdicts", counts[StatusDead], counts[StatusLeft])
	}
}

// runHog is the body of the role "hog": it spins one CPU until its stdin
// closes, for the starvation figure.
func runHog() int {
	var done atomic.Bool
	go func() {
		io.Copy(io.Discard, os.Stdin)
		done.Store(true)
	}()
	deadline := time.Now().Add(30 * time.Minute)
	for !done.Load() && time.Now().Before(deadline) {
	}
	return 0
}
