package wire

import (
	"net"
	"testing"

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
	if err := setNotSentLowat(tc, DefaultNotSentLowat); err != nil {
		t.Fatal(err)
	}
	c := &liveConn{hsConn: &hsConn{Conn: tc}, lowat: DefaultNotSentLowat}
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
