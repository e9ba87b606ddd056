package netns_test

import (
	"context"
	"errors"
	"github.com/troupe-go/troupe/internal/nettest"
	"io"
	"net"
	"net/netip"
	"os"
	osexec "os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/netns"
)

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func addr(h *netns.Host, port uint16) string { return netip.AddrPortFrom(h.Addr, port).String() }

// echoServer serves one echo per accepted connection until the test ends,
// then closes the listener and every connection it accepted.
func echoServer(t *testing.T, ln net.Listener) { nettest.Serve(t, ln, nettest.Echo) }

// echo sends msg over c and reads it back.
func echo(c net.Conn, msg string) (string, error) {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, msg); err != nil {
		return "", err
	}
	buf := make([]byte, len(msg))
	_, err := io.ReadFull(c, buf)
	return string(buf), err
}

func TestConfigValidateNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		cfg   netns.Config
		field string
	}{
		{netns.Config{Hosts: 251}, "Hosts"},
		{netns.Config{Subnet: netip.MustParsePrefix("192.168.1.0/24")}, "Subnet"},
		{netns.Config{Subnet: netip.MustParsePrefix("10.210.0.0/16")}, "Subnet"},
	} {
		err := tc.cfg.Validate()
		if !errors.Is(err, netns.ErrConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("Validate(%+v) = %v, want ErrConfig naming %s", tc.cfg, err, tc.field)
		}
	}
	if err := (netns.Config{}).Validate(); err != nil {
		t.Errorf("zero Config must be valid: %v", err)
	}
}

func TestEchoAcrossNamespacesWithCommands(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	lab := netns.New(ctx, t, netns.Config{Hosts: 2})
	h0, h1 := lab.Host(0), lab.Host(1)

	lines, wait := startHelper(t, ctx, h1, "echo-server "+addr(h1, 7000))
	if !lines.Scan() || lines.Text() != "ready" {
		t.Fatalf("echo server in %s did not report ready: %q", h1.NS, lines.Text())
	}
	client := h0.Command(ctx, mustExe(t))
	client.Env = append(os.Environ(), helperEnv+"=echo-client "+addr(h1, 7000)+" hello-across")
	got, err := client.Output()
	if err != nil {
		t.Fatalf("echo client in %s: %v", h0.NS, err)
	}
	if string(got) != "hello-across" {
		t.Fatalf("echo client got %q, want %q", got, "hello-across")
	}
	if err := wait(); err != nil {
		t.Fatalf("echo server exit: %v", err)
	}
}

func mustExe(t *testing.T) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

func TestEchoAcrossNamespacesWithGoFunctions(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	lab := netns.New(ctx, t, netns.Config{Hosts: 2})
	h0, h1 := lab.Host(0), lab.Host(1)

	ln, err := h1.Listen(ctx, "tcp4", addr(h1, 7000))
	if err != nil {
		t.Fatal(err)
	}
	echoServer(t, ln)
	c, err := h0.Dial(ctx, "tcp4", addr(h1, 7000))
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr(h1, 7000), h0.NS, err)
	}
	defer c.Close()
	if got, err := echo(c, "hello"); got != "hello" || err != nil {
		t.Fatalf("echo = (%q, %v), want \"hello\"", got, err)
	}
	if got := c.LocalAddr().(*net.TCPAddr).AddrPort().Addr(); got != h0.Addr {
		t.Fatalf("connection's local address %s, want h0's %s: the dial did not run in h0", got, h0.Addr)
	}
}

func TestHostsHaveNoRouteOutOfTheLab(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	lab := netns.New(ctx, t, netns.Config{Hosts: 2})
	for _, h := range lab.Hosts() {
		out, err := h.Run(ctx, "ip", "-4", "route", "show")
		if err != nil {
			t.Fatal(err)
		}
		routes := strings.TrimSpace(string(out))
		if strings.Contains(routes, "default") || !strings.HasPrefix(routes, "10.210.0.0/24 dev eth0") || strings.Count(routes, "\n") != 0 {
			t.Fatalf("routes in %s = %q, want only the lab subnet on eth0", h.NS, routes)
		}
	}
}

