package replicanode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/troupe-go/troupe/internal/replica"
	"github.com/troupe-go/troupe/internal/replicastore"
	"github.com/troupe-go/troupe/internal/transport"
	"github.com/troupe-go/troupe/replication"
	"github.com/troupe-go/troupe/ring"
)

// startReceiving has m receive rng and waits until its loop took it.
func startReceiving(ctx context.Context, t *testing.T, m *member, rng ring.Range) {
	t.Helper()
	if err := m.node.SetReceiving(rng); err != nil {
		t.Fatal(err)
	}
	for len(m.node.Receiving()) == 0 {
		if ctx.Err() != nil {
			t.Fatal("the member never started receiving")
		}
		runtime.Gosched()
	}
}

// fill has owner write keys keys of valueSize bytes at All, so that every
// member holds them, and returns each key's value.
func fill(ctx context.Context, t *testing.T, c *testCluster, owner *member, keys, valueSize int) [][]byte {
	t.Helper()
	values := make([][]byte, keys)
	for i := range keys {
		k := key(fmt.Sprint(i))
		if err := owner.node.Acquire(ctx, k, c.ids(), replication.All); err != nil {
			t.Fatal(err)
		}
		values[i] = bytes.Repeat([]byte{byte(i)}, valueSize)
		if err := owner.node.Write(ctx, k, stateSlot, values[i]); err != nil {
			t.Fatal(err)
		}
	}
	return values
}

// holds fails the test unless m's store holds value as k's state.
func holds(ctx context.Context, t *testing.T, m *member, k replica.Key, value []byte) {
	t.Helper()
	r, ok, err := m.store.Get(ctx, k, stateSlot)
	if err != nil || !ok || !bytes.Equal(r.Value, value) {
		t.Fatalf("after the catch-up %s holds %d bytes (%v, %v) for %v, want the %d bytes written last", m.addr, len(r.Value), ok, err, k, len(value))
	}
}

// A member restarted on its store, which lacks only the writes made while
// it was down, receives those values once (from one source) and the
// index of the rest, not the range again from each source; the promises
// made meanwhile come with the index.
func TestARestartedMemberReceivesOnlyWhatChangedWhileItWasDown(t *testing.T) {
	const keys, changed, valueSize = 40, 3, 16 << 10
	c := newCluster(t, 3, false)
	ctx := bounded(t)
	a, b, w := c.members[0], c.members[1], c.members[2]
	fill(ctx, t, c, a, keys, valueSize)
	c.crash(w)
	newer := make([][]byte, changed)
	for i := range changed {
		// b takes the key over from a: a newer promise, held by a and b.
		k := key(fmt.Sprint(i))
		if err := b.node.Acquire(ctx, k, c.ids(), replication.Majority); err != nil {
			t.Fatal(err)
		}
		newer[i] = bytes.Repeat([]byte{0xff - byte(i)}, valueSize)
		if err := b.node.Write(ctx, k, stateSlot, newer[i]); err != nil {
			t.Fatal(err)
		}
	}
	c.start(w)
	startReceiving(ctx, t, w, ring.Range{})
	if err := w.node.CatchUp(ctx, ring.Range{}, c.ids(a, b), 2); err != nil {
		t.Fatal(err)
	}
	for i := range changed {
		k := key(fmt.Sprint(i))
		holds(ctx, t, w, k, newer[i])
		want, _, _ := b.store.Get(ctx, k, replica.Slot{Kind: replica.KindPromise})
		got, ok, err := w.store.Get(ctx, k, replica.Slot{Kind: replica.KindPromise})
		if err != nil || !ok || got.Epoch != want.Epoch {
			t.Fatalf("after the catch-up %s promised %v (%v, %v) for %v, want the new owner's %v", w.addr, got.Epoch, ok, err, k, want.Epoch)
		}
	}
	need := int64(changed * valueSize)
	if got := w.node.ReceivedBytes(); got < need || got >= need+valueSize {
		t.Fatalf("the restarted member received %d bytes, want the %d of the changed values once and an index under %d", got, need, valueSize)
	}
	for _, src := range []*member{a, b} {
		if open, _ := src.node.Serving(); open != 0 {
			t.Fatalf("after the catch-up %s still serves %d catch-ups, want none", src.addr, open)
		}
	}
}

// A member with an empty store takes the values from one source and only
// an index from the other, which holds nothing newer.
func TestEachValueCrossesOnceFromTwoSources(t *testing.T) {
	const keys, valueSize = 20, 16 << 10
	c := newCluster(t, 3, false)
	c.configure = func(cfg *Config) { cfg.SyncChunk = 64 << 10 }
	ctx := bounded(t)
	a, b, w := c.members[0], c.members[1], c.members[2]
	values := fill(ctx, t, c, a, keys, valueSize)
	c.wipe(w)
	if err := w.node.CatchUp(ctx, ring.Range{}, c.ids(a, b), 2); err != nil {
		t.Fatal(err)
	}
	for i, v := range values {
		holds(ctx, t, w, key(fmt.Sprint(i)), v)
	}
	need := int64(keys * valueSize)
	if got := w.node.ReceivedBytes(); got < need || got >= need+valueSize {
		t.Fatalf("the member received %d bytes, want the %d of the values once and an index under %d", got, need, valueSize)
	}
}

