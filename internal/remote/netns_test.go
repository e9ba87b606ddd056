package remote

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/netns"
	"github.com/troupe-go/troupe/internal/transport"
	"github.com/troupe-go/troupe/ring"
	"github.com/troupe-go/troupe/wire"
)

// Members on two hosts of a network-namespace lab: real kernels, real
// TCP, tc's tbf between them. The tests need root (they skip otherwise).

type hostDialer struct{ h *netns.Host }

func (d hostDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return d.h.Dial(ctx, network, addr)
}

// labMembers starts a member on each of two lab hosts, over transports
// that take messages of up to 8 MiB, both placing keys on both, with each
// host's egress capped at rate.
func labMembers(t *testing.T, rate netns.Rate) (*netns.Lab, *testNode, *testNode) {
	t.Helper()
	ctx := context.Background()
	lab := netns.New(ctx, t, netns.Config{Hosts: 2})
	var ns [2]*testNode
	for i := range ns {
		h := lab.Host(i)
		addr := netip.AddrPortFrom(h.Addr, 7100).String()
		ln, err := h.Listen(ctx, "tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := transport.New(wire.Config{ClusterName: "lab", Advertise: addr, Incarnation: uint64(i + 1),
			Dialer: hostDialer{h}, Limits: wire.Limits{MaxMessage: 8 << 20}, Compression: wire.Compression{Disable: true}})
		if err != nil {
			t.Fatal(err)
		}
		go tr.Serve(ln)
		ns[i] = startTestNode(t, ring.NodeID{Addr: addr, Incarnation: uint64(i + 1)}, tr, func() { tr.Close() })
		if err := lab.LimitEgress(ctx, h, rate); err != nil {
			t.Fatal(err)
		}
	}
	a, b := ns[0], ns[1]
	a.setView(a, b)
	b.setView(a, b)
	return lab, a, b
}

