package membership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/transport"
	"github.com/troupe-go/troupe/ring"

	"github.com/troupe-go/troupe/wire"

	"github.com/troupe-go/troupe/cluster"
)

// The tests in this file run real clusters in one process: every member
// has its own wire transport on a loopback TCP listener, and FastTimings.

// wideBound is the generous upper bound every wait in these tests uses:
// far above what the timings need, so that a loaded machine slows a test
// rather than failing it.
const wideBound = 30 * time.Second

// testLogger logs to stderr when TROUPE_TEST_LOG is set, and nowhere
// otherwise.
func testLogger() *slog.Logger {
	if os.Getenv("TROUPE_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// crashNet makes a member's sockets crashable: crash closes its listener
// and resets every connection it accepted or dialed, and fails its later
// dials, as kill -9 would (no goodbye reaches anyone).
type crashNet struct {
	mu      sync.Mutex
	crashed bool
	ln      net.Listener
	conns   []net.Conn
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)
}

func (c *crashNet) track(conn net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.crashed {
		return false
	}
	c.conns = append(c.conns, conn)
	return true
}

func (c *crashNet) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := c.dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if !c.track(conn) {
		conn.Close()
		return nil, errors.New("crashed")
	}
	return conn, nil
}

func (c *crashNet) Accept() (net.Conn, error) {
	for {
		conn, err := c.ln.Accept()
		if err != nil {
			return nil, err
		}
		if c.track(conn) {
			return conn, nil
		}
		conn.Close()
	}
}

func (c *crashNet) Close() error   { return c.ln.Close() }
func (c *crashNet) Addr() net.Addr { return c.ln.Addr() }

func (c *crashNet) crash() {
	c.mu.Lock()
	c.crashed = true
	conns := c.conns
	c.conns = nil
	c.mu.Unlock()
	c.ln.Close()
	for _, conn := range conns {
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		conn.Close()
	}
}

// wireNode is one member in this process: a wire transport, the
// membership adapter over it, and the Node.
type wireNode struct {
	addr  string
	wt    *transport.Transport
	mt    *WireTransport
	node  *Node
	cn    *crashNet
	serve chan struct{}
	once  sync.Once
}

type wireNodeOptions struct {
	ln      net.Listener // required; its address is advertised
	seeds   []string
	timings Timings
	// dial replaces the net.Dialer (a netns host's dialer, say).
	dial     func(ctx context.Context, network, addr string) (net.Conn, error)
	handover func(ctx context.Context) error
	logger   *slog.Logger
	ttl      time.Duration // WireOptions.MessageTTL; zero: the default
}

// startWireNode starts a member and waits until it has joined.
func startWireNode(ctx context.Context, o wireNodeOptions) (*wireNode, error) {
	addr := o.ln.Addr().String()
	dial := o.dial
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	cn := &crashNet{ln: o.ln, dial: dial}
	logger := o.logger
	if logger == nil {
		logger = testLogger()
	}
	wt, err := transport.New(wire.Config{ClusterName: "troupe", Advertise: addr, Dialer: cn, Logger: logger})
	if err != nil {
		o.ln.Close()
		return nil, err
	}
	mt := NewWireTransport(wt, WireOptions{Logger: logger, MessageTTL: o.ttl})
	w := &wireNode{addr: addr, wt: wt, mt: mt, cn: cn, serve: make(chan struct{})}
	go func() {
		defer close(w.serve)
		wt.Serve(cn)
	}()
	cfg := cluster.FastConfig(addr)
	if o.timings != (Timings{}) {
		cfg.Timings = o.timings
	}
	cfg.Seeds = o.seeds
	cfg.Logger = logger
	var opts []NodeOption
	if o.handover != nil {
		opts = append(opts, WithHandover(o.handover))
	}
	w.node, err = Start(ctx, cfg, mt, opts...)
	if err != nil {
		w.close()
		return nil, err
	}
	return w, nil
}

