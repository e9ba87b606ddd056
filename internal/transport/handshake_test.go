package transport

import (
	"context"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/troupe-go/troupe/ring"
	"github.com/troupe-go/troupe/wire"
)

func testLocal(addr string, inc uint64) *local {
	return &local{
		cluster: "test",
		node:    ring.NodeID{Addr: addr, Incarnation: inc},
		limits:  limitsWithDefaults(wire.Limits{}),
		codecs:  codecOffers(wire.Compression{}),
		timeout: 5 * time.Second,
	}
}

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (dialed, accepted net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		ch <- c
	}()
	d, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	a := <-ch
	if a == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { d.Close(); a.Close() })
	return d, a
}

type hsResult struct {
	c   *hsConn
	err error
}

// runHandshake runs both halves over loopback TCP and returns each side's
// outcome.
func runHandshake(t *testing.T, dialer, acceptor *local) (d, a hsResult) {
	t.Helper()
	dc, ac := tcpPair(t)
	ctx := context.Background()
	ach := make(chan hsResult, 1)
	go func() {
		c, err := acceptHandshake(ctx, ac, acceptor, func(ring.NodeID) uint64 { return 0 })
		if err == nil {
			// The dialer may still refuse our hello: wait for its verdict
			// (a goodbye, or the first frame after the hellos).
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if f, ferr := newFrameReader(c.r, maxHelloSize).read(); ferr == nil && f.Type == FrameGoodbye {
				g, _ := parseGoodbye(f.Header, f.Payload)
				err = &wire.Refused{Reason: g.Refuse, ByPeer: true}
			}
		}
		ach <- hsResult{c, err}
	}()
	c, err := dialHandshake(ctx, dc, dialer, "", 0)
	d = hsResult{c, err}
	if err == nil {
		// Tell the acceptor we are done, as the resume step would.
		c.Write(appendFrame(nil, FrameResume, FlagFresh, 0, appendResume(nil, resumeCounts{})))
	}
	a = <-ach
	return d, a
}

func wantRefused(t *testing.T, side string, err error, reason wire.RefuseReason) {
	t.Helper()
	var r *wire.Refused
	if !errors.As(err, &r) {
		t.Fatalf("%s: want *wire.Refused(%v), got %T %v", side, reason, err, err)
	}
	if r.Reason != reason {
		t.Fatalf("%s: want reason %v, got %v (%v)", side, reason, r.Reason, err)
	}
}

// The hello is pinned because peers of every version read it before they
// can agree on anything else.
func TestHelloEncodingIsPinned(t *testing.T) {
	b, err := encodeHello(hello{Cluster: "c", Node: ring.NodeID{Addr: "10.0.0.1:7400", Incarnation: 7}, Version: 1,
		Codecs: []string{"s2"}, MaxFrame: 1, MaxMessage: 2, Window: 3, Known: 4})
	if err != nil {
		t.Fatal(err)
	}
	const want = "88a7636c7573746572a163a46e6f646582a461646472ad31302e302e302e313a37343030a3696e63cf0000000000000007" +
		"a776657273696f6ecc01a6636f6465637391a27332a96d61785f6672616d65cf0000000000000001" +
		"ab6d61785f6d657373616765cf0000000000000002a677696e646f77cf0000000000000003a56b6e6f776ecf0000000000000004"
	if got := hex.EncodeToString(b); got != want {
		t.Errorf("expected the hello encoding to stay\n%s\ngot\n%s", want, got)
	}
}

func TestHandshakeAgreesAndPicksTheDialersPreferredCodec(t *testing.T) {
	dl, al := testLocal("a:1", 1), testLocal("b:1", 2)
	dl.codecs = []string{wire.CodecZstd, wire.CodecS2}
	d, a := runHandshake(t, dl, al)
	if d.err != nil || a.err != nil {
		t.Fatalf("handshake failed: dialer %v, acceptor %v", d.err, a.err)
	}
	if d.c.peer.Node != al.node || a.c.peer.Node != dl.node {
		t.Fatalf("identities not exchanged: dialer saw %v, acceptor saw %v", d.c.peer.Node, a.c.peer.Node)
	}
	if d.c.codec != wire.CodecZstd || a.c.codec != wire.CodecZstd {
		t.Fatalf("want both sides on zstd, got %q and %q", d.c.codec, a.c.codec)
	}
}

func TestHandshakeWithoutCommonCodecRunsUncompressed(t *testing.T) {
	dl, al := testLocal("a:1", 1), testLocal("b:1", 2)
	dl.codecs = []string{wire.CodecS2}
	al.codecs = []string{wire.CodecZstd}
	d, a := runHandshake(t, dl, al)
	if d.err != nil || a.err != nil || d.c.codec != "" || a.c.codec != "" {
		t.Fatalf("want an uncompressed connection, got %v/%v codecs %v", d.err, a.err, d.c)
	}
}

func TestHandshakeRefusesAWrongClusterName(t *testing.T) {
	dl, al := testLocal("a:1", 1), testLocal("b:1", 2)
	al.cluster = "other"
	d, a := runHandshake(t, dl, al)
	wantRefused(t, "acceptor", a.err, wire.RefusedCluster)
	wantRefused(t, "dialer", d.err, wire.RefusedCluster)
	var r *wire.Refused
	errors.As(d.err, &r)
	if !r.ByPeer {
		t.Fatalf("the dialer was refused by its peer; want ByPeer, got %+v", r)
	}
}

