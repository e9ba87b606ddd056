package transport

import (
	"context"
	"net"
	"testing"

	"github.com/troupe-go/troupe/ring"
	"github.com/troupe-go/troupe/wire"
	"golang.org/x/sys/unix"
)

func notSentLowat(t *testing.T, c *net.TCPConn) int {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var gerr error
	if err := rc.Control(func(fd uintptr) {
		n, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT)
	}); err != nil {
		t.Fatal(err)
	}
	if gerr != nil {
		t.Fatal(gerr)
	}
	return n
}

// The writer moves TCP_NOTSENT_LOWAT with the large-frame size only when
// it changed by more than a half, and never when the configuration says
// to leave the socket alone.
func TestTuneLowatFollowsLargeChangesOnly(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			defer c.Close()
			c.Read(make([]byte, 1))
		}
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	tc := raw.(*net.TCPConn)
	if err := setNotSentLowat(tc, wire.DefaultNotSentLowat); err != nil {
		t.Fatal(err)
	}
	c := &liveConn{hsConn: &hsConn{Conn: tc}, lowat: wire.DefaultNotSentLowat}
	for _, step := range []struct{ want, set int }{
		{256 << 10, 256 << 10}, // grown 16x: set
		{200 << 10, 256 << 10}, // within a half: left
		{-1, 256 << 10},        // negative: left alone
		{16 << 10, 16 << 10},   // shrunk 16x: set
	} {
		c.tuneLowat(step.want)
		if got := notSentLowat(t, tc); got != step.set {
			t.Fatalf("after tuneLowat(%d): TCP_NOTSENT_LOWAT %d, want %d", step.want, got, step.set)
		}
	}
}

// Per-stream credit does not stop head-of-line blocking inside TCP's own
// send buffer: both ends of a connection, the dialer's and the
// acceptor's, must start with the configured TCP_NOTSENT_LOWAT, so what
// the scheduler writes next never queues behind a deep kernel buffer.
func TestBothEndsOfAConnectionStartWithTheConfiguredNotSentLowat(t *testing.T) {
	const lowat = 24 << 10
	set := func(c *wire.Config) { c.NotSentLowat = lowat }
	a, b := newTestNode(t, set), newTestNode(t, set)
	r, err := a.t.Send(context.Background(), b.t.Self(), StreamControl, 1, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if err := waitReceipt(t, r); err != nil {
		t.Fatal(err)
	}
	for _, side := range []struct {
		name   string
		tr     *Transport
		peer   ring.NodeID
		dialed bool
	}{{name: "dialer", tr: a.t, peer: b.t.Self(), dialed: true}, {name: "acceptor", tr: b.t, peer: a.t.Self()}} {
		s, _ := side.tr.sessionFor(side.peer, false)
		if s == nil {
			t.Fatalf("%s: no session", side.name)
		}
		s.mu.Lock()
		c := s.conn
		s.mu.Unlock()
		if c == nil {
			t.Fatalf("%s: no connection", side.name)
		}
		if c.hsConn.dialer != side.dialed {
			t.Fatalf("%s: the connection's dialer flag is %v", side.name, c.hsConn.dialer)
		}
		tc, ok := c.hsConn.Conn.(*net.TCPConn)
		if !ok {
			t.Fatalf("%s: connection is a %T, not TCP", side.name, c.hsConn.Conn)
		}
		if got := notSentLowat(t, tc); got != lowat {
			t.Errorf("%s: TCP_NOTSENT_LOWAT %d, want the configured %d", side.name, got, lowat)
		}
	}
}