// close stops the member; with a goodbye on the wire unless it crashed.
func (w *wireNode) close() {
	w.once.Do(func() {
		if w.node != nil {
			w.node.Close()
		}
		w.mt.Close()
		w.wt.Close()
		<-w.serve
	})
}

// crash cuts the member off as kill -9 would, then releases what it held.
func (w *wireNode) crash() {
	w.cn.crash()
	w.close()
}

// testCluster is a set of in-process members.
type testCluster struct {
	t     testing.TB
	nodes []*wireNode
}

func listenLoopback(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// startCluster starts n members at once, each seeded with the first
// three addresses, and waits until every one has joined.
func startCluster(t testing.TB, n int) *testCluster {
	t.Helper()
	lns := make([]net.Listener, n)
	addrs := make([]string, n)
	for i := range lns {
		lns[i] = listenLoopback(t)
		addrs[i] = lns[i].Addr().String()
	}
	seeds := addrs[:min(3, n)]
	c := &testCluster{t: t, nodes: make([]*wireNode, n)}
	t.Cleanup(c.closeAll)
	ctx, cancel := context.WithTimeout(t.Context(), wideBound)
	defer cancel()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c.nodes[i], errs[i] = startWireNode(ctx, wireNodeOptions{ln: lns[i], seeds: seeds})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("expected every member to join, got %v", err)
	}
	return c
}

func (c *testCluster) closeAll() {
	var wg sync.WaitGroup
	for _, w := range c.nodes {
		if w != nil {
			wg.Go(w.close)
		}
	}
	wg.Wait()
}

func (c *testCluster) ids() []ring.NodeID {
	var ids []ring.NodeID
	for _, w := range c.nodes {
		ids = append(ids, w.node.ID())
	}
	return ids
}

// without returns the members other than those at the given indexes.
func (c *testCluster) without(skip ...int) []*wireNode {
	var out []*wireNode
	for i, w := range c.nodes {
		if !slices.Contains(skip, i) {
			out = append(out, w)
		}
	}
	return out
}

// waitUntil polls cond until it holds, failing the test after bound with
// a message saying what was expected and what describe reports. It
// returns how long it took.
func waitUntil(t testing.TB, bound time.Duration, what string, cond func() bool, describe func() string) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > bound {
			t.Fatalf("expected %s within %v; %s", what, bound, describe())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

// sees reports whether n's record of every id has a status in want.
func sees(n *Node, ids []ring.NodeID, want ...Status) bool {
	for _, id := range ids {
		m, ok := n.Member(id)
		if !ok || !slices.Contains(want, m.Status) {
			return false
		}
	}
	return true
}

// views describes what each node holds about ids, for failure messages.
func views(nodes []*wireNode, ids []ring.NodeID) string {
	var b strings.Builder
	for _, w := range nodes {
		fmt.Fprintf(&b, "\n  %s sees:", w.addr)
		for _, id := range ids {
			if m, ok := w.node.Member(id); ok {
				fmt.Fprintf(&b, " %s", m)
			} else {
				fmt.Fprintf(&b, " %s:unknown", id)
			}
		}
	}
	return b.String()
}

func allSee(nodes []*wireNode, ids []ring.NodeID, want ...Status) func() bool {
	return func() bool {
		for _, w := range nodes {
			if !sees(w.node, ids, want...) {
				return false
			}
		}
		return true
	}
}

func TestClusterOverWireConvergesWithEveryMemberAlive(t *testing.T) {
	for _, n := range []int{3, 5, 10} {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) {
			start := time.Now()
			c := startCluster(t, n)
			ids := c.ids()
			waitUntil(t, wideBound, "every member to see every member alive",
				allSee(c.nodes, ids, StatusAlive), func() string { return views(c.nodes, ids) })
			t.Logf("%d nodes: full view everywhere %v after start", n, time.Since(start).Round(time.Millisecond))
			for _, w := range c.nodes {
				if !w.node.Owning() {
					t.Errorf("expected %s to own actors in a healthy cluster", w.addr)
				}
				if got := len(w.node.MemberSet()); got != n {
					t.Errorf("expected %s's member set to have %d members, got %d", w.addr, n, got)
				}
			}
		})
	}
}

