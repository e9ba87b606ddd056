package transport

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/netns"
	"github.com/troupe-go/troupe/ring"
	"github.com/troupe-go/troupe/wire"
)

// hostDialer dials from inside a lab host.
type hostDialer struct{ h *netns.Host }

func (d hostDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return d.h.Dial(ctx, network, addr)
}

// labPair runs two transports on two hosts of a network-namespace lab:
// real kernels, real TCP, real tc and nftables between them.
func labPair(t *testing.T, mutate func(*wire.Config)) (*netns.Lab, *faultPair) {
	t.Helper()
	ctx := context.Background()
	lab := netns.New(ctx, t, netns.Config{Hosts: 2})
	fp := &faultPair{}
	var lns [2]net.Listener
	for i := range fp.nodes {
		h := lab.Host(i)
		ln, err := h.Listen(ctx, "tcp", netip.AddrPortFrom(h.Addr, 7000).String())
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
		fp.addrs[i] = ln.Addr().String()
	}
	for i := range fp.nodes {
		cfg := wire.Config{
			ClusterName: "lab", Advertise: fp.addrs[i], Incarnation: uint64(i + 1),
			Dialer: hostDialer{lab.Host(i)}, HandshakeTimeout: 2 * time.Second,
			RedialMin: 20 * time.Millisecond, RedialMax: 200 * time.Millisecond,
			KeepaliveAfter: time.Second, KeepaliveTimeout: time.Second,
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
	t.Cleanup(fp.close)
	return lab, fp
}

func sendBatch(t *testing.T, fp *faultPair, from int, first, n, size int) []sent {
	t.Helper()
	var all []sent
	for i := first; i < first+n; i++ {
		p := tagged(byte(from), StreamApplication, uint16(i%3), uint32(i), size)
		r, err := fp.nodes[from].Send(context.Background(), fp.nodes[1-from].Self(), StreamApplication, uint64(i%3), p)
		if err != nil {
			t.Fatal(err)
		}
		_, _, tag := tagOf(p)
		all = append(all, sent{from: from, tag: tag, r: r})
	}
	return all
}

func TestLabResetsMidTransferResumeWithoutLossOrDuplicates(t *testing.T) {
	lab, fp := labPair(t, nil)
	ctx := context.Background()
	all := sendBatch(t, fp, 0, 0, 50, 40<<10)
	waitReceipt(t, all[0].r)
	// Reset every connection between the hosts for a moment: open
	// connections see an RST, dials are refused, then the path heals.
	if err := lab.Reject(ctx, lab.Host(0), lab.Host(1)); err != nil {
		t.Fatal(err)
	}
	all = append(all, sendBatch(t, fp, 0, 50, 50, 40<<10)...)
	all = append(all, sendBatch(t, fp, 1, 0, 50, 40<<10)...)
	eventually(t, "the reset seen by both sides", func() bool {
		_, _, upA := activeConn(fp.nodes[0], fp.nodes[1].Self())
		_, _, upB := activeConn(fp.nodes[1], fp.nodes[0].Self())
		return !upA && !upB
	})
	if err := lab.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	checkDelivered(t, fp, all)
}

func TestLabPartitionShorterThanTheGraceLosesNothing(t *testing.T) {
	lab, fp := labPair(t, nil)
	ctx := context.Background()
	all := sendBatch(t, fp, 0, 0, 20, 10<<10)
	waitReceipt(t, all[0].r)
	// Packets silently dropped: the connection goes quiet, keepalive
	// gives it up, redials time out until the partition heals.
	if err := lab.Partition(ctx, []*netns.Host{lab.Host(0)}, []*netns.Host{lab.Host(1)}); err != nil {
		t.Fatal(err)
	}
	all = append(all, sendBatch(t, fp, 0, 20, 20, 10<<10)...)
	all = append(all, sendBatch(t, fp, 1, 0, 20, 10<<10)...)
	// Heal once keepalive has given the quiet connection up, within the
	// grace.
	eventually(t, "the quiet connection given up", func() bool {
		_, _, up := activeConn(fp.nodes[0], fp.nodes[1].Self())
		return !up
	})
	if err := lab.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	checkDelivered(t, fp, all)
}

func TestLabBandwidthCapCarriesLargeAndSmallEnvelopes(t *testing.T) {
	lab, fp := labPair(t, nil)
	ctx := context.Background()
	if err := lab.LimitEgress(ctx, lab.Host(0), 50*netns.Mbit); err != nil {
		t.Fatal(err)
	}
	all := sendBatch(t, fp, 0, 0, 4, 1<<20)
	all = append(all, sendBatch(t, fp, 0, 4, 100, 100)...)
	checkDelivered(t, fp, all)
}
