package faultnet_test

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/faultnet"
)

// node is one endpoint of a test Network: a listener and its dialer.
type node struct {
	ln   net.Listener
	dial *faultnet.Dialer
	name string
}

func newNode(t *testing.T, ctx context.Context, fn *faultnet.Network) node {
	t.Helper()
	ln, err := fn.Listen(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	name := ln.Addr().String()
	return node{ln: ln, dial: fn.Dialer(name), name: name}
}

// connect dials from a to b and returns both ends.
func connect(t *testing.T, ctx context.Context, a, b node) (net.Conn, net.Conn) {
	t.Helper()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := b.ln.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	c, err := a.dial.DialContext(ctx, "tcp", b.name)
	if err != nil {
		t.Fatalf("dial %s→%s: %v", a.name, b.name, err)
	}
	s, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c, s
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestPartitionRefusesDialsAtOnce(t *testing.T) {
	ctx := testCtx(t)
	fn := faultnet.NewNetwork(1)
	a, b := newNode(t, ctx, fn), newNode(t, ctx, fn)
	fn.Partition(a.name, b.name, faultnet.Refuse)

	_, err := a.dial.DialContext(ctx, "tcp", b.name)
	if !errors.Is(err, faultnet.ErrPartitioned) {
		t.Fatalf("dial across a Refuse partition = %v, want ErrPartitioned", err)
	}
}

func TestBlackholePartitionHoldsTheDialUntilTheContextEnds(t *testing.T) {
	ctx := testCtx(t)
	fn := faultnet.NewNetwork(1)
	a, b := newNode(t, ctx, fn), newNode(t, ctx, fn)
	fn.Partition(b.name, a.name, faultnet.Blackhole) // order of names does not matter

	dctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	_, err := a.dial.DialContext(dctx, "tcp", b.name)
	if !errors.Is(err, faultnet.ErrPartitioned) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("dial across a Blackhole partition = %v, want ErrPartitioned and DeadlineExceeded", err)
	}
}

func TestPartitionStallsOpenConnectionsAndHealResumesThem(t *testing.T) {
	ctx := testCtx(t)
	fn := faultnet.NewNetwork(1)
	a, b := newNode(t, ctx, fn), newNode(t, ctx, fn)
	c, s := connect(t, ctx, a, b)

	fn.Partition(a.name, b.name, faultnet.Refuse)
	written := make(chan error, 1)
	go func() {
		_, err := c.Write([]byte("ping"))
		written <- err
	}()
	_ = s.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := s.Read(make([]byte, 4)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read across a partition = %v, want nothing delivered (deadline)", err)
	}

	fn.Heal(a.name, b.name)
	if err := <-written; err != nil {
		t.Fatalf("write after heal: %v", err)
	}
	_ = s.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 4)
	if _, err := io.ReadFull(s, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("read after heal = (%q, %v), want \"ping\"", buf, err)
	}
}

func TestPartitionLeavesOtherPairsAlone(t *testing.T) {
	ctx := testCtx(t)
	fn := faultnet.NewNetwork(1)
	a, b, c := newNode(t, ctx, fn), newNode(t, ctx, fn), newNode(t, ctx, fn)
	fn.Partition(a.name, b.name, faultnet.Refuse)
	ac, ca := connect(t, ctx, a, c)
	if _, err := ac.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	_ = ca.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(ca, make([]byte, 1)); err != nil {
		t.Fatalf("a→c must carry while a|b is partitioned: %v", err)
	}
}

func TestPlanIsReproducibleFromTheSeed(t *testing.T) {
	ctx := testCtx(t)
	offsets := func() []int64 {
		var out []int64
		fn := faultnet.NewNetwork(7)
		fn.SetPlan(func(info faultnet.ConnInfo, rng *rand.Rand) []faultnet.Fault {
			if info.Accepted {
				return nil
			}
			at := faultnet.MustBetween(rng, 0, 1<<20)
			out = append(out, at) // plans run under the Network's lock
			return []faultnet.Fault{faultnet.CutWriteAt(at)}
		})
		a, b := newNode(t, ctx, fn), newNode(t, ctx, fn)
		for range 3 {
			connect(t, ctx, a, b)
		}
		return out
	}
	first, second := offsets(), offsets()
	if len(first) != 3 || !slices.Equal(first, second) {
		t.Fatalf("cut offsets differ between runs with one seed: %v vs %v", first, second)
	}
}

func TestCutAllBreaksEveryConnection(t *testing.T) {
	ctx := testCtx(t)
	fn := faultnet.NewNetwork(1)
	a, b := newNode(t, ctx, fn), newNode(t, ctx, fn)
	connect(t, ctx, a, b)
	connect(t, ctx, b, a)
	fn.CutAll()
	for i, c := range fn.Conns() {
		if _, err := c.Write([]byte("x")); !errors.Is(err, faultnet.ErrCut) {
			t.Fatalf("conn %d Write after CutAll = %v, want ErrCut", i, err)
		}
	}
}

func TestSilentRelayAcceptsAndNeverAnswers(t *testing.T) {
	ctx := testCtx(t)
	r, err := faultnet.NewSilentRelay(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", r.Addr())
	if err != nil {
		t.Fatalf("dial to a silent relay must succeed: %v", err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("HELLO handshake")); err != nil {
		t.Fatalf("write to a silent relay must succeed: %v", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read from a silent relay = %v, want no answer (deadline)", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for r.Accepted() != 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := r.Accepted(); got != 1 {
		t.Fatalf("Accepted() = %d, want 1", got)
	}
}

func TestSwallowedDialSucceedsAndNeverCarries(t *testing.T) {
	ctx := testCtx(t)
	fn := faultnet.NewNetwork(1)
	a, b := newNode(t, ctx, fn), newNode(t, ctx, fn)
	fn.Partition(a.name, b.name, faultnet.Swallow)

	c, err := a.dial.DialContext(ctx, "tcp", b.name)
	if err != nil {
		t.Fatalf("dial across a Swallow partition = %v, want success", err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("HELLO handshake")); err != nil {
		t.Fatalf("write to a swallowed connection: %v", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read from a swallowed connection = %v, want no answer (deadline)", err)
	}
	acceptCtx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	go func() { <-acceptCtx.Done(); b.ln.(interface{ Close() error }).Close() }()
	if s, err := b.ln.Accept(); err == nil {
		s.Close()
		t.Fatal("the listener accepted a connection that a Swallow partition should have kept from it")
	}
}
