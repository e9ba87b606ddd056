package delayproxy_test

import (
	"bytes"
	"context"
	"errors"
	"github.com/troupe-go/troupe/internal/nettest"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/delayproxy"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// server accepts connections on loopback and runs handle on each until the
// test ends.
func server(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	var lc net.ListenConfig
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nettest.Serve(t, ln, handle)
	return ln.Addr().String()
}

var echoHandler = nettest.Echo

func start(t *testing.T, ctx context.Context, cfg delayproxy.Config) *delayproxy.Proxy {
	t.Helper()
	p, err := delayproxy.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func dial(t *testing.T, ctx context.Context, addr string) net.Conn {
	t.Helper()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(15 * time.Second))
	return c
}

func TestConfigValidateNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		cfg   delayproxy.Config
		field string
	}{
		{delayproxy.Config{}, "Target"},
		{delayproxy.Config{Target: "x", Delay: -1}, "Delay"},
		{delayproxy.Config{Target: "x", Jitter: -1}, "Jitter"},
		{delayproxy.Config{Target: "x", Bandwidth: -1}, "Bandwidth"},
		{delayproxy.Config{Target: "x", MaxInFlight: -1}, "MaxInFlight"},
	} {
		err := tc.cfg.Validate()
		if !errors.Is(err, delayproxy.ErrConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("Validate(%+v) = %v, want ErrConfig naming %s", tc.cfg, err, tc.field)
		}
	}
}

func TestRoundTripTakesAtLeastTwiceTheDelay(t *testing.T) {
	ctx := testCtx(t)
	const delay = 30 * time.Millisecond
	p := start(t, ctx, delayproxy.Config{Target: server(t, echoHandler), Delay: delay})
	c := dial(t, ctx, p.Addr())

	for i := range 3 {
		begin := time.Now()
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, make([]byte, 4)); err != nil {
			t.Fatal(err)
		}
		if rtt := time.Since(begin); rtt < 2*delay {
			t.Fatalf("round trip %d took %v, want at least 2 × %v", i, rtt, delay)
		}
	}
}

func TestJitterNeverReordersOrCorruptsTheStream(t *testing.T) {
	ctx := testCtx(t)
	p := start(t, ctx, delayproxy.Config{Target: server(t, echoHandler), Delay: time.Millisecond, Jitter: 5 * time.Millisecond, Seed: 3})
	c := dial(t, ctx, p.Addr())

	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 512<<10)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	go func() {
		rest := data
		for len(rest) > 0 {
			n := min(1+rng.IntN(40000), len(rest))
			if _, err := c.Write(rest[:n]); err != nil {
				return
			}
			rest = rest[n:]
		}
		_ = c.(*net.TCPConn).CloseWrite()
	}()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("echo through a jittered proxy returned %d bytes that differ from the %d sent", len(got), len(data))
	}
}

func TestBandwidthCapBoundsThroughput(t *testing.T) {
	ctx := testCtx(t)
	const bandwidth = 4 << 20 // bytes per second
	const size = 2 << 20
	received := make(chan int64, 1)
	target := server(t, func(c net.Conn) {
		n, _ := io.Copy(io.Discard, c)
		received <- n
	})
	p := start(t, ctx, delayproxy.Config{Target: target, Bandwidth: bandwidth})
	c := dial(t, ctx, p.Addr())

	begin := time.Now()
	if _, err := c.Write(make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).CloseWrite()
	if n := <-received; n != size {
		t.Fatalf("target received %d bytes, want %d", n, size)
	}
	elapsed := time.Since(begin)
	t.Logf("%d bytes in %v under a %d B/s cap", size, elapsed, bandwidth)
	// The link model books every byte, so this lower bound is exact up to
	// one chunk; only an upper bound would depend on the machine's load.
	if minimum := time.Duration(float64(size-16<<10) / bandwidth * float64(time.Second)); elapsed < minimum {
		t.Fatalf("%d bytes crossed in %v, faster than the cap allows (%v)", size, elapsed, minimum)
	}
}

func TestHalfCloseTravelsThroughTheProxy(t *testing.T) {
	ctx := testCtx(t)
	target := server(t, func(c net.Conn) {
		all, _ := io.ReadAll(c) // returns at the client's FIN
		_, _ = c.Write(append([]byte("got:"), all...))
	})
	p := start(t, ctx, delayproxy.Config{Target: target, Delay: 5 * time.Millisecond})
	c := dial(t, ctx, p.Addr())
	_, _ = c.Write([]byte("abc"))
	_ = c.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "got:abc" {
		t.Fatalf("reply = (%q, %v), want (\"got:abc\", nil)", got, err)
	}
}

func TestCutAllEndsConnectionsWithEOF(t *testing.T) {
	ctx := testCtx(t)
	p := start(t, ctx, delayproxy.Config{Target: server(t, echoHandler)})
	c := dial(t, ctx, p.Addr())
	waitConns(t, p, 1)
	p.CutAll()
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("Read after CutAll = %v, want io.EOF", err)
	}
}

func TestResetAllEndsConnectionsWithReset(t *testing.T) {
	ctx := testCtx(t)
	p := start(t, ctx, delayproxy.Config{Target: server(t, echoHandler)})
	c := dial(t, ctx, p.Addr())
	waitConns(t, p, 1)
	p.ResetAll()
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("Read after ResetAll = %v, want ECONNRESET", err)
	}
}

func TestAnUnreachableTargetResetsTheClient(t *testing.T) {
	ctx := testCtx(t)
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nothing listens there now
	p := start(t, ctx, delayproxy.Config{Target: dead})
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", p.Addr())
	if err != nil {
		// The reset can beat the end of the client's connect.
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("dial through a proxy to a closed port = %v, want ECONNRESET", err)
		}
		return
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("Read through a proxy to a closed port = %v, want ECONNRESET", err)
	}
}

func TestContextCancelStopsTheProxy(t *testing.T) {
	ctx, cancel := context.WithCancel(testCtx(t))
	p, err := delayproxy.New(ctx, delayproxy.Config{Target: server(t, echoHandler), Delay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, context.Background(), p.Addr())
	_, _ = c.Write([]byte("stuck in the delay line"))
	cancel()
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("Read after the proxy's context ended succeeded, want the connection broken")
	}
	done := make(chan struct{})
	go func() { p.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return within 10s of the context ending")
	}
}

func TestSetShapeAppliesToLaterTraffic(t *testing.T) {
	ctx := testCtx(t)
	p := start(t, ctx, delayproxy.Config{Target: server(t, echoHandler)})
	const delay = 40 * time.Millisecond
	if err := p.SetShape(delayproxy.Shape{Delay: delay}); err != nil {
		t.Fatal(err)
	}
	c := dial(t, ctx, p.Addr())
	begin := time.Now()
	_, _ = c.Write([]byte("x"))
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	if rtt := time.Since(begin); rtt < 2*delay {
		t.Fatalf("round trip %v after SetShape, want at least %v", rtt, 2*delay)
	}
}

func waitConns(t *testing.T, p *delayproxy.Proxy, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for p.Conns() != n {
		if time.Now().After(deadline) {
			t.Fatalf("proxy has %d connections after 5s, want %d", p.Conns(), n)
		}
		time.Sleep(time.Millisecond)
	}
}
