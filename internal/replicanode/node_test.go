package replicanode

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/replica"
	"github.com/troupe-go/troupe/internal/replicastore"
	"github.com/troupe-go/troupe/internal/transport"
	"github.com/troupe-go/troupe/replication"
	"github.com/troupe-go/troupe/ring"
)

// A write acknowledged at any level is read by the next owner after the
// old one stopped, with three and with five replicas.
func TestAWriteIsReadByTheNextOwner(t *testing.T) {
	for _, size := range []int{3, 5} {
		for _, level := range []replication.Level{replication.One, replication.Majority, replication.All} {
			t.Run(fmt.Sprintf("%d/%v", size, level), func(t *testing.T) {
				c := newCluster(t, size, false)
				ctx := bounded(t)
				k := key("a")
				old, next := c.members[0], c.members[1]
				set := c.ids()
				if err := old.node.Acquire(ctx, k, set, level); err != nil {
					t.Fatal(err)
				}
				for i := range 10 {
					if err := old.node.Write(ctx, k, stateSlot, []byte(fmt.Sprint(i))); err != nil {
						t.Fatalf("write %d at %v: %v", i, level, err)
					}
				}
				// At One only the owner's copy is waited for: the orderly
				// stop delivers what it sent, and the next owner (at One,
				// its own quorum) has received it before its acquisition.
				c.stop(old)
				// All needs every replica and the old owner is gone: the
				// next owner acquires at Majority.
				acquireAt := level
				if level == replication.All {
					acquireAt = replication.Majority
				}
				if err := next.node.Acquire(ctx, k, set, acquireAt); err != nil {
					t.Fatal(err)
				}
				got, err := readState(ctx, next, k)
				if err != nil || got != "9" {
					t.Fatalf("the next owner read %q, %v; want 9", got, err)
				}
			})
		}
	}
}

// A node crashed and restarted from its Badger store (same address, new
// incarnation), one member after the other while an owner writes, loses
// nothing that was acknowledged: after every member restarted and the
// writing owner crashed, a new owner reads every acknowledged value.
func TestRestartsFromBadgerLoseNothingAcknowledged(t *testing.T) {
	c := newCluster(t, 3, true)
	ctx := bounded(t)
	keys := []replica.Key{key("a"), key("b"), key("c"), key("d")}
	acked := map[replica.Key]string{}
	owner := c.members[0]
	acquire := func(m *member) {
		t.Helper()
		for _, k := range keys {
			if err := m.node.Acquire(ctx, k, c.ids(), replication.Majority); err != nil {
				t.Fatalf("%s acquiring %v: %v", m.addr, k, err)
			}
		}
	}
	write := func(round int) {
		t.Helper()
		for _, k := range keys {
			v := fmt.Sprintf("%s-%d", k.ID, round)
			if err := owner.node.Write(ctx, k, stateSlot, []byte(v)); err != nil {
				t.Fatalf("write %v at round %d: %v", k, round, err)
			}
			acked[k] = v
		}
	}
	acquire(owner)
	write(0)
	for round, m := range []*member{c.members[1], c.members[2], c.members[0]} {
		c.crash(m)
		c.start(m)
		if m == owner {
			// The owner's process is new: it serves nothing until it
			// acquires again, over a replica set naming its new self.
			acquire(owner)
		} else {
			// The owner's replica set still names m's old incarnation,
			// which is gone: a fresh acquisition names the new one.
			for _, k := range keys {
				if err := owner.node.Resign(k); err != nil {
					t.Fatal(err)
				}
			}
			acquire(owner)
		}
		write(round + 1)
	}
	c.crash(owner)
	next := c.members[1]
	acquire(next)
	for _, k := range keys {
		got, err := readState(ctx, next, k)
		if err != nil || got != acked[k] {
			t.Fatalf("after the restarts %v reads %q, %v; the last acknowledged write was %q", k, got, err, acked[k])
		}
	}
}

