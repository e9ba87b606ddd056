package transport

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"

	"github.com/troupe-go/troupe/wire"
)

// After a chunk read past the buffer, the refill for the next header asks
// for at most headerFill bytes, so little of the next chunk passes through
// the buffer; otherwise the refill takes what the buffer holds.
func TestHeaderRefillAfterADirectChunkIsShort(t *testing.T) {
	for _, drained := range []bool{false, true} {
		a, b := net.Pipe()
		frame := appendFrame(nil, FrameData, 0, StreamReplication, make([]byte, 100<<10))
		go func() {
			b.Write(frame)
			b.Close()
		}()
		c := &liveConn{hsConn: &hsConn{Conn: a}, s: &session{t: &Transport{cfg: wire.Config{KeepaliveAfter: time.Hour}}}}
		ka := &keepaliveReader{c: c}
		br := bufio.NewReaderSize(ka, 64<<10)
		rd := &reader{br: br, fr: newFrameReader(br, wire.DefaultMaxFrame), src: ka, ka: ka, drained: drained}
		h, err := rd.header()
		if err != nil {
			t.Fatal(err)
		}
		if h.Type != FrameData || int(h.Length) != 100<<10 {
			t.Fatalf("header %+v, want the data frame's", h)
		}
		want := 64<<10 - HeaderSize
		if drained {
			want = headerFill - HeaderSize
		}
		if got := br.Buffered(); got != want {
			t.Errorf("drained %v: %d bytes buffered after the header, want %d", drained, got, want)
		}
		if ka.limit != 0 {
			t.Errorf("drained %v: read limit %d left after the header", drained, ka.limit)
		}
		io.Copy(io.Discard, a)
		a.Close()
	}
}
