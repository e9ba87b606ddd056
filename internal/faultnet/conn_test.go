package faultnet_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/faultnet"
	"pgregory.net/rapid"
)

// tcpPair returns a connected loopback TCP pair.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	var d net.Dialer
	client, err = d.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	server, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

func payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

func TestCutWriteAtDeliversExactlyThePrefixOverTCP(t *testing.T) {
	client, server := tcpPair(t)
	fc := faultnet.Wrap(client, faultnet.CutWriteAt(10))

	n, err := fc.Write(payload(100))
	if n != 10 || !errors.Is(err, faultnet.ErrCut) {
		t.Fatalf("Write = (%d, %v), want (10, ErrCut)", n, err)
	}
	_ = server.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(server)
	if err != nil {
		t.Fatalf("peer ReadAll: %v, want clean EOF after a cut", err)
	}
	if !bytes.Equal(got, payload(10)) {
		t.Fatalf("peer got %d bytes %v, want the first 10 bytes", len(got), got)
	}
}

func TestCutFiresAsSoonAsTheOffsetIsReached(t *testing.T) {
	client, server := tcpPair(t)
	fc := faultnet.Wrap(client, faultnet.CutWriteAt(4))

	if n, err := fc.Write(payload(4)); n != 4 || err != nil {
		t.Fatalf("Write = (%d, %v), want (4, nil): the write that reaches the offset succeeds", n, err)
	}
	if !fc.Broken() {
		t.Fatal("connection not broken after reaching the cut offset; the peer would wait for the next write")
	}
	_ = server.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, err := io.ReadAll(server); err != nil || len(got) != 4 {
		t.Fatalf("peer ReadAll = (%d bytes, %v), want (4, nil)", len(got), err)
	}
}

func TestResetMakesTheTCPPeerSeeConnectionReset(t *testing.T) {
	client, server := tcpPair(t)
	fc := faultnet.Wrap(client)
	fc.Reset()

	_ = server.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := server.Read(make([]byte, 1))
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("peer Read error = %v, want ECONNRESET", err)
	}
	if _, err := fc.Write([]byte("x")); !errors.Is(err, faultnet.ErrReset) {
		t.Fatalf("Write after Reset = %v, want ErrReset", err)
	}
}

func TestCutReadAtDeliversExactlyNBytesThenFails(t *testing.T) {
	a, b := faultnet.Pipe(nil, []faultnet.Fault{faultnet.CutReadAt(7)})
	defer a.Close()
	defer b.Close()
	if _, err := a.Write(payload(20)); err != nil {
		t.Fatalf("Write: %v", err)
	}
	buf := make([]byte, 100)
	n, err := b.Read(buf)
	if n != 7 || err != nil {
		t.Fatalf("first Read = (%d, %v), want (7, nil)", n, err)
	}
	if _, err := b.Read(buf); !errors.Is(err, faultnet.ErrCut) {
		t.Fatalf("second Read error = %v, want ErrCut", err)
	}
}

func TestCutAtZeroBreaksBeforeTheFirstByte(t *testing.T) {
	a, b := faultnet.Pipe([]faultnet.Fault{faultnet.CutWriteAt(0)}, nil)
	defer b.Close()
	if n, err := a.Write([]byte("hello")); n != 0 || !errors.Is(err, faultnet.ErrCut) {
		t.Fatalf("Write = (%d, %v), want (0, ErrCut)", n, err)
	}
	if _, err := b.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("peer Read error = %v, want io.EOF", err)
	}
}

func TestStallWriteBlocksUntilResume(t *testing.T) {
	a, b := faultnet.Pipe([]faultnet.Fault{faultnet.StallWriteAt(3)}, nil)
	defer a.Close()
	defer b.Close()

	done := make(chan error, 1)
	go func() {
		_, err := a.Write([]byte("abcdef"))
		done <- err
	}()
	buf := make([]byte, 10)
	if n, err := b.Read(buf); n != 3 || err != nil {
		t.Fatalf("Read = (%d, %v), want the 3 bytes before the stall", n, err)
	}
	_ = b.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := b.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read during stall = %v, want a deadline error (nothing delivered)", err)
	}
	a.Resume()
	if err := <-done; err != nil {
		t.Fatalf("stalled Write after Resume: %v", err)
	}
	_ = b.SetReadDeadline(time.Time{})
	if n, err := b.Read(buf); string(buf[:n]) != "def" || err != nil {
		t.Fatalf("Read after Resume = (%q, %v), want (\"def\", nil)", buf[:n], err)
	}
}