// An owner cut off from its replicas while another member acquired its
// key and wrote gets no write acknowledged and answers no read; once the
// network heals, both fail with the newer owner's epoch, and the newer
// owner's write stands.
func TestAPausedOwnerIsFenced(t *testing.T) {
	// Ticks by hand, so that the old owner posts only what the test asks
	// of it, and the test can tell when its requests went out.
	counting := &countingEndpoint{notify: make(chan struct{}, 64)}
	c := newWrappedCluster(t, 3, true, 0, func(ep transport.Endpoint) transport.Endpoint {
		counting.Endpoint = ep
		return counting
	})
	ctx := bounded(t)
	k := key("a")
	old, next := c.members[0], c.members[1]
	set := c.ids()
	if err := old.node.Acquire(ctx, k, set, replication.Majority); err != nil {
		t.Fatal(err)
	}
	if err := old.node.Write(ctx, k, stateSlot, []byte("before")); err != nil {
		t.Fatal(err)
	}
	c.isolate(old)
	if err := next.node.Acquire(ctx, k, set, replication.Majority); err != nil {
		t.Fatal(err)
	}
	if err := next.node.Write(ctx, k, stateSlot, []byte("after")); err != nil {
		t.Fatal(err)
	}

	// The read goes first: it sends a check round; the write then sends
	// its accepts. Each reaches the replicas only once the network heals.
	type result struct {
		v   string
		err error
	}
	posted := func(n int) {
		t.Helper()
		for range n {
			select {
			case <-counting.notify:
			case <-ctx.Done():
				t.Fatal("the cut-off owner did not post its requests")
			}
		}
	}
	for len(counting.notify) > 0 {
		<-counting.notify
	}
	read, wrote := make(chan result, 1), make(chan error, 1)
	go func() { v, err := readState(ctx, old, k); read <- result{v, err} }()
	posted(2) // a check to each other replica
	go func() { wrote <- old.node.Write(ctx, k, stateSlot, []byte("stale")) }()
	posted(2) // an accept to each
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := old.node.Write(short, k, stateSlot, []byte("stale too")); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("the cut-off owner's write returned %v, want ErrUnavailable", err)
	}
	select {
	case r := <-read:
		t.Fatalf("the cut-off owner answered a read: %q, %v", r.v, r.err)
	case err := <-wrote:
		t.Fatalf("the cut-off owner's write returned %v while cut off", err)
	default:
	}

	c.heal(old)
	var stale *StaleOwnerError
	if err := <-wrote; !errors.As(err, &stale) || stale.Newer.Node != next.node.Self() {
		t.Fatalf("after healing the old owner's write returned %v, want a StaleOwnerError naming %v", err, next.node.Self())
	}
	if r := <-read; !errors.Is(r.err, ErrStaleOwner) {
		t.Fatalf("after healing the old owner's read returned %q, %v; want ErrStaleOwner", r.v, r.err)
	}
	if err := old.node.Write(ctx, k, stateSlot, []byte("x")); !errors.Is(err, replica.ErrNotServing) {
		t.Fatalf("a write at the fenced owner returned %v, want ErrNotServing", err)
	}
	if got, err := readState(ctx, next, k); err != nil || got != "after" {
		t.Fatalf("the newer owner reads %q, %v; want after", got, err)
	}
}

// lossyEndpoint drops the envelopes it is given to post while drop is
// set, and reports each one dropped.
type lossyEndpoint struct {
	transport.Endpoint
	drop    atomic.Bool
	dropped chan ring.NodeID
}

func (e *lossyEndpoint) Post(to ring.NodeID, st transport.StreamID, key uint64, payload []byte) error {
	if e.drop.Load() {
		e.dropped <- to
		return nil
	}
	return e.Endpoint.Post(to, st, key, payload)
}

// Prepares that were lost are sent again when the node ticks (here by
// hand), and the acquisition completes then.
func TestATickSendsAgainWhatWasLost(t *testing.T) {
	lossy := &lossyEndpoint{dropped: make(chan ring.NodeID, 16)}
	lossy.drop.Store(true)
	c := newWrappedCluster(t, 3, true, 0, func(ep transport.Endpoint) transport.Endpoint {
		lossy.Endpoint = ep
		return lossy
	})
	ctx := bounded(t)
	k := key("a")
	owner := c.members[0]
	acquired := make(chan error, 1)
	go func() { acquired <- owner.node.Acquire(ctx, k, c.ids(), replication.Majority) }()
	// The prepares to both other replicas are lost.
	<-lossy.dropped
	<-lossy.dropped
	lossy.drop.Store(false)
	select {
	case err := <-acquired:
		t.Fatalf("the acquisition ended (%v) with its prepares lost and no tick", err)
	default:
	}
	// A prepare is sent again at the second tick after it was sent.
	owner.ticks <- struct{}{}
	owner.ticks <- struct{}{}
	if err := <-acquired; err != nil {
		t.Fatalf("after a tick the acquisition returned %v", err)
	}
}

