package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/faultnet"
	"github.com/troupe-go/troupe/ring"
	"github.com/troupe-go/troupe/wire"
	"pgregory.net/rapid"
)

// ledger records what each node received, to check exactly-once and
// per-key order.
type ledger struct {
	mu   sync.Mutex
	seen map[string]int // envelope tag -> times delivered
	last map[string]int // sender/stream/key -> last sequence delivered
	errs []string
}

func newLedger() *ledger { return &ledger{seen: map[string]int{}, last: map[string]int{}} }

// envelope layout: sender byte, stream byte, key uint16, seq uint32, then
// filler.
func tagged(sender byte, st StreamID, key uint16, seq uint32, size int) []byte {
	b := make([]byte, max(size, 8))
	b[0], b[1] = sender, byte(st)
	binary.BigEndian.PutUint16(b[2:], key)
	binary.BigEndian.PutUint32(b[4:], seq)
	fill(b[8:], seq)
	return b
}

// fill writes bytes derived from seq: incompressible for most, so the byte
// offsets of cuts land where the test means them, and repetitive for every
// third, so compressed frames are cut and resumed too.
func fill(b []byte, seq uint32) {
	x := uint64(seq)*0x9e3779b97f4a7c15 + 1
	for i := range b {
		if seq%3 == 0 {
			b[i] = byte(seq) + byte(i/64)
			continue
		}
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
}

func tagOf(p []byte) (flow string, seq int, tag string) {
	flow = fmt.Sprintf("%d/%d/%d", p[0], p[1], binary.BigEndian.Uint16(p[2:]))
	seq = int(binary.BigEndian.Uint32(p[4:]))
	return flow, seq, fmt.Sprintf("%s#%d", flow, seq)
}

func (l *ledger) record(p []byte) {
	flow, seq, tag := tagOf(p)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen[tag]++
	if l.seen[tag] > 1 {
		l.errs = append(l.errs, "duplicate "+tag)
	}
	if prev, ok := l.last[flow]; ok && seq <= prev {
		l.errs = append(l.errs, fmt.Sprintf("order: %s after #%d", tag, prev))
	}
	l.last[flow] = seq
	want := make([]byte, len(p)-8)
	fill(want, uint32(seq))
	if string(want) != string(p[8:]) {
		l.errs = append(l.errs, "corrupt "+tag)
	}
}

// tb is what these helpers need of *testing.T and *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
}

// faultPair is two transports on a fault-injecting loopback network.
type faultPair struct {
	fn     *faultnet.Network
	nodes  [2]*Transport
	books  [2]*ledger
	addrs  [2]string
	closed bool
}