// A source other than the value source that holds a newer version of a
// record than the value source sent sends it: the newest record among
// the sources wins, whether the member held the older one or nothing.
func TestANewerRecordAtAnotherSourceWins(t *testing.T) {
	for _, restarted := range []bool{false, true} {
		t.Run(fmt.Sprintf("restarted=%v", restarted), func(t *testing.T) {
			const keys, valueSize = 10, 1 << 10
			c := newCluster(t, 3, false)
			ctx := bounded(t)
			a, b, w := c.members[0], c.members[1], c.members[2]
			fill(ctx, t, c, a, keys, valueSize)
			if restarted {
				c.crash(w)
				c.start(w)
				startReceiving(ctx, t, w, ring.Range{})
			} else {
				c.wipe(w)
			}
			// Only b's store holds the newer version, as if a's
			// accept of it were still on its way.
			k := key("3")
			r, ok, err := b.store.Get(ctx, k, stateSlot)
			if err != nil || !ok {
				t.Fatalf("b holds no state for %v: %v", k, err)
			}
			r.Version++
			r.Value = []byte("newer")
			if err := b.store.Put(ctx, r); err != nil {
				t.Fatal(err)
			}
			if ids := c.ids(a, b); ids[0].Compare(ids[1]) > 0 {
				t.Fatal("a is not the value source")
			}
			if err := w.node.CatchUp(ctx, ring.Range{}, c.ids(a, b), 2); err != nil {
				t.Fatal(err)
			}
			holds(ctx, t, w, k, []byte("newer"))
		})
	}
}

// A value source that does not answer holds the other sources back only
// until it would be asked again: they then fetch the values themselves.
func TestASilentValueSourceDoesNotHoldTheOthersBack(t *testing.T) {
	const keys, valueSize = 10, 1 << 10
	c := newCluster(t, 4, false)
	ctx := bounded(t)
	a, b, x, w := c.members[0], c.members[1], c.members[2], c.members[3]
	values := fill(ctx, t, c, a, keys, valueSize)
	c.wipe(w)
	c.net.Partition(a.addr, w.addr)
	if ids := c.ids(a, b, x); ids[0] != a.node.Self() {
		t.Fatal("a is not the value source")
	}
	if err := w.node.CatchUp(ctx, ring.Range{}, c.ids(a, b, x), 2); err != nil {
		t.Fatalf("a catch-up from b and x with a cut off returned %v", err)
	}
	for i, v := range values {
		holds(ctx, t, w, key(fmt.Sprint(i)), v)
	}
}

// chunkDoctor rewrites the catch-up chunks a member posts.
type chunkDoctor struct {
	transport.Endpoint
	t      *testing.T
	doctor func(*replica.Message)
}

func (e *chunkDoctor) Post(to ring.NodeID, st transport.StreamID, key uint64, payload []byte) error {
	msgs, err := appendEnvelopeMessages(nil, payload)
	if err != nil {
		e.t.Errorf("an envelope posted does not decode: %v", err)
		return err
	}
	var enc []byte
	var ends []int
	for _, m := range msgs {
		if m.Type == replica.MsgSyncChunk {
			e.doctor(&m)
		}
		enc = replica.AppendEncode(enc, m)
		ends = append(ends, len(enc))
	}
	return e.Endpoint.Post(to, st, key, appendEnvelope(e.Buffer(len(enc)+10*len(ends)+11), enc, ends))
}

// A source that does not send a record its index listed cannot count.
func TestASourceThatDoesNotSendWhatItListedFails(t *testing.T) {
	c := &testCluster{t: t, net: transport.NewMemNetwork()}
	c.wrap = func(m *member, ep transport.Endpoint) transport.Endpoint {
		if m != c.members[1] {
			return ep
		}
		// b is not the value source: every chunk it sends answers a
		// fetch, and it loses its records.
		return &chunkDoctor{Endpoint: ep, t: t, doctor: func(m *replica.Message) { m.Records = nil }}
	}
	for i := range 3 {
		c.members = append(c.members, &member{addr: fmt.Sprintf("n%d", i), store: replicastore.NewMemory()})
	}
	for _, m := range c.members {
		c.start(m)
	}
	t.Cleanup(c.stopAll)
	ctx := bounded(t)
	a, b, w := c.members[0], c.members[1], c.members[2]
	fill(ctx, t, c, a, 4, 64)
	c.wipe(w)
	k := key("2")
	r, _, _ := b.store.Get(ctx, k, stateSlot)
	r.Version++
	if err := b.store.Put(ctx, r); err != nil {
		t.Fatal(err)
	}
	err := w.node.CatchUp(ctx, ring.Range{}, c.ids(a, b), 2)
	if !errors.Is(err, ErrSourceIncomplete) {
		t.Fatalf("a catch-up from a source that did not send what it listed returned %v, want ErrSourceIncomplete", err)
	}
	if !wholeRing(w.node.Receiving()) {
		t.Fatal("a failed catch-up stopped receiving")
	}
}

