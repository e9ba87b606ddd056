package membership

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/transport"
	"github.com/troupe-go/troupe/ring"

	"github.com/troupe-go/troupe/wire"
)

// memPair returns two adapters on one in-memory wire network, each
// delivering into a channel.
func memPair(t *testing.T) (a, b *WireTransport, gotA, gotB chan Message, epA transport.Endpoint) {
	t.Helper()
	mn := transport.NewMemNetwork()
	mk := func(addr string, inc uint64) (*WireTransport, chan Message, transport.Endpoint) {
		ep, err := mn.Join(ring.NodeID{Addr: addr, Incarnation: inc})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ep.Close() })
		wt := NewWireTransport(ep, WireOptions{})
		t.Cleanup(func() { wt.Close() })
		got := make(chan Message, 16)
		wt.SetReceiver(func(ctx context.Context, m Message) error {
			got <- m
			return nil
		})
		return wt, got, ep
	}
	a, gotA, epA = mk("10.0.0.1:7400", 1)
	b, gotB, _ = mk("10.0.0.2:7400", 2)
	return a, b, gotA, gotB, epA
}

func receiveOne(t *testing.T, ch chan Message) Message {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(wideBound):
		t.Fatal("expected a message to arrive")
		return Message{}
	}
}

func TestWireTransportCarriesMessagesByAddress(t *testing.T) {
	a, _, _, gotB, _ := memPair(t)
	msg := Message{Type: MsgPing, From: a.Self(), Records: []Member{{ID: a.Self(), Incarnation: 3, Status: StatusAlive}}}
	if err := a.Send(t.Context(), "10.0.0.2:7400", msg); err != nil {
		t.Fatal(err)
	}
	got := receiveOne(t, gotB)
	if got.Type != MsgPing || got.From != a.Self() || len(got.Records) != 1 || !got.Records[0].Equal(msg.Records[0]) {
		t.Errorf("expected the ping to arrive intact, got %+v", got)
	}
}

func TestWireTransportDropsAMessageWhoseSenderIsNotTheConnectionsPeer(t *testing.T) {
	a, _, _, gotB, _ := memPair(t)
	forged := Message{Type: MsgGossip, From: ring.NodeID{Addr: "10.0.0.3:7400", Incarnation: 9}}
	honest := Message{Type: MsgPing, From: a.Self()}
	for _, m := range []Message{forged, honest} {
		if err := a.Send(t.Context(), "10.0.0.2:7400", m); err != nil {
			t.Fatal(err)
		}
	}
	if got := receiveOne(t, gotB); got.Type != MsgPing {
		t.Errorf("expected the forged message to be dropped and the honest one delivered, got %v from %v", got.Type, got.From)
	}
}

func TestWireTransportDropsUndecodableEnvelopes(t *testing.T) {
	a, _, _, gotB, epA := memPair(t)
	if _, err := epA.Send(t.Context(), ring.NodeID{Addr: "10.0.0.2:7400"}, transport.StreamMembership, 0, []byte{0xc1, 0x00}); err != nil {
		t.Fatal(err)
	}
	if err := a.Send(t.Context(), "10.0.0.2:7400", Message{Type: MsgAck, From: a.Self()}); err != nil {
		t.Fatal(err)
	}
	if got := receiveOne(t, gotB); got.Type != MsgAck {
		t.Errorf("expected only the valid message to be delivered, got %v", got.Type)
	}
}

func TestWireTransportReportsLastHeardFromAnyBytes(t *testing.T) {
	a, b, gotA, _, _ := memPair(t)
	if !a.LastHeard("10.0.0.2:7400").IsZero() {
		t.Fatal("expected nothing heard before any traffic")
	}
	if err := b.Send(t.Context(), "10.0.0.1:7400", Message{Type: MsgPing, From: b.Self()}); err != nil {
		t.Fatal(err)
	}
	receiveOne(t, gotA)
	if a.LastHeard("10.0.0.2:7400").IsZero() {
		t.Error("expected LastHeard to report the arrival")
	}
}

func TestWireTransportExpiresMessagesToAnUnreachableAddress(t *testing.T) {
	ln := listenLoopback(t)
	wt, err := transport.New(wire.Config{ClusterName: "troupe", Advertise: ln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	ln.Close() // nothing serves; this transport only dials
	defer wt.Close()
	mt := NewWireTransport(wt, WireOptions{MessageTTL: 200 * time.Millisecond})
	defer mt.Close()
	gone := listenLoopback(t)
	addr := gone.Addr().String()
	gone.Close()
	for range 10 {
		if err := mt.Send(t.Context(), addr, Message{Type: MsgPing, From: mt.Self()}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), wideBound)
	defer cancel()
	start := time.Now()
	if err := mt.Flush(ctx); err != nil {
		t.Fatalf("expected every message to an unreachable address to expire, Flush: %v", err)
	}
	t.Logf("messages to a closed port expired after %v (TTL 200ms)", time.Since(start).Round(time.Millisecond))
}

func TestWireTransportSendAfterTheContextEndedFails(t *testing.T) {
	a, _, _, _, _ := memPair(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := a.Send(ctx, "10.0.0.2:7400", Message{Type: MsgPing, From: a.Self()}); err == nil {
		t.Error("expected Send with an ended context to fail")
	}
}

var _ net.Listener = (*crashNet)(nil)

// The transport's suspicion (the connection broke and a redial failed)
// reaches whoever SetUnreachable named, with the peer's identity.
func TestWireTransportReportsAPeerItCannotReachAgain(t *testing.T) {
	mn := transport.NewMemNetwork()
	aID, bID := ring.NodeID{Addr: "10.0.0.1:7400", Incarnation: 1}, ring.NodeID{Addr: "10.0.0.2:7400", Incarnation: 2}
	var eps []*transport.MemEndpoint
	for _, id := range []ring.NodeID{aID, bID} {
		ep, err := mn.Join(id)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ep.Close() })
		eps = append(eps, ep)
	}
	a := NewWireTransport(eps[0], WireOptions{})
	t.Cleanup(func() { a.Close() })
	b := NewWireTransport(eps[1], WireOptions{})
	t.Cleanup(func() { b.Close() })
	gotB := make(chan Message, 4)
	b.SetReceiver(func(_ context.Context, m Message) error { gotB <- m; return nil })
	unreachable := make(chan ring.NodeID, 4)
	a.SetUnreachable(func(id ring.NodeID, _ time.Time) { unreachable <- id })

	if err := a.Send(t.Context(), bID.Addr, Message{Type: MsgPing, From: aID}); err != nil {
		t.Fatal(err)
	}
	receiveOne(t, gotB)
	mn.Partition(aID.Addr, bID.Addr)
	if err := a.Send(t.Context(), bID.Addr, Message{Type: MsgPing, From: aID}); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-unreachable:
		if id != bID {
			t.Fatalf("expected the unreachable peer to be %v; got %v", bID, id)
		}
	case <-time.After(wideBound):
		t.Fatal("expected the failed redial to be reported as unreachable")
	}
}