func newFaultPair(t tb, seed uint64, plan faultnet.Plan, mutate func(*wire.Config)) *faultPair {
	fp := &faultPair{fn: faultnet.NewNetwork(seed)}
	fp.fn.SetPlan(plan)
	var lns [2]net.Listener
	for i := range fp.nodes {
		ln, err := fp.fn.Listen(context.Background(), "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
		fp.addrs[i] = ln.Addr().String()
	}
	for i := range fp.nodes {
		cfg := wire.Config{
			ClusterName:      "test",
			Advertise:        fp.addrs[i],
			Incarnation:      uint64(i + 1),
			Dialer:           fp.fn.Dialer(fp.addrs[i]),
			HandshakeTimeout: 2 * time.Second,
			RedialMin:        5 * time.Millisecond,
			RedialMax:        50 * time.Millisecond,
			Limits:           wire.Limits{MaxFrame: 64 << 10, Window: 64 << 10},
		}
		if mutate != nil {
			mutate(&cfg)
		}
		tr, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		book := newLedger()
		for st := range StreamID(NumStreams) {
			tr.Handle(st, HandlerFunc(func(_ ring.NodeID, p []byte) { book.record(p) }))
		}
		fp.nodes[i], fp.books[i] = tr, book
		go tr.Serve(lns[i])
	}
	return fp
}

func (fp *faultPair) close() {
	if !fp.closed {
		fp.closed = true
		fp.nodes[0].Close()
		fp.nodes[1].Close()
	}
}

type sent struct {
	from    int
	tag     string
	r       *Receipt
	cancels bool
}

// eightCuts cuts each of the first eight connections once, somewhere in
// its first 400 KiB of writes.
func eightCuts(info faultnet.ConnInfo, rng *rand.Rand) []faultnet.Fault {
	if info.Seq >= 8 {
		return nil
	}
	return []faultnet.Fault{faultnet.CutWriteAt(faultnet.MustBetween(rng, 1, 400<<10))}
}

func TestResumeAfterRepeatedCutsLosesAndDuplicatesNothing(t *testing.T) {
	fp := newFaultPair(t, 7, eightCuts, nil)
	defer fp.close()
	rng := rand.New(rand.NewPCG(7, 7))
	var all []sent
	for i := range 300 {
		from := i % 2
		st := []StreamID{StreamApplication, StreamReplication, StreamMembership}[rng.IntN(3)]
		key := uint16(rng.IntN(4))
		size := 8 + rng.IntN(40<<10)
		if rng.IntN(20) == 0 {
			size = 300 << 10
		}
		p := tagged(byte(from), st, key, uint32(i), size)
		r, err := fp.nodes[from].Send(context.Background(), fp.nodes[1-from].Self(), st, uint64(key), p)
		if err != nil {
			t.Fatal(err)
		}
		_, _, tag := tagOf(p)
		all = append(all, sent{from: from, tag: tag, r: r})
	}
	checkDelivered(t, fp, all)
	fired := 0
	for _, c := range fp.fn.Conns() {
		fired += len(c.Fired())
	}
	if fired < 3 {
		t.Fatalf("only %d cuts fired; the test did not exercise resume", fired)
	}
	t.Logf("%d cuts, %d connections", fired, len(fp.fn.Conns()))
}

// checkDelivered waits for every receipt and checks the ledgers: each
// non-cancelled envelope exactly once, per-key order, nothing corrupt.
func checkDelivered(t tb, fp *faultPair, all []sent) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, s := range all {
		err := s.r.Wait(ctx)
		if ctx.Err() != nil {
			t.Fatalf("receipt of %s never resolved; connections: %v", s.tag, fp.fn.Endpoints())
		}
		if err != nil && !s.cancels {
			t.Fatalf("send %s failed: %v", s.tag, err)
		}
	}
	fp.close() // deliverers stop, so the ledgers are final
	for i, b := range fp.books {
		b.mu.Lock()
		if len(b.errs) > 0 {
			t.Errorf("node %d: %v", i, b.errs)
		}
		b.mu.Unlock()
	}
	for _, s := range all {
		b := fp.books[1-s.from]
		b.mu.Lock()
		n := b.seen[s.tag]
		b.mu.Unlock()
		switch {
		case s.cancels && n > 1:
			t.Errorf("cancelled %s arrived %d times", s.tag, n)
		case !s.cancels && s.r.Err() == nil && n != 1:
			t.Errorf("%s arrived %d times, want exactly once", s.tag, n)
		case s.cancels && s.r.Err() == nil && n != 1:
			t.Errorf("%s was cancelled too late to drop, yet arrived %d times", s.tag, n)
		}
	}
}

// setChecks bounds rapid's iterations unless the caller chose a number, to
// keep the package's tests within their time budget.
func setChecks(n int) {
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == "100" {
		f.Value.Set(fmt.Sprint(n))
	}
}