func TestCrashedMemberIsDeclaredDeadByEverySurvivor(t *testing.T) {
	for _, n := range []int{3, 5, 10} {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) {
			c := startCluster(t, n)
			ids := c.ids()
			waitUntil(t, wideBound, "convergence", allSee(c.nodes, ids, StatusAlive), func() string { return views(c.nodes, ids) })
			victim := c.nodes[n-1]
			survivors := c.without(n - 1)
			victim.crash()
			took := waitUntil(t, wideBound, "every survivor to declare the crashed member dead",
				allSee(survivors, []ring.NodeID{victim.node.ID()}, StatusDead, StatusLeft),
				func() string { return views(survivors, []ring.NodeID{victim.node.ID()}) })
			t.Logf("%d nodes: crash to dead at every survivor: %v (SuspectAfter+DeadAfter = %v)",
				n, took.Round(time.Millisecond), cluster.FastTimings().SuspectAfter+cluster.FastTimings().DeadAfter)
			// A loaded machine may delay a survivor enough to be suspected
			// for a moment; it refutes.
			waitUntil(t, wideBound, "every survivor to see every survivor alive and to own",
				func() bool {
					for _, w := range survivors {
						if !sees(w.node, ids[:n-1], StatusAlive) || !w.node.Owning() {
							return false
						}
					}
					return true
				}, func() string { return views(survivors, ids) })
		})
	}
}

func TestRestartedMemberRejoinsAtTheSameAddress(t *testing.T) {
	for _, wait := range []bool{true, false} {
		name := "after the cluster declared it dead"
		if !wait {
			name = "before anyone noticed the crash"
		}
		t.Run(name, func(t *testing.T) {
			c := startCluster(t, 5)
			ids := c.ids()
			waitUntil(t, wideBound, "convergence", allSee(c.nodes, ids, StatusAlive), func() string { return views(c.nodes, ids) })
			old := c.nodes[4]
			survivors := c.without(4)
			old.crash()
			if wait {
				waitUntil(t, wideBound, "the crash to be detected", allSee(survivors, ids[4:], StatusDead, StatusLeft),
					func() string { return views(survivors, ids[4:]) })
			}
			ln, err := net.Listen("tcp", old.addr)
			if err != nil {
				t.Fatalf("expected to listen again on %s: %v", old.addr, err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), wideBound)
			defer cancel()
			seeds := []string{c.nodes[0].addr, c.nodes[1].addr}
			fresh, err := startWireNode(ctx, wireNodeOptions{ln: ln, seeds: seeds})
			if err != nil {
				t.Fatalf("expected the restarted member to join: %v", err)
			}
			c.nodes[4] = fresh
			if fresh.node.ID().Incarnation <= old.node.ID().Incarnation {
				t.Fatalf("expected a new, higher process incarnation; old %v, new %v", old.node.ID(), fresh.node.ID())
			}
			now := c.ids()
			took := waitUntil(t, wideBound, "every member to see the new process alive and the old one gone",
				func() bool {
					return allSee(c.nodes, now, StatusAlive)() && allSee(survivors, ids[4:], StatusDead, StatusLeft)()
				},
				func() string { return views(c.nodes, append(now, ids[4])) })
			t.Logf("restart to full view: %v", took.Round(time.Millisecond))
		})
	}
}

