package client

import (
	"testing"
	"time"

	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/remote"
	"github.com/troupe-go/troupe/internal/transport"
	"github.com/troupe-go/troupe/ring"
)

func TestMemberListsMergeWithoutDroppingANewcomer(t *testing.T) {
	ep, err := transport.NewMemNetwork().Join(ring.NodeID{Addr: "client", Incarnation: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	c := &Client{cfg: Config{SyncInterval: time.Hour}, learned: make(chan struct{})}
	c.router = remote.New(remote.Config{Endpoint: ep})
	defer c.router.Close()
	a := cluster.Member{ID: ring.NodeID{Addr: "a:1", Incarnation: 1}, Status: cluster.StatusAlive}
	b := cluster.Member{ID: ring.NodeID{Addr: "b:1", Incarnation: 1}, Status: cluster.StatusAlive}
	c.onMembers(ring.NodeID{}, []cluster.Member{a, b})
	// A member that has not heard of b yet sends an older list: b stays.
	c.onMembers(ring.NodeID{}, []cluster.Member{a})
	if got := c.Members(); len(got) != 2 {
		t.Fatalf("members %v, want a and b", got)
	}
	// A later state wins over an earlier one, whichever list comes last.
	deadB := b
	deadB.Status = cluster.StatusDead
	c.onMembers(ring.NodeID{}, []cluster.Member{a, deadB})
	c.onMembers(ring.NodeID{}, []cluster.Member{a, b})
	for _, m := range c.Members() {
		if m.ID == b.ID && m.Status != cluster.StatusDead {
			t.Fatalf("b is %v after a stale list, want dead", m.Status)
		}
	}
	// A member no list names for two sync intervals is dropped.
	c.cfg.SyncInterval = time.Nanosecond
	time.Sleep(time.Millisecond)
	c.onMembers(ring.NodeID{}, []cluster.Member{a})
	if got := c.Members(); len(got) != 1 {
		t.Fatalf("members %v, want a only", got)
	}
}