// throughput sends size bytes from h0 to h1 and returns bits per second.
func throughput(t *testing.T, ctx context.Context, h0, h1 *netns.Host, size int) float64 {
	t.Helper()
	ln, err := h1.Listen(ctx, "tcp4", addr(h1, 7000))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	received := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			received <- -1
			return
		}
		defer c.Close()
		n, _ := io.Copy(io.Discard, c)
		received <- n
	}()
	c, err := h0.Dial(ctx, "tcp4", addr(h1, 7000))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Write(make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).CloseWrite()
	n := <-received
	elapsed := time.Since(start)
	if n != int64(size) {
		t.Fatalf("received %d bytes, want %d", n, size)
	}
	return float64(n*8) / elapsed.Seconds()
}

// A loose sanity bound: a cap must hold within 2x (an unshaped veth carries
// gigabits per second), and 1 MiB at 16 Mbit/s takes about half a second.
const (
	testRate = 16 * netns.Mbit
	testSize = 1 << 20
)

func TestEgressCapRoughlyLimitsThroughput(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	lab := netns.New(ctx, t, netns.Config{Hosts: 2})
	if err := lab.LimitEgress(ctx, lab.Host(0), testRate); err != nil {
		t.Fatal(err)
	}
	bps := throughput(t, ctx, lab.Host(0), lab.Host(1), testSize)
	t.Logf("%.1f Mbit/s under a %d Mbit/s egress cap", bps/1e6, testRate/netns.Mbit)
	if bps > 2*float64(testRate) {
		t.Fatalf("throughput %.1f Mbit/s exceeds twice the %d Mbit/s cap", bps/1e6, testRate/netns.Mbit)
	}
	if err := lab.Unlimit(ctx, lab.Host(0)); err != nil {
		t.Fatal(err)
	}
}

func TestIngressCapRoughlyLimitsThroughput(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	lab := netns.New(ctx, t, netns.Config{Hosts: 2})
	if err := lab.ShapeIngress(ctx, lab.Host(1), netns.TBF{Rate: testRate, Latency: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	bps := throughput(t, ctx, lab.Host(0), lab.Host(1), testSize)
	t.Logf("%.1f Mbit/s under a %d Mbit/s ingress cap", bps/1e6, testRate/netns.Mbit)
	if bps > 2*float64(testRate) {
		t.Fatalf("throughput %.1f Mbit/s exceeds twice the %d Mbit/s cap", bps/1e6, testRate/netns.Mbit)
	}
}

func TestShapeRejectsAMissingRate(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	lab := netns.New(ctx, t, netns.Config{Hosts: 1})
	if err := lab.ShapeEgress(ctx, lab.Host(0), netns.TBF{}); !errors.Is(err, netns.ErrBadRate) {
		t.Fatalf("ShapeEgress without a rate = %v, want ErrBadRate", err)
	}
}

func TestBlockMakesADialTimeOut(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	lab := netns.New(ctx, t, netns.Config{Hosts: 2})
	h0, h1 := lab.Host(0), lab.Host(1)
	ln, err := h1.Listen(ctx, "tcp4", addr(h1, 7000))
	if err != nil {
		t.Fatal(err)
	}
	echoServer(t, ln)
	if err := lab.Block(ctx, h0, h1); err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = h0.Dial(dctx, "tcp4", addr(h1, 7000))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("dial across a drop rule = %v, want a timeout (rules: %v)", err, lab.Rules(h0))
	}
}

func TestRejectRefusesDialsAndResetsOpenConnections(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	lab := netns.New(ctx, t, netns.Config{Hosts: 2})
	h0, h1 := lab.Host(0), lab.Host(1)
	ln, err := h1.Listen(ctx, "tcp4", addr(h1, 7000))
	if err != nil {
		t.Fatal(err)
	}
	echoServer(t, ln)
	open, err := h0.Dial(ctx, "tcp4", addr(h1, 7000))
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if _, err := echo(open, "before"); err != nil {
		t.Fatal(err)
	}

	if err := lab.Reject(ctx, h0, h1); err != nil {
		t.Fatal(err)
	}
	if _, err := h0.Dial(ctx, "tcp4", addr(h1, 7000)); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial across a reject rule = %v, want ECONNREFUSED", err)
	}
	if _, err := echo(open, "after"); !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("echo on an open connection across a reject rule = %v, want ECONNRESET", err)
	}
}

