package faultnet_test

import (
	"context"
	"errors"
	"github.com/troupe-go/troupe/internal/nettest"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/faultnet"
)

// pipeNode listens on a pipe named name and echoes every connection until
// the test ends.
func pipeNode(t *testing.T, fn *faultnet.Network, name string) net.Listener {
	t.Helper()
	ln, err := fn.ListenPipe(name)
	if err != nil {
		t.Fatal(err)
	}
	nettest.Serve(t, ln, nettest.Echo)
	return ln
}

func TestPipeListenerCarriesAnEchoWithoutSockets(t *testing.T) {
	ctx := testCtx(t)
	fn := faultnet.NewNetwork(1)
	pipeNode(t, fn, "node-b")
	c, err := fn.Dialer("node-a").DialContext(ctx, "pipe", "node-b")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.RemoteAddr().String() != "node-b" || c.LocalAddr().String() != "node-a" {
		t.Fatalf("addresses %s→%s, want node-a→node-b", c.LocalAddr(), c.RemoteAddr())
	}
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo = (%q, %v), want \"ping\"", buf, err)
	}
}

func TestPipeListenerNamesAreExclusive(t *testing.T) {
	fn := faultnet.NewNetwork(1)
	ln, err := fn.ListenPipe("b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fn.ListenPipe("b"); !errors.Is(err, faultnet.ErrAddrInUse) {
		t.Fatalf("second ListenPipe(\"b\") = %v, want ErrAddrInUse", err)
	}
	ln.Close()
	ln2, err := fn.ListenPipe("b")
	if err != nil {
		t.Fatalf("ListenPipe after Close: %v", err)
	}
	ln2.Close()
}

func TestPipeDialsObeyPlansAndPartitions(t *testing.T) {
	ctx := testCtx(t)
	fn := faultnet.NewNetwork(1)
	fn.SetPlan(func(info faultnet.ConnInfo, _ *rand.Rand) []faultnet.Fault {
		if !info.Accepted && info.Seq == 0 {
			return []faultnet.Fault{faultnet.CutWriteAt(2)}
		}
		return nil
	})
	pipeNode(t, fn, "b")
	d := fn.Dialer("a")

	first, err := d.DialContext(ctx, "pipe", "b")
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if n, err := first.Write([]byte("abc")); n != 2 || !errors.Is(err, faultnet.ErrCut) {
		t.Fatalf("first conn Write = (%d, %v), want (2, ErrCut) from the plan", n, err)
	}

	second, err := d.DialContext(ctx, "pipe", "b")
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	fn.Partition("a", "b", faultnet.Refuse)
	if _, err := second.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	_ = second.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
	if _, err := second.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read across a partition = %v, want nothing delivered", err)
	}
	if _, err := d.DialContext(ctx, "pipe", "b"); !errors.Is(err, faultnet.ErrPartitioned) {
		t.Fatalf("dial across a partition = %v, want ErrPartitioned", err)
	}
	fn.HealAll()
	_ = second.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(second, make([]byte, 1)); err != nil {
		t.Fatalf("read after heal: %v", err)
	}
}

func TestDialToAClosedPipeListenerIsRefused(t *testing.T) {
	ctx := testCtx(t)
	fn := faultnet.NewNetwork(1)
	ln, err := fn.ListenPipe("b")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	dctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := fn.Dialer("a").DialContext(dctx, "pipe", "b"); err == nil {
		t.Fatal("dial to a closed pipe listener succeeded")
	}
}
