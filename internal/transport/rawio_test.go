package transport

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// The reader's raw reads on plain TCP behave as net.Conn.Read: what is
// sent arrives, an expired deadline is a timeout (which the keepalive
// turns into pings), and the peer's close is io.EOF.
func TestRawReadsBehaveAsConnReads(t *testing.T) {
	peer, accepted := tcpPair(t)
	tc, ok := accepted.(*net.TCPConn)
	if !ok {
		t.Fatal("no TCP connection accepted")
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	c := &liveConn{hsConn: &hsConn{Conn: tc}, raw: rc}
	k := &keepaliveReader{c: c}
	k.readFn = k.readRaw
	buf := make([]byte, 64)

	if _, err := peer.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if n, err := k.read(buf); err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("read %q, %v; want hello", buf[:n], err)
	}

	tc.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	var ne net.Error
	if n, err := k.read(buf); n != 0 || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read past the deadline: %d, %v; want a timeout", n, err)
	}
	tc.SetReadDeadline(time.Time{})

	peer.Close()
	if n, err := k.read(buf); n != 0 || err != io.EOF {
		t.Fatalf("read after the peer closed: %d, %v; want io.EOF", n, err)
	}
}

// The writer's vectored raw writes deliver every piece in order through
// a socket that takes a little at a time (partial writes, waits for
// room), empty pieces included.
func TestWriteVecPartialWrites(t *testing.T) {
	conn, peer := tcpPair(t)
	tc := conn.(*net.TCPConn)
	if err := tc.SetWriteBuffer(8 << 10); err != nil {
		t.Fatal(err)
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	c := &liveConn{raw: rc}
	c.wvecFn = c.writeVecRaw

	var vec [][]byte
	var want []byte
	for i := range 20 {
		b := randomBytes([]int{0, 7, 20, 64 << 10, 300 << 10}[i%5])
		vec = append(vec, b)
		want = append(want, b...)
	}
	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, len(want))
		n, _ := io.ReadFull(peer, b)
		got <- b[:n]
	}()
	if err := c.writeVec(vec, true); err != nil {
		t.Fatal(err)
	}
	if b := <-got; string(b) != string(want) {
		t.Fatalf("read %d bytes, not the %d written in order", len(b), len(want))
	}
}