func TestLossDropsRoughlyThatShareOfPackets(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	lab := netns.New(ctx, t, netns.Config{Hosts: 2})
	h0, h1 := lab.Host(0), lab.Host(1)
	if err := lab.Loss(ctx, h0, h1, 50); err != nil {
		t.Fatal(err)
	}
	rx, err := h1.ListenPacket(ctx, "udp4", addr(h1, 7001))
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	tx, err := h0.Dial(ctx, "udp4", addr(h1, 7001))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()

	const sent = 400
	got := make(chan int, 1)
	go func() {
		n := 0
		buf := make([]byte, 64)
		for {
			_ = rx.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			if _, _, err := rx.ReadFrom(buf); err != nil {
				got <- n
				return
			}
			n++
		}
	}()
	for i := range sent {
		if _, err := tx.Write([]byte{byte(i)}); err != nil && !errors.Is(err, syscall.EPERM) {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	n := <-got
	t.Logf("%d of %d datagrams arrived under 50%% loss", n, sent)
	// Binomial(400, 0.5) lies in [120, 280] with probability 1 - 1e-15.
	if n < sent*3/10 || n > sent*7/10 {
		t.Fatalf("%d of %d datagrams arrived, want about half", n, sent)
	}
}

func TestPartitionSeparatesGroupsAndHealRestoresThem(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	lab := netns.New(ctx, t, netns.Config{Hosts: 3})
	h0, h1, h2 := lab.Host(0), lab.Host(1), lab.Host(2)
	for _, h := range lab.Hosts() {
		ln, err := h.Listen(ctx, "tcp4", addr(h, 7000))
		if err != nil {
			t.Fatal(err)
		}
		echoServer(t, ln)
	}
	open, err := h0.Dial(ctx, "tcp4", addr(h1, 7000))
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()

	if err := lab.Partition(ctx, []*netns.Host{h0}, []*netns.Host{h1, h2}); err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := h0.Dial(dctx, "tcp4", addr(h1, 7000)); err == nil {
		t.Fatal("h0 reached h1 across the partition")
	}
	c12, err := h1.Dial(ctx, "tcp4", addr(h2, 7000))
	if err != nil {
		t.Fatalf("h1 must reach h2 on its own side of the partition: %v", err)
	}
	c12.Close()
	// Bytes written during the partition are retransmitted after the heal.
	if _, err := io.WriteString(open, "held"); err != nil {
		t.Fatal(err)
	}

	if err := lab.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	_ = open.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4)
	if _, err := io.ReadFull(open, buf); err != nil || string(buf) != "held" {
		t.Fatalf("open connection after heal = (%q, %v), want the held bytes echoed", buf, err)
	}
	c01, err := h0.Dial(ctx, "tcp4", addr(h1, 7000))
	if err != nil {
		t.Fatalf("h0 must reach h1 after heal: %v", err)
	}
	c01.Close()
}

func TestCleanupLeakedDeletesNamespacesOfDeadProcesses(t *testing.T) {
	if why := netns.Missing(); why != "" {
		t.Skipf("netns: %s", why)
	}
	ctx := testCtx(t, 30*time.Second)
	// pid_max is at most 4194304, so this pid cannot be alive.
	leaked := netns.Prefix + "4194999-000000-h0"
	if out, err := exec(ctx, "ip", "netns", "add", leaked); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _, _ = exec(context.Background(), "ip", "netns", "del", leaked) })
	if err := netns.CleanupLeaked(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/run/netns/" + leaked); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("leaked namespace %s still exists after CleanupLeaked (stat: %v)", leaked, err)
	}
}

func exec(ctx context.Context, name string, args ...string) ([]byte, error) {
	return osexec.CommandContext(ctx, name, args...).CombinedOutput()
}