func TestPropertyRandomWorkloadsWithRandomCutsDeliverExactlyOnceInKeyOrder(t *testing.T) {
	setChecks(12)
	rapid.Check(t, func(rt *rapid.T) {
		seed := rapid.Uint64().Draw(rt, "seed")
		cuts := rapid.IntRange(0, 5).Draw(rt, "cuts")
		maxCut := rapid.Int64Range(1, 600<<10).Draw(rt, "maxCut")
		plan := func(info faultnet.ConnInfo, rng *rand.Rand) []faultnet.Fault {
			if info.Seq >= cuts {
				return nil
			}
			dir := faultnet.CutWriteAt
			if rng.IntN(2) == 0 {
				dir = faultnet.CutReadAt
			}
			return []faultnet.Fault{dir(faultnet.MustBetween(rng, 0, maxCut))}
		}
		fp := newFaultPair(rt, seed, plan, nil)
		defer fp.close()
		n := rapid.IntRange(1, 80).Draw(rt, "envelopes")
		var all []sent
		for i := range n {
			from := rapid.IntRange(0, 1).Draw(rt, "from")
			st := rapid.SampledFrom([]StreamID{StreamControl, StreamMembership, StreamApplication, StreamReplication}).Draw(rt, "stream")
			key := uint16(rapid.IntRange(0, 3).Draw(rt, "key"))
			size := rapid.OneOf(rapid.IntRange(8, 200), rapid.IntRange(200, 80<<10), rapid.IntRange(80<<10, 1<<20)).Draw(rt, "size")
			if rapid.IntRange(0, 39).Draw(rt, "huge") == 0 {
				size = wire.DefaultMaxMessage // the largest envelope the limits allow
			}
			cancels := rapid.IntRange(0, 9).Draw(rt, "cancel") == 0
			ctx, cancel := context.WithCancel(context.Background())
			p := tagged(byte(from), st, key, uint32(i), size)
			r, err := fp.nodes[from].Send(ctx, fp.nodes[1-from].Self(), st, uint64(key), p)
			if err != nil {
				rt.Fatal(err)
			}
			if cancels {
				cancel()
			} else {
				defer cancel()
			}
			_, _, tag := tagOf(p)
			all = append(all, sent{from: from, tag: tag, r: r, cancels: cancels})
		}
		checkDelivered(rt, fp, all)
	})
}

