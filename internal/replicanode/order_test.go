package replicanode

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/troupe-go/troupe/internal/replica"
	"github.com/troupe-go/troupe/internal/replicastore"
	"github.com/troupe-go/troupe/internal/transport"
	"github.com/troupe-go/troupe/replication"
	"github.com/troupe-go/troupe/ring"
)

// gatedStore holds every Put that has records until the test opens the
// gate, telling the test when one arrives.
type gatedStore struct {
	replicastore.Store
	entered chan struct{}
	gate    chan struct{}
}

func (s *gatedStore) Put(ctx context.Context, recs ...replica.Record) error {
	if len(recs) > 0 {
		s.entered <- struct{}{}
		<-s.gate
	}
	return s.Store.Put(ctx, recs...)
}

// countingEndpoint counts the envelopes posted through it, and tells
// notify (when set, with room) of each.
type countingEndpoint struct {
	transport.Endpoint
	posted atomic.Int64
	notify chan struct{}
}

func (e *countingEndpoint) Post(to ring.NodeID, st transport.StreamID, key uint64, payload []byte) error {
	e.posted.Add(1)
	if e.notify != nil {
		select {
		case e.notify <- struct{}{}:
		default:
		}
	}
	return e.Endpoint.Post(to, st, key, payload)
}

// A replica's answer leaves only once what it promised is in its store,
// and an owner counts on it only then: with the replica's store held, the
// replica posts nothing and the acquisition that needs it waits.
func TestAReplicaAnswersOnlyAfterItsStoreHasTheRecords(t *testing.T) {
	gated := &gatedStore{Store: replicastore.NewMemory(), entered: make(chan struct{}, 16), gate: make(chan struct{})}
	counting := &countingEndpoint{}
	c := &testCluster{t: t, net: transport.NewMemNetwork()}
	for i := range 3 {
		m := &member{addr: fmt.Sprintf("n%d", i), store: replicastore.NewMemory()}
		if i == 1 {
			m.store = gated
		}
		c.members = append(c.members, m)
	}
	c.wrap = func(m *member, ep transport.Endpoint) transport.Endpoint {
		if m != c.members[1] {
			return ep
		}
		counting.Endpoint = ep
		return counting
	}
	for _, m := range c.members {
		c.start(m)
	}
	t.Cleanup(c.stopAll)
	open := sync.OnceFunc(func() { close(gated.gate) })
	t.Cleanup(open) // before stopAll: a failed test must not leave the loop stuck
	ctx := bounded(t)
	owner, far := c.members[0], c.members[2]
	c.isolate(far) // the owner's quorum needs the gated replica
	acquired := make(chan error, 1)
	set := c.ids()
	go func() { acquired <- owner.node.Acquire(ctx, key("a"), set, replication.Majority) }()
	<-gated.entered // the replica persists its promise
	if n := counting.posted.Load(); n != 0 {
		t.Fatalf("the replica posted %d envelopes before its promise was stored", n)
	}
	select {
	case err := <-acquired:
		t.Fatalf("the acquisition ended (%v) before the replica stored its promise", err)
	default:
	}
	open()
	if err := <-acquired; err != nil {
		t.Fatalf("once the replica stored its promise the acquisition returned %v", err)
	}
	if counting.posted.Load() == 0 {
		t.Fatal("the replica never answered")
	}
}

// An owner's write at One is acknowledged only once its own copy is
// stored.
func TestAWriteIsAcknowledgedOnlyOnceStored(t *testing.T) {
	gated := &gatedStore{Store: replicastore.NewMemory(), entered: make(chan struct{}, 16), gate: make(chan struct{})}
	net := transport.NewMemNetwork()
	ep, err := net.Join(ring.NodeID{Addr: "a", Incarnation: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	ctx := bounded(t)
	n, err := Open(ctx, Config{Endpoint: ep, Store: gated})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(ctx)
	k := key("a")
	acquired := make(chan error, 1)
	go func() { acquired <- n.Acquire(ctx, k, []ring.NodeID{ep.Self()}, replication.One) }()
	<-gated.entered
	gated.gate <- struct{}{}
	if err := <-acquired; err != nil {
		t.Fatal(err)
	}
	wrote := make(chan error, 1)
	go func() { wrote <- n.Write(ctx, k, stateSlot, []byte("v")) }()
	<-gated.entered
	select {
	case err := <-wrote:
		t.Fatalf("the write returned %v before its record was stored", err)
	default:
	}
	gated.gate <- struct{}{}
	if err := <-wrote; err != nil {
		t.Fatalf("once stored the write returned %v", err)
	}
}

// failingStore fails every Put with records once fail is set.
type failingStore struct {
	replicastore.Store
	fail atomic.Bool
	err  error
}

func (s *failingStore) Put(ctx context.Context, recs ...replica.Record) error {
	if len(recs) > 0 && s.fail.Load() {
		return s.err
	}
	return s.Store.Put(ctx, recs...)
}

// A Put that fails stops the node: the write whose records it held is not
// acknowledged, and every later call fails with the store's error, since
// the core moved past what the store holds.
func TestAFailedPutStopsTheNodeAndAcknowledgesNothing(t *testing.T) {
	diskFull := errors.New("disk full")
	store := &failingStore{Store: replicastore.NewMemory(), err: diskFull}
	net := transport.NewMemNetwork()
	ep, err := net.Join(ring.NodeID{Addr: "a", Incarnation: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	ctx := bounded(t)
	n, err := Open(ctx, Config{Endpoint: ep, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(ctx)
	k := key("a")
	if err := n.Acquire(ctx, k, []ring.NodeID{ep.Self()}, replication.One); err != nil {
		t.Fatal(err)
	}
	store.fail.Store(true)
	if err := n.Write(ctx, k, stateSlot, []byte("v")); !errors.Is(err, diskFull) {
		t.Fatalf("a write whose Put failed returned %v, want the store's error", err)
	}
	if err := n.Write(ctx, k, stateSlot, []byte("w")); !errors.Is(err, diskFull) {
		t.Fatalf("a write after the store failed returned %v, want the store's error", err)
	}
	if _, err := n.Read(ctx, k); !errors.Is(err, diskFull) {
		t.Fatalf("a read after the store failed returned %v, want the store's error", err)
	}
	if _, ok, _ := store.Store.Get(ctx, k, stateSlot); ok {
		t.Fatal("the store holds a record the failing Put was refused")
	}
}