func TestHandshakeRefusesDifferentLimits(t *testing.T) {
	for name, mutate := range map[string]func(*wire.Limits){
		"frame":   func(l *wire.Limits) { l.MaxFrame = 128 << 10 },
		"message": func(l *wire.Limits) { l.MaxMessage = 8 << 20 },
		"window":  func(l *wire.Limits) { l.Window = 1 << 20 },
	} {
		t.Run(name, func(t *testing.T) {
			dl, al := testLocal("a:1", 1), testLocal("b:1", 2)
			mutate(&dl.limits)
			d, a := runHandshake(t, dl, al)
			wantRefused(t, "acceptor", a.err, wire.RefusedLimits)
			wantRefused(t, "dialer", d.err, wire.RefusedLimits)
		})
	}
}

func TestHandshakeRefusesAnotherProtocolVersion(t *testing.T) {
	dc, ac := tcpPair(t)
	p, _ := encodeHello(testLocal("a:1", 1).hello(0))
	future := appendHeader(nil, Header{Version: ProtocolVersion + 1, Type: FrameHello, Length: uint32(len(p))})
	dc.Write(append(future, p...))
	_, err := acceptHandshake(context.Background(), ac, testLocal("b:1", 2), func(ring.NodeID) uint64 { return 0 })
	wantRefused(t, "acceptor", err, wire.RefusedVersion)
	// The old binary told the newer one why, in a frame of its own version.
	f, ferr := newFrameReader(dc, maxHelloSize).read()
	if ferr != nil || f.Type != FrameGoodbye {
		t.Fatalf("want a goodbye frame back, got %v %v", f.Type, ferr)
	}
	g, _ := parseGoodbye(f.Header, f.Payload)
	if g.Code != goodbyeRefused || g.Refuse != wire.RefusedVersion {
		t.Fatalf("want a version refusal, got %+v", g)
	}
}

func TestHandshakeRefusesAVersionFieldMismatch(t *testing.T) {
	dl, al := testLocal("a:1", 1), testLocal("b:1", 2)
	dc, ac := tcpPair(t)
	h := dl.hello(0)
	h.Version = 9
	p, _ := encodeHello(h)
	dc.Write(appendFrame(nil, FrameHello, 0, 0, p))
	_, err := acceptHandshake(context.Background(), ac, al, func(ring.NodeID) uint64 { return 0 })
	wantRefused(t, "acceptor", err, wire.RefusedVersion)
}

func TestHandshakeRefusesAPeerThatIsNotTheAddressDialed(t *testing.T) {
	dc, ac := tcpPair(t)
	go acceptHandshake(context.Background(), ac, testLocal("b:1", 2), func(ring.NodeID) uint64 { return 0 })
	_, err := dialHandshake(context.Background(), dc, testLocal("a:1", 1), "c:1", 0)
	wantRefused(t, "dialer", err, wire.RefusedIdentity)
}

func TestHandshakeTimesOutAgainstASilentPeer(t *testing.T) {
	dc, _ := tcpPair(t)
	l := testLocal("a:1", 1)
	l.timeout = 50 * time.Millisecond
	_, err := dialHandshake(context.Background(), dc, l, "", 0)
	wantRefused(t, "dialer", err, wire.RefusedTimeout)
	if !errors.Is(err, wire.ErrHandshakeTimeout) {
		t.Fatalf("want wire.ErrHandshakeTimeout inside, got %v", err)
	}
}

func TestHandshakeStopsWhenTheContextIsCancelled(t *testing.T) {
	dc, _ := tcpPair(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := dialHandshake(ctx, dc, testLocal("a:1", 1), "", 0)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
}

func TestMutualTLSHandshakeSucceedsWithinOneCA(t *testing.T) {
	ca := newTestCA(t, "cluster")
	dl, al := testLocal("a:1", 1), testLocal("b:1", 2)
	dl.tls, al.tls = ca.node(t, "a"), ca.node(t, "b")
	d, a := runHandshake(t, dl, al)
	if d.err != nil || a.err != nil {
		t.Fatalf("mTLS handshake failed: dialer %v, acceptor %v", d.err, a.err)
	}
	cs := d.c.Conn.(*tls.Conn).ConnectionState()
	if cs.Version != tls.VersionTLS13 {
		t.Fatalf("want wire.TLS 1.3, got %x", cs.Version)
	}
}

func TestMutualTLSRefusesACertificateFromAnotherCA(t *testing.T) {
	ca, other := newTestCA(t, "cluster"), newTestCA(t, "intruder")
	dl, al := testLocal("a:1", 1), testLocal("b:1", 2)
	dl.tls, al.tls = other.node(t, "a"), ca.node(t, "b")
	dl.tls.CA = ca.pool // the intruder trusts the cluster, the cluster does not trust it
	d, a := runHandshake(t, dl, al)
	wantRefused(t, "acceptor", a.err, wire.RefusedTLS)
	wantRefused(t, "dialer", d.err, wire.RefusedTLS)
}

func TestMutualTLSRefusesAServerFromAnotherCA(t *testing.T) {
	ca, other := newTestCA(t, "cluster"), newTestCA(t, "intruder")
	dl, al := testLocal("a:1", 1), testLocal("b:1", 2)
	dl.tls, al.tls = ca.node(t, "a"), other.node(t, "b")
	d, a := runHandshake(t, dl, al)
	wantRefused(t, "dialer", d.err, wire.RefusedTLS)
	wantRefused(t, "acceptor", a.err, wire.RefusedTLS)
}

func TestMutualTLSRefusesAClientWithoutCertificate(t *testing.T) {
	ca := newTestCA(t, "cluster")
	dl, al := testLocal("a:1", 1), testLocal("b:1", 2)
	al.tls = ca.node(t, "b")
	dl.tls = &wire.TLS{CA: ca.pool} // no certificate of its own
	d, a := runHandshake(t, dl, al)
	wantRefused(t, "acceptor", a.err, wire.RefusedTLS)
	wantRefused(t, "dialer", d.err, wire.RefusedTLS)
}
