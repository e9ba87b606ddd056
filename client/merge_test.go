package client

import (
	"slices"
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

func TestFollowedMembersAreKeptWhileAliveAndReplacedWhenNot(t *testing.T) {
	id := func(s string) ring.NodeID { return ring.NodeID{Addr: s, Incarnation: 1} }
	a, b, c, d, e := id("a"), id("b"), id("c"), id("d"), id("e")
	for _, tc := range []struct {
		name          string
		follow, alive []ring.NodeID
		silent        bool
		start         int
		want, added   []ring.NodeID
	}{
		{"first pick, from start", nil, []ring.NodeID{a, b, c, d, e}, false, 3, []ring.NodeID{d, e, a}, []ring.NodeID{d, e, a}},
		{"fewer alive than followed", nil, []ring.NodeID{a, b}, false, 1, []ring.NodeID{b, a}, []ring.NodeID{b, a}},
		{"all still alive: no change", []ring.NodeID{b, c, d}, []ring.NodeID{a, b, c, d, e}, false, 0, []ring.NodeID{b, c, d}, nil},
		{"one died: replaced", []ring.NodeID{b, c, d}, []ring.NodeID{a, b, d, e}, false, 2, []ring.NodeID{b, d, e}, []ring.NodeID{e}},
		{"a newcomer fills a gap", []ring.NodeID{a, b}, []ring.NodeID{a, b, c}, false, 0, []ring.NodeID{a, b, c}, []ring.NodeID{c}},
		{"all fell silent: others", []ring.NodeID{a, b, c}, []ring.NodeID{a, b, c, d, e}, true, 0, []ring.NodeID{d, e}, []ring.NodeID{d, e}},
		{"all fell silent, no others: none", []ring.NodeID{a, b}, []ring.NodeID{a, b}, true, 0, nil, nil},
	} {
		got, added := refollow(tc.follow, tc.alive, tc.silent, tc.start)
		if !slices.Equal(got, tc.want) || !slices.Equal(added, tc.added) {
			t.Errorf("%s: refollow(%v, %v, %v, %d) = %v, added %v; want %v, added %v", tc.name, tc.follow, tc.alive, tc.silent, tc.start, got, added, tc.want, tc.added)
		}
	}
}
