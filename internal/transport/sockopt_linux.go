package transport

import (
	"net"

	"golang.org/x/sys/unix"
)

// setNotSentLowat sets TCP_NOTSENT_LOWAT on c if it is a TCP socket (or
// TLS over one), so the kernel keeps at most about n unsent bytes queued:
// frames chosen by the scheduler then leave in the order chosen instead of
// waiting behind a deep socket buffer.
func setNotSentLowat(c net.Conn, n int) error {
	if w, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = w.NetConn()
	}
	tc, ok := c.(*net.TCPConn)
	if !ok || n <= 0 {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, n)
	})
	if err != nil {
		return err
	}
	return serr
}
