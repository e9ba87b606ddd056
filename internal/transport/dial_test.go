package transport

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/faultnet"
	"github.com/troupe-go/troupe/ring"
	"github.com/troupe-go/troupe/wire"
)

// describe dumps a transport's sessions for failure messages.
func describe(tr *Transport) string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := fmt.Sprintf("%v:", tr.Self())
	for k, s := range tr.sessions {
		s.mu.Lock()
		conn := "none"
		if s.conn != nil {
			conn = s.conn.LocalAddr().String() + "->" + s.conn.RemoteAddr().String()
		}
		out += fmt.Sprintf("\n  %s id=%v conn=%s dialing=%v activating=%v queued=%d replay=%d up=%v", k, s.id, conn, s.dialing, s.activating != nil, s.queued.n, len(s.replay), s.up)
		s.mu.Unlock()
	}
	return out
}

// activeConns returns the local and remote addresses of a session's active
// connection, if any.
func activeConn(tr *Transport, peer ring.NodeID) (local, remote string, ok bool) {
	s, _ := tr.sessionFor(peer, false)
	if s == nil {
		return "", "", false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil {
		return "", "", false
	}
	return s.conn.LocalAddr().String(), s.conn.RemoteAddr().String(), true
}

// The simultaneous-dial rule is part of the protocol: peers of every
// version rank identities by incarnation first, unlike ring.NodeID.Compare.
func TestDialOrderRanksIncarnationBeforeAddress(t *testing.T) {
	older := ring.NodeID{Addr: "10.0.0.2:7400", Incarnation: 1}
	newer := ring.NodeID{Addr: "10.0.0.1:7400", Incarnation: 2}
	sameInc := ring.NodeID{Addr: "10.0.0.3:7400", Incarnation: 1}
	for _, c := range []struct {
		a, b ring.NodeID
		want int
	}{
		{older, newer, -1}, {newer, older, 1}, {older, older, 0},
		{older, sameInc, -1}, {sameInc, older, 1},
	} {
		if got := dialOrder(c.a, c.b); got != c.want {
			t.Errorf("expected dialOrder(%v, %v) = %d; got %d", c.a, c.b, c.want, got)
		}
	}
}

func TestSimultaneousDialKeepsOneConnectionAndLosesNothingIn100SeededTrials(t *testing.T) {
	for trial := range 100 {
		rng := rand.New(rand.NewPCG(uint64(trial), 11))
		fp := newFaultPair(t, uint64(trial), nil, func(c *wire.Config) {
			// Random incarnation order, so either side may be the smaller.
			c.Incarnation = 1 + rng.Uint64N(1000)
		})
		if fp.nodes[0].Self().Incarnation == fp.nodes[1].Self().Incarnation {
			fp.close()
			continue
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		var all []sent
		for i := range 2 {
			delay := time.Duration(rng.IntN(500)) * time.Microsecond
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(delay) // jitter: the trial's seed decides which dial starts first
				for j := range 20 {
					p := tagged(byte(i), StreamApplication, uint16(j%3), uint32(j), 100+j*50)
					r, err := fp.nodes[i].Send(context.Background(), fp.nodes[1-i].Self(), StreamApplication, uint64(j%3), p)
					if err != nil {
						t.Error(err)
						return
					}
					_, _, tag := tagOf(p)
					mu.Lock()
					all = append(all, sent{from: i, tag: tag, r: r})
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		for _, s := range all {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			err := s.r.Wait(ctx)
			cancel()
			if err != nil {
				t.Fatalf("trial %d: %s: %v\n%s\n%s", trial, s.tag, err, describe(fp.nodes[0]), describe(fp.nodes[1]))
			}
		}
		// Both sides must settle on the same single connection.
		var la, ra, lb, rb string
		var oka, okb bool
		eventuallyf(t, func() bool {
			la, ra, oka = activeConn(fp.nodes[0], fp.nodes[1].Self())
			lb, rb, okb = activeConn(fp.nodes[1], fp.nodes[0].Self())
			return oka && okb && la == rb && ra == lb
		}, func() string {
			return fmt.Sprintf("trial %d: sides disagree on the connection: %v %s<->%s, %v %s<->%s", trial, oka, la, ra, okb, lb, rb)
		})
		checkDelivered(t, fp, all)
	}
}

func TestADialSwallowedByARelayYieldsToThePeersDial(t *testing.T) {
	relay, err := faultnet.NewSilentRelay(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	fp := newFaultPair(t, 1, nil, func(c *wire.Config) { c.HandshakeTimeout = time.Second })
	defer fp.close()
	// Node 0 has the smaller incarnation, so its dial would win, but its
	// dials reach a relay that never carries them. Rebuild it with an
	// address map pointing at the relay.
	a, b := fp.nodes[0], fp.nodes[1]
	a.cfg.AddressMap = map[string]string{b.Self().Addr: relay.Addr()}
	ra, err := a.Send(context.Background(), b.Self(), StreamApplication, 1, tagged(0, StreamApplication, 1, 1, 10))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "a's dial stuck in the relay", func() bool { return relay.Accepted() > 0 })
	rb, err := b.Send(context.Background(), a.Self(), StreamApplication, 1, tagged(1, StreamApplication, 1, 1, 10))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*Receipt{ra, rb} {
		if err := waitReceipt(t, r); err != nil {
			t.Fatalf("send across the peer's dial: %v", err)
		}
	}
	if relay.Accepted() == 0 {
		t.Fatalf("the relay never saw a's dial; the test did not exercise the rule")
	}
}

func TestARefusedPeerFailsPendingSendsWithTheReason(t *testing.T) {
	a := newTestNode(t, nil)
	b := newTestNode(t, func(c *wire.Config) { c.ClusterName = "other" })
	r, err := a.t.Send(context.Background(), b.t.Self(), StreamApplication, 1, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	err = waitReceipt(t, r)
	var ref *wire.Refused
	if !errors.As(err, &ref) || ref.Reason != wire.RefusedCluster || !ref.ByPeer {
		t.Fatalf("want *wire.Refused{cluster, by peer}, got %v", err)
	}
}

func TestPeerDeadFailsPendingSendsAtOnce(t *testing.T) {
	fp := newFaultPair(t, 5, nil, nil)
	defer fp.close()
	a, b := fp.nodes[0], fp.nodes[1]
	r, _ := a.Send(context.Background(), b.Self(), StreamApplication, 1, tagged(0, StreamApplication, 1, 0, 10))
	if err := waitReceipt(t, r); err != nil {
		t.Fatal(err)
	}
	fp.fn.Partition(fp.addrs[0], fp.addrs[1], faultnet.Blackhole)
	fp.fn.CutAll()
	r, _ = a.Send(context.Background(), b.Self(), StreamApplication, 1, tagged(0, StreamApplication, 1, 1, 10))
	a.PeerDead(b.Self())
	if err := waitReceipt(t, r); !errors.Is(err, wire.ErrPeerDead) {
		t.Fatalf("want wire.ErrPeerDead, got %v", err)
	}
}

func TestCancellingBeforeTheFirstByteDropsTheEnvelope(t *testing.T) {
	fp := newFaultPair(t, 6, nil, nil)
	defer fp.close()
	a, b := fp.nodes[0], fp.nodes[1]
	fp.fn.Partition(fp.addrs[0], fp.addrs[1], faultnet.Refuse)
	ctx, cancel := context.WithCancel(context.Background())
	r, err := a.Send(ctx, b.Self(), StreamApplication, 1, tagged(0, StreamApplication, 1, 0, 10))
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := waitReceipt(t, r); !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
	fp.fn.HealAll()
	r2, _ := a.Send(context.Background(), b.Self(), StreamApplication, 1, tagged(0, StreamApplication, 1, 1, 10))
	if err := waitReceipt(t, r2); err != nil {
		t.Fatal(err)
	}
	fp.close()
	if n := fp.books[1].seen["0/2/1#0"]; n != 0 {
		t.Fatalf("the cancelled envelope arrived %d times", n)
	}
}
