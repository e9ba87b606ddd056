package client_test

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-go/troupe/client"
	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

// closedAddr returns a loopback address where nothing listens any more.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestNewWithAnUnreachableSeedFailsWithinTheJoinTimeoutNamingTheDialError(t *testing.T) {
	seed := closedAddr(t)
	start := time.Now()
	_, err := client.New(context.Background(), client.Config{ClusterName: "test", Seeds: []string{seed}, JoinTimeout: 300 * time.Millisecond})
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("expected New under a context without deadline to give up at the 300ms join timeout; it took %v", took)
	}
	var je *cluster.JoinError
	if !errors.Is(err, cluster.ErrJoinTimeout) || !errors.As(err, &je) {
		t.Fatalf("expected a *cluster.JoinError matching ErrJoinTimeout; got %v", err)
	}
	if len(je.Seeds) != 1 || je.Seeds[0].Seed != seed || !errors.Is(je.Seeds[0].Err, syscall.ECONNREFUSED) {
		t.Fatalf("expected the seed %s listed with its connection-refused dial error; got %+v", seed, je.Seeds)
	}
}

func TestMembersListsOneRecordPerAddressRightAfterNewAndAfterARestart(t *testing.T) {
	var nets [3]systemtest.Net
	systems := systemtest.StartCluster(t, 3, func(i int, cfg *system.Config) { nets[i].Attach(t, cfg) }, Counter)
	c := newClient(t, systems[0].Addr())
	if ms := c.Members(); len(ms) != 3 {
		t.Fatalf("expected exactly 3 members right after New; got %v", ms)
	}
	// Member 2 dies and a new process starts at its address.
	addr := systems[2].Addr()
	systemtest.Crash(systems[2], &nets[2])
	restarted := systemtest.Join(t, []string{systems[0].Addr()}, func(cfg *system.Config) {
		cfg.Cluster.Bind = addr
		cfg.Cluster.Advertise = addr
	}, Counter)
	systemtest.WaitUntil(t, "the client and the members see the restarted member", func() bool {
		self := selfOf(restarted)
		return hasAlive(c.Members(), self) && hasAlive(systems[0].Members(), self) && hasAlive(systems[1].Members(), self)
	})
	for name, ms := range map[string][]cluster.Member{"client": c.Members(), "member 0": systems[0].Members(), "restarted": restarted.Members()} {
		seen := map[string]bool{}
		for _, m := range ms {
			if seen[m.ID.Addr] || m.Status == cluster.StatusLeft {
				t.Fatalf("%s: expected one current record per address; got %v", name, ms)
			}
			seen[m.ID.Addr] = true
		}
		if len(ms) != 3 {
			t.Fatalf("%s: expected exactly 3 members after the restart; got %v", name, ms)
		}
	}
}

// selfOf returns the identity of s as it lists itself.
func selfOf(s *system.System) cluster.Member {
	for _, m := range s.Members() {
		if m.ID.Addr == s.Addr() {
			return m
		}
	}
	return cluster.Member{}
}

func hasAlive(ms []cluster.Member, self cluster.Member) bool {
	for _, m := range ms {
		if m.ID == self.ID && m.Status == cluster.StatusAlive && !m.Joining {
			return true
		}
	}
	return false
}