// Open refuses a store in a newer format and a corrupt store with their
// typed errors, and leaves them as they were.
func TestOpenSurfacesStoreErrors(t *testing.T) {
	net := transport.NewMemNetwork()
	ep, err := net.Join(ring.NodeID{Addr: "a", Incarnation: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	ctx := bounded(t)

	newer := t.TempDir()
	writeFormat(t, newer, 99)
	_, err = Open(ctx, Config{Endpoint: ep, Replication: replication.Config{DataDir: newer}})
	var fe *replication.FormatError
	if !errors.Is(err, replication.ErrNewerFormat) || !errors.As(err, &fe) || fe.Found != 99 {
		t.Fatalf("opening a newer store returned %v, want a FormatError matching ErrNewerFormat", err)
	}

	corrupt := t.TempDir()
	s, err := replicastore.Open(corrupt, replicastore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, replica.Record{Key: key("a"), Kind: replica.KindState, Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	corruptRecord(t, corrupt)
	if _, err := Open(ctx, Config{Endpoint: ep, Replication: replication.Config{DataDir: corrupt}}); !errors.Is(err, replication.ErrCorrupt) {
		t.Fatalf("opening a corrupt store returned %v, want ErrCorrupt", err)
	}
}

// A paced catch-up asks for smaller chunks: a thirty-second of its rate,
// between 64 KiB and 1 MiB; a chunk size given, or no pacing, stays.
func TestTheDefaultChunkFollowsTheCatchUpRate(t *testing.T) {
	for _, c := range []struct {
		rate, chunk, want int
	}{
		{0, 0, DefaultSyncChunk},        // the default rate, 32 MiB/s
		{-1, 0, DefaultSyncChunk},       // unpaced
		{64 << 20, 0, DefaultSyncChunk}, // faster
		{4 << 20, 0, 128 << 10},         // slower
		{1 << 20, 0, minPacedChunk},     // slower still
		{4 << 20, 512 << 10, 512 << 10}, // given
	} {
		if got := (Config{SyncRate: c.rate, SyncChunk: c.chunk}).withDefaults().SyncChunk; got != c.want {
			t.Errorf("SyncRate %d, SyncChunk %d: the chunk is %d, want %d", c.rate, c.chunk, got, c.want)
		}
	}
}

func TestValidateNamesTheField(t *testing.T) {
	net := transport.NewMemNetwork()
	ep, err := net.Join(ring.NodeID{Addr: "a", Incarnation: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	for _, tc := range []struct {
		cfg  Config
		name string
	}{
		{Config{}, "Endpoint"},
		{Config{Endpoint: ep, TickEvery: -1}, "TickEvery"},
		{Config{Endpoint: ep, MaxBatch: -1}, "MaxBatch"},
		{Config{Endpoint: ep, MaxWritesInFlight: -1}, "MaxWritesInFlight"},
		{Config{Endpoint: ep, MaxValue: -1}, "MaxValue"},
		{Config{Endpoint: ep, SyncChunk: -1}, "SyncChunk"},
		{Config{Endpoint: ep, MaxValue: 1 << 10, SyncChunk: 2 << 10}, "SyncChunk"},
		{Config{Endpoint: ep, SyncChunk: DefaultMaxValue + 1}, "SyncChunk"},
		{Config{Endpoint: ep, Store: replicastore.NewMemory(), Replication: replication.Config{DataDir: "/d"}}, "Store"},
		{Config{Endpoint: ep, Replication: replication.Config{Sync: true}}, "Sync"},
	} {
		err := tc.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("Validate of a bad %s: %v", tc.name, err)
		}
	}
}

// Calls on a closed node, and calls waiting when it closes, fail with
// ErrClosed.
func TestCallsFailAfterClose(t *testing.T) {
	c := newCluster(t, 3, false)
	ctx := bounded(t)
	m := c.members[0]
	c.isolate(m)
	waiting := make(chan error, 1)
	node, set := m.node, c.ids()
	go func() { waiting <- node.Acquire(ctx, key("a"), set, replication.Majority) }()
	c.crash(m)
	if err := <-waiting; !errors.Is(err, ErrClosed) {
		t.Fatalf("an acquisition waiting at close returned %v, want ErrClosed", err)
	}
	if err := node.Write(ctx, key("a"), stateSlot, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("a write after close returned %v, want ErrClosed", err)
	}
}

// A Delete leaves a tombstone that a later owner adopts.
func TestADeleteIsATombstoneTheNextOwnerSees(t *testing.T) {
	c := newCluster(t, 3, false)
	ctx := bounded(t)
	k := key("a")
	set := c.ids()
	a, b := c.members[0], c.members[1]
	if err := a.node.Acquire(ctx, k, set, replication.Majority); err != nil {
		t.Fatal(err)
	}
	if err := a.node.Write(ctx, k, stateSlot, []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := a.node.Delete(ctx, k, stateSlot); err != nil {
		t.Fatal(err)
	}
	if err := b.node.Acquire(ctx, k, set, replication.Majority); err != nil {
		t.Fatal(err)
	}
	view, err := b.node.Read(ctx, k)
	if r, ok := view[stateSlot]; err != nil || !ok || !r.Tombstone {
		t.Fatalf("the next owner reads %+v, %v; want the tombstone", view, err)
	}
}

// An acquisition abandoned at its deadline resigns the key: it does not
// go on fencing.
func TestAnAbandonedAcquisitionResigns(t *testing.T) {
	c := newCluster(t, 3, false)
	ctx := bounded(t)
	k := key("a")
	m := c.members[0]
	c.isolate(m)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := m.node.Acquire(short, k, c.ids(), replication.Majority); !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a cut-off acquisition returned %v, want ErrUnavailable and DeadlineExceeded", err)
	}
	c.heal(m)
	// A write now finds the key not served: the acquisition stopped.
	if err := m.node.Write(ctx, k, stateSlot, nil); !errors.Is(err, replica.ErrNotServing) {
		t.Fatalf("a write after the abandoned acquisition returned %v, want ErrNotServing", err)
	}
}

// A write abandoned at its deadline leaves the key served: once the
// replicas are reachable again the owner goes on writing, and the
// abandoned write, sent again, lands before the next.
func TestAnAbandonedWriteKeepsTheKeyServed(t *testing.T) {
	c := newCluster(t, 3, false)
	ctx := bounded(t)
	k := key("a")
	m := c.members[0]
	if err := m.node.Acquire(ctx, k, c.ids(), replication.Majority); err != nil {
		t.Fatal(err)
	}
	c.isolate(m)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := m.node.Write(short, k, stateSlot, []byte("1")); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a cut-off write returned %v, want ErrUnavailable", err)
	}
	c.heal(m)
	if err := m.node.Write(ctx, k, stateSlot, []byte("2")); err != nil {
		t.Fatalf("a write after the abandoned one returned %v, want nil", err)
	}
	if got, err := readState(ctx, m, k); err != nil || got != "2" {
		t.Fatalf("read %q, %v; want 2", got, err)
	}
}

// A member still receiving its ranges does not count toward a quorum
// until it caught up or an operator makes it count everywhere.
func TestAMemberStillReceivingDoesNotCount(t *testing.T) {
	c := newCluster(t, 3, false)
	ctx := bounded(t)
	k := key("a")
	a, b, far := c.members[0], c.members[1], c.members[2]
	if err := b.node.SetReceiving(ring.Range{}); err != nil {
		t.Fatal(err)
	}
	c.isolate(far)
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := a.node.Acquire(short, k, c.ids(), replication.Majority); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("an acquisition counting a receiving member returned %v, want ErrUnavailable", err)
	}
	// Adding no range changes nothing.
	if err := b.node.SetReceiving(); err != nil {
		t.Fatal(err)
	}
	if err := a.node.Acquire(short, k, c.ids(), replication.Majority); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("after SetReceiving() an acquisition counting a receiving member returned %v, want ErrUnavailable", err)
	}
	if err := b.node.CountEverywhere(); err != nil {
		t.Fatal(err)
	}
	if err := a.node.Acquire(ctx, k, c.ids(), replication.Majority); err != nil {
		t.Fatalf("once the member counts everywhere the acquisition returned %v", err)
	}
}

// Writes of a key whose level cannot be met pile up only to
// MaxWritesInFlight: past it a write is refused at once with
// ErrTooManyWrites (and ErrUnavailable), and once the replicas are back
// the key takes writes again.
func TestWritesInFlightPerKeyAreBounded(t *testing.T) {
	c := newCluster(t, 3, false)
	const limit = 3
	c.configure = func(cfg *Config) { cfg.MaxWritesInFlight = limit }
	m := c.members[0]
	c.stop(m)
	c.start(m)
	ctx := bounded(t)
	k := key("a")
	if err := m.node.Acquire(ctx, k, c.ids(), replication.Majority); err != nil {
		t.Fatal(err)
	}
	c.isolate(m)
	for i := range limit {
		short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		err := m.node.Write(short, k, stateSlot, []byte{byte(i)})
		cancel()
		if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrTooManyWrites) {
			t.Fatalf("cut-off write %d returned %v, want ErrUnavailable at its deadline", i, err)
		}
	}
	// ctx has seconds left: only a refusal returns before it ends.
	if err := m.node.Write(ctx, k, stateSlot, []byte("over")); !errors.Is(err, ErrTooManyWrites) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a write past MaxWritesInFlight returned %v, want ErrTooManyWrites matching ErrUnavailable", err)
	}
	c.heal(m)
	// A read returns once what it reflects (the abandoned writes) met the
	// level.
	if got, err := readState(ctx, m, k); err != nil || got != string([]byte{limit - 1}) {
		t.Fatalf("read %q, %v; want the last abandoned write", got, err)
	}
	if err := m.node.Write(ctx, k, stateSlot, []byte("after")); err != nil {
		t.Fatalf("a write once the replicas were back returned %v", err)
	}
	if got, err := readState(ctx, m, k); err != nil || got != "after" {
		t.Fatalf("read %q, %v; want after", got, err)
	}
}