// requestSpy records the catch-up requests a member posts.
type requestSpy struct {
	transport.Endpoint
	t    *testing.T
	mu   sync.Mutex
	sent map[string][]string // by destination address: "sync-request", "fetch", "sync-index-request"
}

func (e *requestSpy) Post(to ring.NodeID, st transport.StreamID, key uint64, payload []byte) error {
	msgs, err := appendEnvelopeMessages(nil, payload)
	if err != nil {
		e.t.Errorf("an envelope posted does not decode: %v", err)
	}
	e.mu.Lock()
	for _, m := range msgs {
		what := m.Type.String()
		switch {
		case m.Type == replica.MsgSyncRequest && len(m.Records) > 0:
			what = "fetch"
		case m.Type != replica.MsgSyncRequest && m.Type != replica.MsgSyncIndexRequest:
			continue
		}
		e.sent[to.Addr] = append(e.sent[to.Addr], what)
	}
	e.mu.Unlock()
	return e.Endpoint.Post(to, st, key, payload)
}

// A member with an empty store asks its value source for whole records
// at once, without an index first, and the other source for an index
// only; a member that holds the range asks both for an index.
func TestAnEmptyMemberAsksForWholeRecordsWithoutAnIndex(t *testing.T) {
	spy := &requestSpy{t: t, sent: map[string][]string{}}
	c := newWrappedCluster(t, 3, false, 2, func(ep transport.Endpoint) transport.Endpoint {
		spy.Endpoint = ep
		return spy
	})
	ctx := bounded(t)
	a, b, w := c.members[0], c.members[1], c.members[2]
	fill(ctx, t, c, a, 8, 64)
	sent := func() map[string][]string {
		spy.mu.Lock()
		defer spy.mu.Unlock()
		got := spy.sent
		spy.sent = map[string][]string{}
		for to, types := range got {
			// A request asked again is the same request.
			got[to] = slices.Compact(types)
		}
		return got
	}
	c.wipe(w)
	sent()
	if err := w.node.CatchUp(ctx, ring.Range{}, c.ids(a, b), 2); err != nil {
		t.Fatal(err)
	}
	got := sent()
	if want := []string{"sync-request"}; !slices.Equal(got[a.addr], want) || !slices.Equal(got[b.addr], []string{"sync-index-request"}) {
		t.Fatalf("an empty member asked the value source for %v and the other for %v, want %v and one index request", got[a.addr], got[b.addr], want)
	}
	startReceiving(ctx, t, w, ring.Range{})
	if err := w.node.CatchUp(ctx, ring.Range{}, c.ids(a, b), 2); err != nil {
		t.Fatal(err)
	}
	got = sent()
	if want := []string{"sync-index-request"}; !slices.Equal(got[a.addr], want) || !slices.Equal(got[b.addr], want) {
		t.Fatalf("a member holding the range asked its sources for %v and %v, want %v from each", got[a.addr], got[b.addr], want)
	}
}

// A value source that answers only after the others were released still
// delivers, and counts: the catch-up needs both sources here.
func TestAValueSourceThatAnswersLateStillDelivers(t *testing.T) {
	spy := &requestSpy{t: t, sent: map[string][]string{}}
	c := &testCluster{t: t, net: transport.NewMemNetwork()}
	c.wrap = func(m *member, ep transport.Endpoint) transport.Endpoint {
		if m != c.members[2] {
			return ep
		}
		spy.Endpoint = ep
		return spy
	}
	c.configure = func(cfg *Config) { cfg.SyncChunk = 512 }
	for i := range 3 {
		c.members = append(c.members, &member{addr: fmt.Sprintf("n%d", i), store: replicastore.NewMemory()})
	}
	for _, m := range c.members {
		c.start(m)
	}
	t.Cleanup(c.stopAll)
	ctx := bounded(t)
	a, b, w := c.members[0], c.members[1], c.members[2]
	values := fill(ctx, t, c, a, 20, 64)
	c.wipe(w)
	c.net.Partition(a.addr, w.addr)
	caughtUp := make(chan error, 1)
	go func() { caughtUp <- w.node.CatchUp(ctx, ring.Range{}, c.ids(a, b), 2) }()
	// The value source is asked again, and so released, before its
	// answers come.
	for asked := 0; asked < 2; {
		if ctx.Err() != nil {
			t.Fatal("the value source was never asked again")
		}
		runtime.Gosched()
		spy.mu.Lock()
		asked = len(spy.sent[a.addr])
		spy.mu.Unlock()
	}
	c.net.Heal(a.addr, w.addr)
	if err := <-caughtUp; err != nil {
		t.Fatalf("the catch-up with a late value source returned %v", err)
	}
	for i, v := range values {
		holds(ctx, t, w, key(fmt.Sprint(i)), v)
	}
}
