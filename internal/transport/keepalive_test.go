package transport

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/faultnet"
	"github.com/troupe-go/troupe/ring"
	"github.com/troupe-go/troupe/wire"
)

// keepalive sets KeepaliveAfter and KeepaliveTimeout to d, so the resume
// grace is 3d. These tests assert outcomes, not durations, but a grace
// shorter than a redial on a loaded machine would fail them: d is chosen
// well above scheduling delays.
func keepalive(d time.Duration) func(*wire.Config) {
	return func(c *wire.Config) {
		c.KeepaliveAfter = d
		c.KeepaliveTimeout = d
	}
}

func TestAnIdleConnectionStaysUpOnPings(t *testing.T) {
	fp := newFaultPair(t, 8, nil, func(c *wire.Config) {
		c.KeepaliveAfter = 20 * time.Millisecond
		c.KeepaliveTimeout = 5 * time.Second
	})
	defer fp.close()
	a, b := fp.nodes[0], fp.nodes[1]
	r, _ := a.Send(context.Background(), b.Self(), StreamControl, 0, tagged(0, StreamControl, 0, 0, 10))
	if err := waitReceipt(t, r); err != nil {
		t.Fatal(err)
	}
	// Wait for the last credit frames to land, so that from here on only
	// pings and pongs cross.
	waitState(t, a, b.Self(), "the envelope credited back", func(st sessionState) bool {
		return st.resendSize == 0 && st.available == st.window
	})
	l1, _, _ := activeConn(a, b.Self())
	before, _ := a.LastHeard(b.Self())
	pings := stateOf(t, a, b.Self()).pings
	// Silence from the layers above for several keepalive periods: the
	// peer is still heard from, through pongs to our pings.
	waitState(t, a, b.Self(), "three more pings sent", func(st sessionState) bool { return st.pings >= pings+3 })
	eventually(t, "the idle peer heard from again (pings answered)", func() bool {
		heard, _ := a.LastHeard(b.Self())
		return heard.After(before)
	})
	l2, _, ok := activeConn(a, b.Self())
	if !ok || l1 != l2 {
		t.Fatalf("the idle connection was replaced: %s then %s (%v)", l1, l2, ok)
	}
}

func TestASilentConnectionIsGivenUpAndTheSessionResumes(t *testing.T) {
	fp := newFaultPair(t, 9, nil, keepalive(300*time.Millisecond))
	defer fp.close()
	a, b := fp.nodes[0], fp.nodes[1]
	r, _ := a.Send(context.Background(), b.Self(), StreamApplication, 1, tagged(0, StreamApplication, 1, 0, 10))
	if err := waitReceipt(t, r); err != nil {
		t.Fatal(err)
	}
	for _, c := range fp.fn.Conns() {
		c.Stall() // a path that silently stops carrying
	}
	var all []sent
	for i := 1; i <= 20; i++ {
		p := tagged(0, StreamApplication, 1, uint32(i), 5000)
		r, err := a.Send(context.Background(), b.Self(), StreamApplication, 1, p)
		if err != nil {
			t.Fatal(err)
		}
		_, _, tag := tagOf(p)
		all = append(all, sent{from: 0, tag: tag, r: r})
	}
	checkDelivered(t, fp, all)
}

func TestAPeerUnreachablePastTheGraceIsDeclaredDead(t *testing.T) {
	fp := newFaultPair(t, 10, nil, keepalive(30*time.Millisecond))
	defer fp.close()
	a, b := fp.nodes[0], fp.nodes[1]
	events := make(chan PeerEvent, 16)
	a.OnPeerEvent(func(e PeerEvent) { events <- e })
	r, _ := a.Send(context.Background(), b.Self(), StreamApplication, 1, tagged(0, StreamApplication, 1, 0, 10))
	if err := waitReceipt(t, r); err != nil {
		t.Fatal(err)
	}
	fp.fn.Partition(fp.addrs[0], fp.addrs[1], faultnet.Refuse)
	fp.fn.CutAll()
	r, _ = a.Send(context.Background(), b.Self(), StreamApplication, 1, tagged(0, StreamApplication, 1, 1, 10))
	if err := waitReceipt(t, r); !errors.Is(err, wire.ErrPeerDead) {
		t.Fatalf("after 2×KeepaliveAfter+KeepaliveTimeout unreachable: want wire.ErrPeerDead, got %v", err)
	}
	timeout := time.After(10 * time.Second)
	var suspected bool
	for {
		select {
		case e := <-events:
			if e.Suspect && e.Peer == b.Self() {
				suspected = true
			}
			if !e.Up && !e.Suspect && e.Peer == b.Self() && errors.Is(e.Err, wire.ErrPeerDead) {
				if !suspected {
					t.Fatal("the failed redials should have reported the peer suspect before it was lost")
				}
				return
			}
		case <-timeout:
			t.Fatal("no peer-down event")
		}
	}
}

func TestAClientResumesAfterACutAndIsDroppedAfterTheGrace(t *testing.T) {
	fp := newFaultPair(t, 12, nil, keepalive(300*time.Millisecond))
	defer fp.close()
	node := fp.nodes[1]
	client := startFaultClient(t, fp, node, 77)
	// The node answers the client by its identity; nobody can dial it.
	fp.fn.CutAll()
	r, err := node.Send(context.Background(), client.Self(), StreamApplication, 1, []byte("reply"))
	if err != nil {
		t.Fatal(err)
	}
	// The client redials (it knows the node's address) and the session resumes.
	r2, _ := client.Send(context.Background(), node.Self(), StreamApplication, 1, tagged(9, StreamApplication, 1, 1, 10))
	if err := waitReceipt(t, r2); err != nil {
		t.Fatal(err)
	}
	if err := waitReceipt(t, r); err != nil {
		t.Fatalf("reply to a client across a cut: %v", err)
	}
	// Now the client goes away for good (no goodbye): the node gives up
	// after the resume grace.
	fp.fn.Partition("client", fp.addrs[1], faultnet.Refuse)
	fp.fn.CutAll()
	r, _ = node.Send(context.Background(), client.Self(), StreamApplication, 1, []byte("lost"))
	if err := waitReceipt(t, r); !errors.Is(err, wire.ErrPeerDead) {
		t.Fatalf("a client gone past the grace: want wire.ErrPeerDead, got %v", err)
	}
}

// startFaultClient starts a client of incarnation inc that dials node
// through fp's fault network with a 300 ms keepalive, and sends node one
// envelope, acknowledged; it returns the client, closed at the test's
// end.
func startFaultClient(t *testing.T, fp *faultPair, node *Transport, inc uint64) *Transport {
	t.Helper()
	client, err := New(wire.Config{ClusterName: "test", Incarnation: inc, Dialer: fp.fn.Dialer("client"),
		RedialMin: 5 * time.Millisecond, RedialMax: 50 * time.Millisecond,
		KeepaliveAfter: 300 * time.Millisecond, KeepaliveTimeout: 300 * time.Millisecond,
		Limits: wire.Limits{MaxFrame: 64 << 10, Window: 64 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	replies := make(chan []byte, 16)
	client.Handle(StreamApplication, HandlerFunc(func(_ ring.NodeID, p []byte) { replies <- p }))
	r, _ := client.Send(context.Background(), node.Self(), StreamApplication, 1, tagged(9, StreamApplication, 1, 0, 10))
	if err := waitReceipt(t, r); err != nil {
		t.Fatal(err)
	}
	return client
}