// A write larger than MaxValue is refused before it is taken; one at
// the default limit crosses the TCP transport at its default message
// limit and meets its level, so the default fits the transport.
func TestAWriteLargerThanMaxValueIsRefusedAndTheDefaultFitsTheTransport(t *testing.T) {
	eps := benchEndpoints(t, "tcp")[:2]
	ctx := bounded(t)
	var nodes []*Node
	for _, ep := range eps {
		n, err := Open(ctx, Config{Endpoint: ep, TickEvery: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close(ctx)
		nodes = append(nodes, n)
	}
	k := key("a")
	set := []ring.NodeID{eps[0].Self(), eps[1].Self()}
	if err := nodes[0].Acquire(ctx, k, set, replication.Majority); err != nil {
		t.Fatal(err)
	}
	room := DefaultMaxValue - len(k.Type) - len(k.ID)
	if err := nodes[0].Write(ctx, k, stateSlot, make([]byte, room+1)); !errors.Is(err, ErrValueTooLarge) {
		t.Fatalf("a write over MaxValue returned %v, want ErrValueTooLarge", err)
	}
	if err := nodes[0].Write(ctx, k, stateSlot, make([]byte, room)); err != nil {
		t.Fatalf("a write of MaxValue bytes over TCP returned %v, want it to meet Majority of two", err)
	}
	if err := nodes[0].Resign(k); err != nil {
		t.Fatal(err)
	}
	if err := nodes[1].Acquire(ctx, k, set, replication.Majority); err != nil {
		t.Fatal(err)
	}
	recs, err := nodes[1].Read(ctx, k)
	if err != nil || len(recs[stateSlot].Value) != room {
		t.Fatalf("the next owner read %d bytes, %v; want %d", len(recs[stateSlot].Value), err, room)
	}
}
