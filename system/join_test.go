package system_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
	"github.com/troupe-go/troupe/wire"
)

// joinThrough starts a member seeded with seeds under a context without a
// deadline, and returns Start's error and how long it took.
func joinThrough(t *testing.T, name string, joinTimeout time.Duration, seeds ...string) (error, time.Duration) {
	t.Helper()
	cc := cluster.FastConfig("127.0.0.1:0")
	cc.ClusterName = name
	cc.Seeds = seeds
	cc.JoinTimeout = joinTimeout
	start := time.Now()
	s, err := system.Start(context.Background(), system.Config{Cluster: &cc})
	if err == nil {
		s.Close(context.Background())
		t.Fatal("expected the join to fail")
	}
	return err, time.Since(start)
}

func TestStartThroughASeedOfAnotherClusterFailsAtOnceWithTheRefusal(t *testing.T) {
	seed := systemtest.Join(t, nil, nil) // cluster "test"
	err, took := joinThrough(t, "other", time.Minute, seed.Addr())
	var refused *wire.Refused
	if !errors.Is(err, cluster.ErrJoinRefused) || !errors.As(err, &refused) || refused.Reason != wire.RefusedCluster {
		t.Fatalf("expected ErrJoinRefused with the seed's *wire.Refused for the cluster name; got %v", err)
	}
	if took > 5*time.Second {
		t.Fatalf("expected a refused join to fail at once, not at the join timeout; it took %v", took)
	}
}

func TestStartThroughAnUnreachableSeedFailsAtTheJoinTimeoutWithTheDialError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	seed := ln.Addr().String()
	ln.Close()
	err, took := joinThrough(t, "test", 300*time.Millisecond, seed)
	var je *cluster.JoinError
	if !errors.Is(err, cluster.ErrJoinTimeout) || !errors.As(err, &je) {
		t.Fatalf("expected a *cluster.JoinError matching ErrJoinTimeout; got %v", err)
	}
	if len(je.Seeds) != 1 || je.Seeds[0].Seed != seed || !errors.Is(je.Seeds[0].Err, syscall.ECONNREFUSED) {
		t.Fatalf("expected the seed %s listed with its connection-refused dial error; got %+v", seed, je.Seeds)
	}
	if took > 3*time.Second {
		t.Fatalf("expected Start under a context without deadline to give up at the 300ms join timeout; it took %v", took)
	}
}

func TestMembersListsOneRecordPerAddressAfterAMemberRestarts(t *testing.T) {
	var nets [3]systemtest.Net
	systems := systemtest.StartCluster(t, 3, func(i int, cfg *system.Config) { nets[i].Attach(t, cfg) })
	addr := systems[2].Addr()
	systemtest.Crash(systems[2], &nets[2])
	restarted := systemtest.Join(t, []string{systems[0].Addr()}, func(cfg *system.Config) {
		cfg.Cluster.Bind = addr
		cfg.Cluster.Advertise = addr
	})
	systemtest.WaitAlive(t, []*system.System{systems[0], systems[1], restarted}, 3)
	for _, s := range []*system.System{systems[0], systems[1], restarted} {
		ms := s.Members()
		seen := map[string]bool{}
		for _, m := range ms {
			if seen[m.ID.Addr] || m.Status == cluster.StatusLeft {
				t.Fatalf("%s: expected one current record per address; got %v", s.Addr(), ms)
			}
			seen[m.ID.Addr] = true
		}
		if len(ms) != 3 {
			t.Fatalf("%s: expected exactly 3 members after the restart; got %v", s.Addr(), ms)
		}
	}
}

var together = actor.Define("together", func(*actor.Context[int, int], int) error { return nil })

// startTogether starts one member per listener at once, each with the
// seed list seedsOf gives it, and returns each Start's system and error.
func startTogether(t *testing.T, joinTimeout time.Duration, seedsOf func(i int, addrs []string) []string, n int) ([]*system.System, []error) {
	t.Helper()
	lns := make([]net.Listener, n)
	addrs := make([]string, n)
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i], addrs[i] = ln, ln.Addr().String()
	}
	systems, errs := make([]*system.System, n), make([]error, n)
	done := make(chan struct{})
	for i := range n {
		go func() {
			defer func() { done <- struct{}{} }()
			cc := cluster.FastConfig(addrs[i])
			cc.ClusterName = "together"
			cc.Seeds = seedsOf(i, addrs)
			cc.JoinTimeout = joinTimeout
			systems[i], errs[i] = system.Start(systemtest.Ctx(t), system.Config{Actors: []actor.Definition{together}, Cluster: &cc, Listener: lns[i]})
		}()
	}
	for range n {
		<-done
	}
	t.Cleanup(func() {
		for _, s := range systems {
			if s != nil {
				s.Close(context.Background())
			}
		}
	})
	return systems, errs
}

func TestMembersStartedTogetherWithOneSeedListAllStart(t *testing.T) {
	systems, errs := startTogether(t, time.Minute, func(_ int, addrs []string) []string { return addrs }, 3)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("member %d: %v", i, err)
		}
	}
	systemtest.WaitAlive(t, systems, 3)
}

// Lists that each name only the other members have no founder: every
// member joins and waits for one that takes keys, and Start says so
// rather than return a member that serves nothing.
func TestMembersWhoseSeedsNameOnlyTheOthersFailToStartSayingWhy(t *testing.T) {
	_, errs := startTogether(t, time.Second, func(i int, addrs []string) []string {
		return slices.Delete(slices.Clone(addrs), i, i+1)
	}, 2)
	for i, err := range errs {
		if !errors.Is(err, cluster.ErrJoinTimeout) || !strings.Contains(err.Error(), "no member takes keys") {
			t.Fatalf("member %d: expected ErrJoinTimeout saying no member takes keys; got %v", i, err)
		}
	}
}