func TestSendsPendingTowardsARestartedPeerFailWithErrPeerRestarted(t *testing.T) {
	fp := newFaultPair(t, 3, nil, nil)
	defer fp.close()
	a, b := fp.nodes[0], fp.nodes[1]
	r, _ := a.Send(context.Background(), b.Self(), StreamApplication, 1, tagged(0, StreamApplication, 1, 0, 10))
	if err := waitReceipt(t, r); err != nil {
		t.Fatal(err)
	}
	// B crashes: its connections break without a goodbye and nobody can
	// reach it.
	fp.fn.Partition(fp.addrs[0], fp.addrs[1], faultnet.Refuse)
	fp.fn.CutAll()
	var pending []*Receipt
	for i := range 5 {
		r, err := a.Send(context.Background(), b.Self(), StreamApplication, 1, tagged(0, StreamApplication, 1, uint32(i+1), 10))
		if err != nil {
			t.Fatal(err)
		}
		pending = append(pending, r)
	}
	b.Close()
	// It comes back on the same address with a new incarnation.
	ln, err := fp.fn.Listen(context.Background(), fp.addrs[1])
	if err != nil {
		t.Fatal(err)
	}
	b2, err := New(wire.Config{ClusterName: "test", Advertise: fp.addrs[1], Incarnation: 99, Dialer: fp.fn.Dialer(fp.addrs[1]),
		RedialMin: 5 * time.Millisecond, RedialMax: 50 * time.Millisecond, Limits: wire.Limits{MaxFrame: 64 << 10, Window: 64 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	go b2.Serve(ln)
	fp.fn.HealAll()
	for i, r := range pending {
		if err := waitReceipt(t, r); !errors.Is(err, wire.ErrPeerRestarted) {
			t.Fatalf("pending send %d: want wire.ErrPeerRestarted, got %v", i, err)
		}
	}
	if _, err := a.Send(context.Background(), b.Self(), StreamApplication, 1, []byte("x")); !errors.Is(err, wire.ErrPeerRestarted) {
		t.Fatalf("a send addressed to the old incarnation: want wire.ErrPeerRestarted, got %v", err)
	}
	r, err = a.Send(context.Background(), b2.Self(), StreamApplication, 1, tagged(0, StreamApplication, 1, 100, 10))
	if err != nil {
		t.Fatal(err)
	}
	if err := waitReceipt(t, r); err != nil {
		t.Fatalf("a send to the new incarnation: %v", err)
	}
}

// TestCutsDuringTheHandshakeAndResumeLoseNothing cuts the first
// connections at every few bytes of their first few hundred: inside the
// hellos, the resume counts and the confirm, on either side.
func TestCutsDuringTheHandshakeAndResumeLoseNothing(t *testing.T) {
	for at := int64(0); at < 360; at += 12 {
		for _, accepted := range []bool{false, true} {
			plan := func(info faultnet.ConnInfo, rng *rand.Rand) []faultnet.Fault {
				if info.Seq >= 2 || info.Accepted != accepted {
					return nil
				}
				return []faultnet.Fault{faultnet.CutWriteAt(at + int64(info.Seq)*5)}
			}
			fp := newFaultPair(t, uint64(at), plan, nil)
			var all []sent
			for i := range 6 {
				from := i % 2
				p := tagged(byte(from), StreamApplication, 1, uint32(i), 3000)
				r, err := fp.nodes[from].Send(context.Background(), fp.nodes[1-from].Self(), StreamApplication, 1, p)
				if err != nil {
					t.Fatal(err)
				}
				_, _, tag := tagOf(p)
				all = append(all, sent{from: from, tag: tag, r: r})
			}
			checkDelivered(t, fp, all)
		}
	}
}

// Posted payloads whose buffers the transport reuses (Buffer) arrive whole
// through repeated cuts and resumes: a buffer handed out again while a
// frame of its envelope could still be written or replayed would corrupt
// a later envelope or this one.
func TestPostedBuffersReusedAcrossCutsAndResumesStayWhole(t *testing.T) {
	fp := newFaultPair(t, 11, eightCuts, nil)
	defer fp.close()
	rng := rand.New(rand.NewPCG(11, 11))
	const n = 400
	want := map[string]bool{}
	for i := range n {
		from := i % 2
		key := uint16(rng.IntN(4))
		size := 32<<10 + rng.IntN(40<<10) // pooled sizes
		p := fp.nodes[from].Buffer(size)[:size]
		tag := tagInto(p, byte(from), StreamApplication, key, uint32(i))
		if err := fp.nodes[from].Post(fp.nodes[1-from].Self(), StreamApplication, uint64(key), p); err != nil {
			t.Fatal(err)
		}
		want[tag] = true
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := 0
		for _, b := range fp.books {
			b.mu.Lock()
			got += len(b.seen)
			b.mu.Unlock()
		}
		if got == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d posted envelopes arrived", got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	fp.close()
	for i, b := range fp.books {
		b.mu.Lock()
		if len(b.errs) > 0 {
			t.Errorf("node %d: %v", i, b.errs)
		}
		for tag := range b.seen {
			if !want[tag] {
				t.Errorf("node %d got %s, which nobody posted", i, tag)
			}
		}
		b.mu.Unlock()
	}
	fired := 0
	for _, c := range fp.fn.Conns() {
		fired += len(c.Fired())
	}
	if fired < 3 {
		t.Fatalf("only %d cuts fired; the test did not exercise resume", fired)
	}
}

// tagInto writes tagged's bytes into p and returns the tag.
func tagInto(p []byte, sender byte, st StreamID, key uint16, seq uint32) string {
	p[0], p[1] = sender, byte(st)
	binary.BigEndian.PutUint16(p[2:], key)
	binary.BigEndian.PutUint32(p[4:], seq)
	fill(p[8:], seq)
	_, _, tag := tagOf(p)
	return tag
}
