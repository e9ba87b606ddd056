package systemtest_test

import (
	"net"
	"testing"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/nettest"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

func TestACutNetClosesItsConnectionsAndRefusesDialsUntilHealed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nettest.Serve(t, ln, nettest.Echo)
	var n systemtest.Net
	ctx := systemtest.Ctx(t)
	c, err := n.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n.Cut()
	if _, err := c.Write([]byte("x")); err == nil {
		t.Fatal("a write on a cut connection succeeded")
	}
	if _, err := n.DialContext(ctx, "tcp", ln.Addr().String()); err == nil {
		t.Fatal("a dial through a cut net succeeded")
	}
	n.Heal()
	c2, err := n.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("a dial after Heal: %v", err)
	}
	c2.Close()
}

var idle = actor.Define("idle", func(*actor.Context[int, int], int) error { return nil })

func TestACrashedMemberIsFoundDeadNotLeft(t *testing.T) {
	var victim systemtest.Net
	systems := systemtest.StartCluster(t, 3, func(i int, cfg *system.Config) {
		if i == 2 {
			victim.Attach(t, cfg)
		}
	}, idle)
	crashed := systems[2].Addr()
	systemtest.Crash(systems[2], &victim)
	ms, err := systems[0].WaitAlive(systemtest.Ctx(t), 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.ID.Addr == crashed && m.Status != cluster.StatusDead {
			t.Fatalf("the crashed member is %v to its peer, want dead: a crash says no goodbye", m.Status)
		}
	}
}