func TestStalledWriteHonoursItsDeadline(t *testing.T) {
	a, b := faultnet.Pipe(nil, nil)
	defer a.Close()
	defer b.Close()
	a.Stall()
	_ = a.SetWriteDeadline(time.Now().Add(20 * time.Millisecond))
	_, err := a.Write([]byte("x"))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("Write during stall = %v, want a timeout net.Error", err)
	}
}

func TestStalledReadKeepsBytesThatArriveAndDeliversThemOnResume(t *testing.T) {
	a, b := faultnet.Pipe(nil, []faultnet.Fault{faultnet.StallReadAt(0)})
	defer a.Close()
	defer b.Close()
	if _, err := a.Write([]byte("late")); err != nil {
		t.Fatal(err)
	}
	_ = b.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := b.Read(make([]byte, 8)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read during stall = %v, want a deadline error", err)
	}
	b.Resume()
	_ = b.SetReadDeadline(time.Time{})
	buf := make([]byte, 8)
	if n, err := b.Read(buf); string(buf[:n]) != "late" || err != nil {
		t.Fatalf("Read after Resume = (%q, %v), want (\"late\", nil)", buf[:n], err)
	}
}

func TestCloseUnblocksAStalledRead(t *testing.T) {
	a, b := faultnet.Pipe(nil, nil)
	defer a.Close()
	b.Stall()
	done := make(chan error, 1)
	go func() {
		_, err := b.Read(make([]byte, 1))
		done <- err
	}()
	b.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("stalled Read after Close = %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not unblock a stalled Read within 5s")
	}
}

func TestPipeResetFailsThePeerAtOnce(t *testing.T) {
	a, b := faultnet.Pipe(nil, nil)
	defer b.Close()
	if _, err := a.Write([]byte("unread")); err != nil {
		t.Fatal(err)
	}
	a.Reset()
	if _, err := b.Read(make([]byte, 8)); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("peer Read after reset = %v, want ECONNRESET (buffered bytes discarded)", err)
	}
	if _, err := b.Write([]byte("x")); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("peer Write after reset = %v, want ECONNRESET", err)
	}
}

func TestPipeIsBufferedSoAWriterNeedNotWaitForTheReader(t *testing.T) {
	a, b := faultnet.Pipe(nil, nil)
	defer a.Close()
	defer b.Close()
	_ = a.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if n, err := a.Write(payload(faultnet.PipeBuffer)); n != faultnet.PipeBuffer || err != nil {
		t.Fatalf("Write of one full buffer = (%d, %v), want it to complete with no reader", n, err)
	}
}

func TestBetweenIsDeterministicAndInRange(t *testing.T) {
	r1, r2 := faultnet.NewRand(42), faultnet.NewRand(42)
	for i := range 1000 {
		x, err := faultnet.Between(r1, 10, 20)
		if err != nil {
			t.Fatal(err)
		}
		y, _ := faultnet.Between(r2, 10, 20)
		if x != y {
			t.Fatalf("draw %d: %d != %d with the same seed", i, x, y)
		}
		if x < 10 || x >= 20 {
			t.Fatalf("draw %d: %d outside [10, 20)", i, x)
		}
	}
	if _, err := faultnet.Between(r1, 5, 5); !errors.Is(err, faultnet.ErrInvalidRange) {
		t.Fatalf("Between(5, 5) error = %v, want ErrInvalidRange", err)
	}
}

// Whatever the write chunking and the cut offset, the peer receives exactly
// the prefix before the offset, then EOF.
func TestCutDeliversExactPrefixForAnyChunking(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		total := rapid.IntRange(0, 4096).Draw(rt, "total")
		at := rapid.Int64Range(0, 5000).Draw(rt, "at")
		data := payload(total)
		a, b := faultnet.Pipe([]faultnet.Fault{faultnet.CutWriteAt(at)}, nil)
		defer b.Close()
		got := make(chan []byte, 1)
		go func() {
			all, _ := io.ReadAll(b)
			got <- all
		}()
		written := 0
		for written < total {
			chunk := rapid.IntRange(1, 700).Draw(rt, "chunk")
			end := min(written+chunk, total)
			n, err := a.Write(data[written:end])
			written += n
			if err != nil {
				if !errors.Is(err, faultnet.ErrCut) {
					rt.Fatalf("Write error = %v, want ErrCut", err)
				}
				break
			}
		}
		_ = a.Close()
		want := data[:min(int64(total), at)]
		if g := <-got; !bytes.Equal(g, want) {
			rt.Fatalf("peer got %d bytes, want the %d-byte prefix", len(g), len(want))
		}
	})
}