func TestOrderlyLeaveIsSeenAsLeftNotDead(t *testing.T) {
	lns := []net.Listener{listenLoopback(t), listenLoopback(t), listenLoopback(t), listenLoopback(t)}
	seeds := []string{lns[0].Addr().String()}
	c := &testCluster{t: t}
	t.Cleanup(c.closeAll)
	ctx, cancel := context.WithTimeout(t.Context(), wideBound)
	defer cancel()
	var leaver *wireNode
	var statusDuringHandover Status
	handover := func(ctx context.Context) error {
		statusDuringHandover = leaver.node.mustSelf().Status
		return nil
	}
	for i, ln := range lns {
		o := wireNodeOptions{ln: ln, seeds: seeds}
		if i == 3 {
			o.handover = handover
		}
		w, err := startWireNode(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		c.nodes = append(c.nodes, w)
	}
	leaver = c.nodes[3]
	ids := c.ids()
	waitUntil(t, wideBound, "convergence", allSee(c.nodes, ids, StatusAlive), func() string { return views(c.nodes, ids) })

	stayers := c.without(3)
	subs := make([]*Subscription, len(stayers))
	for i, w := range stayers {
		subs[i] = w.node.Subscribe(1024)
	}
	if err := leaver.node.Leave(ctx); err != nil {
		t.Fatalf("expected Leave to succeed: %v", err)
	}
	if statusDuringHandover != StatusLeaving {
		t.Errorf("expected the handover hook to run while the record is leaving, it was %v", statusDuringHandover)
	}
	if !leaver.node.Removed() || leaver.node.Owning() {
		t.Errorf("expected the leaver to be removed and to own nothing; removed=%v owning=%v", leaver.node.Removed(), leaver.node.Owning())
	}
	leaver.close()
	waitUntil(t, wideBound, "every remaining member to see the leaver left",
		allSee(stayers, ids[3:], StatusLeft), func() string { return views(stayers, ids[3:]) })
	for i, s := range subs {
		s.Close()
		for e := range s.Events() {
			if e.Kind == EventMemberUpdated && e.Member.ID == ids[3] && (e.Member.Status == StatusDead || e.Member.Status == StatusSuspect) {
				t.Errorf("expected %s never to suspect the leaver, got %v", stayers[i].addr, e.Member)
			}
		}
	}
	for _, w := range stayers {
		if got := len(w.node.MemberSet()); got != 3 {
			t.Errorf("expected %s's member set to drop the leaver (3 members), got %d", w.addr, got)
		}
	}
}

// mustSelf returns the node's own record from its view.
func (n *Node) mustSelf() Member {
	m, _ := n.Member(n.ID())
	return m
}

// The tests below use the transport's in-memory network: they check the Node's own
// contract, not the network.

func memNode(t *testing.T, net *transport.MemNetwork, addr string, seeds ...string) (*WireTransport, Config) {
	t.Helper()
	ep, err := net.Join(ring.NodeID{Addr: addr, Incarnation: uint64(time.Now().UnixNano())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ep.Close() })
	mt := NewWireTransport(ep, WireOptions{})
	t.Cleanup(func() { mt.Close() })
	cfg := cluster.FastConfig(addr)
	cfg.Seeds = seeds
	return mt, cfg
}

func TestStartWithoutSeedsOwnsAtOnce(t *testing.T) {
	mt, cfg := memNode(t, transport.NewMemNetwork(), "10.0.0.1:7400")
	n, err := Start(t.Context(), cfg, mt)
	if err != nil {
		t.Fatalf("expected a seedless node to start: %v", err)
	}
	defer n.Close()
	if !n.Owning() || len(n.MemberSet()) != 1 || n.ID().Incarnation != mt.Self().Incarnation {
		t.Errorf("expected a one-member cluster owning at once with the transport's incarnation; owning=%v set=%v id=%v",
			n.Owning(), n.MemberSet(), n.ID())
	}
}

func TestStartGivesUpWhenNoSeedAnswersBeforeTheContextEnds(t *testing.T) {
	mt, cfg := memNode(t, transport.NewMemNetwork(), "10.0.0.1:7400", "10.0.0.9:7400")
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	n, err := Start(ctx, cfg, mt)
	if !errors.Is(err, context.DeadlineExceeded) || n != nil {
		t.Fatalf("expected Start to fail with the context's deadline, got %v", err)
	}
}

func TestStartRefusesATransportOfAnotherAddress(t *testing.T) {
	mt, cfg := memNode(t, transport.NewMemNetwork(), "10.0.0.1:7400")
	cfg.Advertise = "10.0.0.2:7400"
	if _, err := Start(t.Context(), cfg, mt); !errors.Is(err, ErrIdentityMismatch) {
		t.Fatalf("expected ErrIdentityMismatch, got %v", err)
	}
}

func TestNodeJoinsThroughASeedOnTheMemoryNetwork(t *testing.T) {
	mn := transport.NewMemNetwork()
	ctx, cancel := context.WithTimeout(t.Context(), wideBound)
	defer cancel()
	mtA, cfgA := memNode(t, mn, "10.0.0.1:7400")
	a, err := Start(ctx, cfgA, mtA)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	mtB, cfgB := memNode(t, mn, "10.0.0.2:7400", "10.0.0.1:7400")
	sub := a.Subscribe(16)
	b, err := Start(ctx, cfgB, mtB)
	if err != nil {
		t.Fatalf("expected b to join through a: %v", err)
	}
	defer b.Close()
	select {
	case e := <-sub.Events():
		if e.Kind != EventMemberUpdated || e.Member.ID != b.ID() || !e.New {
			t.Errorf("expected a's first event to report b as new, got %v %v", e.Kind, e.Member)
		}
	case <-ctx.Done():
		t.Fatal("expected a to report b")
	}
	sub.Close()
	if _, ok := <-sub.Events(); ok {
		t.Error("expected a closed subscription's channel to be closed")
	}
}

func TestSlowSubscriberMissesEventsWithoutBlockingTheLoop(t *testing.T) {
	mn := transport.NewMemNetwork()
	ctx, cancel := context.WithTimeout(t.Context(), wideBound)
	defer cancel()
	mtA, cfgA := memNode(t, mn, "10.0.0.1:7400")
	a, err := Start(ctx, cfgA, mtA)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	sub := a.Subscribe(1) // never read
	var others []*Node
	for i := range 3 {
		mt, cfg := memNode(t, mn, fmt.Sprintf("10.0.0.%d:7400", i+2), "10.0.0.1:7400")
		n, err := Start(ctx, cfg, mt)
		if err != nil {
			t.Fatalf("expected joins to proceed while a subscriber sleeps: %v", err)
		}
		defer n.Close()
		others = append(others, n)
	}
	for _, o := range others {
		waitUntil(t, wideBound, "a to see every joiner", func() bool { return sees(a, []ring.NodeID{o.ID()}, StatusAlive) }, func() string { return "" })
	}
	if sub.Missed() == 0 {
		t.Error("expected the full subscription to count missed events")
	}
}

func TestCallsAfterCloseFailWithErrNodeClosed(t *testing.T) {
	mt, cfg := memNode(t, transport.NewMemNetwork(), "10.0.0.1:7400")
	n, err := Start(t.Context(), cfg, mt)
	if err != nil {
		t.Fatal(err)
	}
	n.Close()
	n.Close() // idempotent
	if err := n.Leave(t.Context()); !errors.Is(err, ErrNodeClosed) {
		t.Errorf("expected Leave after Close to fail with ErrNodeClosed, got %v", err)
	}
	if err := n.Deliver(t.Context(), Message{}); !errors.Is(err, ErrNodeClosed) {
		t.Errorf("expected Deliver after Close to fail with ErrNodeClosed, got %v", err)
	}
	if _, ok := <-n.Subscribe(1).Events(); ok {
		t.Error("expected a subscription taken after Close to be closed")
	}
}

func TestFailedHandoverLeavesTheNodeLeavingAndLeaveCanBeRetried(t *testing.T) {
	mt, cfg := memNode(t, transport.NewMemNetwork(), "10.0.0.1:7400")
	fail := true
	n, err := Start(t.Context(), cfg, mt, WithHandover(func(context.Context) error {
		if fail {
			return errors.New("range transfer failed")
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if err := n.Leave(t.Context()); err == nil {
		t.Fatal("expected Leave to report the failed handover")
	}
	waitUntil(t, wideBound, "the view to show leaving", func() bool { return n.mustSelf().Status == StatusLeaving }, func() string { return n.mustSelf().String() })
	fail = false
	if err := n.Leave(t.Context()); err != nil {
		t.Fatalf("expected the retried Leave to succeed: %v", err)
	}
	if !n.Removed() {
		t.Error("expected the node to be removed after Leave")
	}
}

// The left record queued for a neighbour that died silently is never
// taken; Leave must not wait for it. The message TTL is set to wideBound
// so that a Leave which waited for the dead neighbour would take it all,
// far beyond the heartbeat that bounds the flush.
func TestLeaveDoesNotWaitForANeighbourThatDiedSilently(t *testing.T) {
	const ttl = wideBound
	lns := []net.Listener{listenLoopback(t), listenLoopback(t), listenLoopback(t)}
	c := &testCluster{t: t}
	t.Cleanup(c.closeAll)
	for _, ln := range lns {
		w, err := startWireNode(t.Context(), wireNodeOptions{ln: ln, seeds: []string{lns[0].Addr().String()}, ttl: ttl})
		if err != nil {
			t.Fatal(err)
		}
		c.nodes = append(c.nodes, w)
	}
	ids := c.ids()
	waitUntil(t, wideBound, "convergence", allSee(c.nodes, ids, StatusAlive), func() string { return views(c.nodes, ids) })
	c.nodes[2].crash()
	ctx, cancel := context.WithTimeout(t.Context(), 2*ttl)
	defer cancel()
	start := time.Now()
	if err := c.nodes[0].node.Leave(ctx); err != nil {
		t.Fatalf("expected Leave to complete although a neighbour is gone: %v", err)
	}
	if took := time.Since(start); took >= ttl/2 {
		t.Errorf("expected Leave to give up on the dead neighbour after about a heartbeat (%v), not wait for its message (TTL %v); it took %v",
			cluster.FastTimings().Heartbeat, ttl, took)
	}
	waitUntil(t, wideBound, "the live member to see the leaver left",
		allSee(c.nodes[1:2], ids[:1], StatusLeft), func() string { return views(c.nodes[1:2], ids[:1]) })
}

// ExampleStart runs two members over the transport's in-memory network: the second
// joins through the first, and both then see two members alive.
func ExampleStart() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	network := transport.NewMemNetwork()
	start := func(addr string, inc uint64, seeds ...string) (*Node, func()) {
		ep, _ := network.Join(ring.NodeID{Addr: addr, Incarnation: inc})
		tr := NewWireTransport(ep, WireOptions{})
		cfg := cluster.FastConfig(addr)
		cfg.Seeds = seeds
		n, err := Start(ctx, cfg, tr)
		if err != nil {
			panic(err)
		}
		return n, func() { n.Close(); tr.Close(); ep.Close() }
	}
	a, stopA := start("10.0.0.1:7400", 1)
	defer stopA()
	b, stopB := start("10.0.0.2:7400", 1, "10.0.0.1:7400")
	defer stopB()
	// Bounded by ctx: a member that never sees the other fails the
	// example's output rather than hanging it.
	for ctx.Err() == nil && !sees(a, []ring.NodeID{b.ID()}, StatusAlive) {
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println(len(a.MemberSet()), len(b.MemberSet()), a.Owning(), b.Owning())
	// Output: 2 2 true true
}
