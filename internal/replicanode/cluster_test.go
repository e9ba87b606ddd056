package replicanode

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/replica"
	"github.com/troupe-go/troupe/internal/replicastore"
	"github.com/troupe-go/troupe/internal/transport"
	"github.com/troupe-go/troupe/replication"
	"github.com/troupe-go/troupe/ring"
)

// waitFor bounds every wait in these tests: a healthy in-memory cluster
// answers in milliseconds, so reaching it means something is stuck.
const waitFor = 10 * time.Second

var stateSlot = replica.Slot{Kind: replica.KindState}

// testCluster is a few nodes over a MemNetwork. A member keeps its store
// across restarts: a Badger directory, or a Memory store standing for a
// process killed with its writes in the page cache.
type testCluster struct {
	t testing.TB
	// mu guards the members' fields that a restart changes (inc, ep,
	// node), for tests whose clients run beside a nemesis.
	mu      sync.Mutex
	net     *transport.MemNetwork
	members []*member
	badger  bool
	// manual: the nodes tick only when a test sends on member.ticks.
	manual bool
	// wrap, when set, stands between a member and its endpoint.
	wrap func(*member, transport.Endpoint) transport.Endpoint
	// configure, when set, adjusts a member's config at each start.
	configure func(*Config)
}

type member struct {
	addr  string
	inc   uint64
	ep    *transport.MemEndpoint
	node  *Node
	dir   string
	store replicastore.Store // Memory stores only
	ticks chan struct{}
}

func newCluster(t testing.TB, n int, useBadger bool) *testCluster {
	c := &testCluster{t: t, net: transport.NewMemNetwork(), badger: useBadger}
	for i := range n {
		m := &member{addr: fmt.Sprintf("n%d", i)}
		if useBadger {
			m.dir = filepath.Join(t.TempDir(), m.addr)
		} else {
			m.store = replicastore.NewMemory()
		}
		c.members = append(c.members, m)
		c.start(m)
	}
	t.Cleanup(c.stopAll)
	return c
}

func (c *testCluster) config(m *member) Config {
	var ep transport.Endpoint = m.ep
	if c.wrap != nil {
		ep = c.wrap(m, ep)
	}
	cfg := Config{Endpoint: ep, TickEvery: 20 * time.Millisecond}
	if c.badger {
		cfg.Replication = replication.Config{DataDir: m.dir}
	} else {
		cfg.Store = m.store
	}
	if c.configure != nil {
		c.configure(&cfg)
	}
	if c.manual {
		m.ticks = make(chan struct{})
		cfg = withManualTicks(cfg, m.ticks)
	}
	return cfg
}

// start runs m as a new process: a new incarnation at the same address,
// restored from m's store.
func (c *testCluster) start(m *member) {
	c.t.Helper()
	c.mu.Lock()
	m.inc++
	id := ring.NodeID{Addr: m.addr, Incarnation: m.inc}
	c.mu.Unlock()
	ep, err := c.net.Join(id)
	if err != nil {
		c.t.Fatal(err)
	}
	c.mu.Lock()
	m.ep = ep
	cfg := c.config(m)
	c.mu.Unlock()
	node, err := Open(context.Background(), cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	c.mu.Lock()
	m.node = node
	c.mu.Unlock()
}

// nodeOf returns m's running node, or nil while it is down.
func (c *testCluster) nodeOf(m *member) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return m.node
}

// crash stops m abruptly: its node and endpoint close, and what was on
// its way to it is lost.
func (c *testCluster) crash(m *member) {
	c.t.Helper()
	c.mu.Lock()
	node, ep := m.node, m.ep
	m.node = nil
	c.mu.Unlock()
	if node == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := node.Close(ctx); err != nil {
		c.t.Errorf("closing %s: %v", m.addr, err)
	}
	_ = ep.Close()
}

// stop stops m in order: its node stops, then its endpoint delivers what
// was already sent before it leaves.
func (c *testCluster) stop(m *member) {
	c.t.Helper()
	c.mu.Lock()
	node, ep := m.node, m.ep
	m.node = nil
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := node.Close(ctx); err != nil {
		c.t.Errorf("closing %s: %v", m.addr, err)
	}
	if err := ep.Shutdown(ctx); err != nil {
		c.t.Errorf("shutting down %s: %v", m.addr, err)
	}
}

func (c *testCluster) stopAll() {
	for _, m := range c.members {
		c.crash(m)
	}
}

// ids returns the members' current identities, in member order.
func (c *testCluster) ids(ms ...*member) []ring.NodeID {
	if len(ms) == 0 {
		ms = c.members
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]ring.NodeID, len(ms))
	for i, m := range ms {
		out[i] = ring.NodeID{Addr: m.addr, Incarnation: m.inc}
	}
	return out
}

// isolate cuts m off from every other member; traffic waits until heal.
func (c *testCluster) isolate(m *member) {
	for _, o := range c.members {
		if o != m {
			c.net.Partition(m.addr, o.addr)
		}
	}
}

func (c *testCluster) heal(m *member) {
	for _, o := range c.members {
		if o != m {
			c.net.Heal(m.addr, o.addr)
		}
	}
}

func bounded(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	t.Cleanup(cancel)
	return ctx
}

func key(id string) replica.Key { return replica.Key{Type: "register", ID: id} }

// readState reads k's state at m, which must serve it.
func readState(ctx context.Context, m *member, k replica.Key) (string, error) {
	view, err := m.node.Read(ctx, k)
	if err != nil {
		return "", err
	}
	r, ok := view[stateSlot]
	if !ok || r.Tombstone {
		return "", nil
	}
	return string(r.Value), nil
}

// newWrappedCluster is newCluster in memory whose member wrapped sends
// through wrap(endpoint): a test that watches or filters what it posts.
// manual clusters tick by hand.
func newWrappedCluster(t testing.TB, n int, manual bool, wrapped int, wrap func(transport.Endpoint) transport.Endpoint) *testCluster {
	c := &testCluster{t: t, net: transport.NewMemNetwork(), manual: manual}
	c.wrap = func(m *member, ep transport.Endpoint) transport.Endpoint {
		if m != c.members[wrapped] {
			return ep
		}
		return wrap(ep)
	}
	for i := range n {
		c.members = append(c.members, &member{addr: fmt.Sprintf("n%d", i), store: replicastore.NewMemory()})
	}
	for _, m := range c.members {
		c.start(m)
	}
	t.Cleanup(c.stopAll)
	return c
}