// txBytes returns what host h has sent on its link.
func txBytes(t *testing.T, h *netns.Host) int64 {
	t.Helper()
	out, err := h.Run(context.Background(), "cat", "/sys/class/net/eth0/statistics/tx_bytes")
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// settled waits until host h's link carries no more than pings and
// grants (under 16 KiB in 300 ms) and returns its byte count then.
func settled(t *testing.T, h *netns.Host) int64 {
	t.Helper()
	prev := txBytes(t, h)
	for deadline := time.Now().Add(20 * time.Second); ; {
		// Not a synchronisation: the measure is the link's rate.
		time.Sleep(300 * time.Millisecond)
		n := txBytes(t, h)
		if n-prev < 16<<10 {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("host %d still sends %d bytes per 300 ms", h.Index, n-prev)
		}
		prev = n
	}
}

// keyOn returns a key of typ that a places on b, in lane (or any lane
// when lane < 0), after skip others.
func keyOn(t *testing.T, a, b *testNode, typ string, lane, skip int) string {
	t.Helper()
	return keyWhere(t, func(k string) bool {
		if ringOwner(a, b, typ, k) != b.id || (lane >= 0 && int(a.r.Token(typ, k)%8) != lane) {
			return false
		}
		skip--
		return skip < 0
	})
}

// An ask whose asker stopped waiting takes its unsent bytes off the link,
// and so does the reply to an ask the owner knows was withdrawn: what
// crosses stops growing well before the 3 MiB the request or the reply
// holds.
func TestLabWithdrawnAskAndItsReplyStopTakingTheLink(t *testing.T) {
	lab, a, b := labMembers(t, 20*netns.Mbit) // 3 MiB take 1.3 s
	key := keyOn(t, a, b, "blob", -1, 0)
	if _, err := actor.Ask(ctxT(t), blob.Ref(a, key), blobList{}); err != nil {
		t.Fatal(err) // the connection is up
	}
	const size = 3 << 20
	ask := func(m blobMsg) {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		var err error
		switch m := m.(type) {
		case blobEcho:
			_, err = actor.Ask(ctx, blob.Ref(a, key), m)
		case blobGet:
			_, err = actor.Ask(ctx, blob.Ref(a, key), m)
		}
		if err == nil {
			t.Fatalf("%T of 3 MiB answered within 300 ms at 20 Mbit/s", m)
		}
	}

	from := settled(t, lab.Host(0))
	ask(blobEcho{Pad: noise(size)})
	sent := settled(t, lab.Host(0)) - from
	t.Logf("a 3 MiB request withdrawn after 300 ms at 20 Mbit/s: %d bytes crossed", sent)
	if sent > size/2 {
		t.Errorf("the asker sent %d bytes of a 3 MiB request it stopped waiting for after 300 ms; want its unsent part dropped", sent)
	}

	from = settled(t, lab.Host(1))
	ask(blobGet{Size: size})
	sent = settled(t, lab.Host(1)) - from
	t.Logf("a 3 MiB reply to an ask withdrawn after 300 ms at 20 Mbit/s: %d bytes crossed", sent)
	if sent > size/2 {
		t.Errorf("the owner sent %d bytes of a 3 MiB reply to an ask withdrawn after 300 ms; want its unsent part dropped", sent)
	}
}

// A small ask never waits for a large message to cross: while another
// actor of the same member streams 4 MiB messages to the same peer on a
// 50 Mbit/s link, the small asks' p99 stays within the idle p99 plus
// milliseconds, where it took seconds when they shared a lane. The goal
// is 10 ms (the figures are in docs/wire.md); the bound asserted is
// looser, for a loaded 2-core machine and the race detector.
func TestLabSmallAsksDoNotWaitForLargeMessagesToCross(t *testing.T) {
	_, a, b := labMembers(t, 50*netns.Mbit)
	if testing.Short() {
		t.Skip("measures for seconds")
	}
	var small []string
	for lane := range 8 {
		small = append(small, keyOn(t, a, b, "counter", lane, 0))
	}
	large := []string{keyOn(t, a, b, "blob", 2, 0), keyOn(t, a, b, "blob", 5, 0)}
	p99 := func(d time.Duration) time.Duration {
		var lat []time.Duration
		for end := time.Now().Add(d); time.Now().Before(end); {
			start := time.Now()
			if _, err := actor.Ask(ctxT(t), counter.Ref(a, small[len(lat)%len(small)]), get{}); err != nil {
				t.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
		slices.Sort(lat)
		return lat[len(lat)*99/100]
	}
	p99(200 * time.Millisecond) // warm up
	idle := p99(time.Second)

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var crossed [2]int
	for i, k := range large {
		wg.Go(func() {
			pad := noise(4 << 20)
			for ctx.Err() == nil {
				if _, err := actor.Ask(ctx, blob.Ref(a, k), blobEcho{Pad: pad}); err == nil {
					crossed[i]++
				}
			}
		})
	}
	loaded := p99(4 * time.Second)
	stop()
	wg.Wait()
	t.Logf("small asks' p99 at 50 Mbit/s: idle %v, while 4 MiB messages stream %v (%d of them crossed)", idle, loaded, crossed[0]+crossed[1])
	if crossed[0]+crossed[1] < 2 {
		t.Fatalf("only %d messages of 4 MiB crossed in 4 s at 50 Mbit/s; the link was not loaded", crossed[0]+crossed[1])
	}
	// The goal is idle + 10 ms (6 to 8 ms here on a quiet machine, see
	// docs/cluster.md); the bound leaves room for a busy one and still
	// fails at what sharing a lane cost (seconds).
	bound := idle + 30*time.Millisecond
	if raceOn {
		// The detector's cost on 4 MiB messages saturates two cores:
		// about 100 ms; sharing a lane cost seconds.
		bound = idle + 300*time.Millisecond
	}
	if loaded > bound {
		t.Errorf("small asks' p99 %v while 4 MiB messages stream; want at most %v (idle p99 %v)", loaded, bound, idle)
	}
}
