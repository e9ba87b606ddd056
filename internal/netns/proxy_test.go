package netns_test

import (
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/delayproxy"
	"github.com/troupe-go/troupe/internal/netns"
)

// The kernel has no netem: delay between hosts comes from a delayproxy
// whose listener and dials live in a host. Here h0 reaches h1's echo server
// through a proxy in h0 that adds 20 ms each way, over a 16 Mbit/s link.
func TestDelayProxyAddsLatencyBetweenHosts(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	lab := netns.New(ctx, t, netns.Config{Hosts: 2})
	h0, h1 := lab.Host(0), lab.Host(1)
	if err := lab.LimitEgress(ctx, h0, 16*netns.Mbit); err != nil {
		t.Fatal(err)
	}
	ln, err := h1.Listen(ctx, "tcp4", addr(h1, 7000))
	if err != nil {
		t.Fatal(err)
	}
	echoServer(t, ln)

	proxyLn, err := h0.Listen(ctx, "tcp4", addr(h0, 7100))
	if err != nil {
		t.Fatal(err)
	}
	const delay = 20 * time.Millisecond
	p, err := delayproxy.New(ctx, delayproxy.Config{
		Target:   addr(h1, 7000),
		Listener: proxyLn,
		Dial:     h0.Dial,
		Delay:    delay,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	c, err := h0.Dial(ctx, "tcp4", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	begin := time.Now()
	if got, err := echo(c, "ping"); got != "ping" || err != nil {
		t.Fatalf("echo through the proxy = (%q, %v), want \"ping\"", got, err)
	}
	if rtt := time.Since(begin); rtt < 2*delay {
		t.Fatalf("round trip %v, want at least 2 × %v", rtt, delay)
	}
}
