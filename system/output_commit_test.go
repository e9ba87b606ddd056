package system_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

// errTooLow is the declared error of the gated actor's check.
var errTooLow = errors.New("too low")

type GateMsg interface{ gateMsg() }

// GAdd adds one and answers the count.
type GAdd struct{ actor.Reply[GateMsg, int] }

// GCheck answers the count, or errTooLow below Min.
type GCheck struct {
	actor.Reply[GateMsg, int]
	Min int
}

// GPark defers its reply until a GResolve.
type GPark struct{ actor.Reply[GateMsg, int] }

// GResolve adds N and resolves the parked asks with the new count.
type GResolve struct{ N int }

// GRelay adds 100, tells To the count through a context derived from
// the handler's, and answers the count.
type GRelay struct {
	actor.Reply[GateMsg, int]
	To actor.Ref[GateMsg]
}

// GHeard is what the listener hears.
type GHeard struct{ N int }

func (GAdd) gateMsg()     {}
func (GCheck) gateMsg()   {}
func (GPark) gateMsg()    {}
func (GResolve) gateMsg() {}
func (GRelay) gateMsg()   {}
func (GHeard) gateMsg()   {}

// gatedCluster starts five members hosting a counter with three replicas
// at WriteMajority and a pinned listener, and returns a ref to a key on
// its owner, a ref to the owner's listener, what the listener hears,
// parked (sent a value when an ask parks) and cut, which cuts the key's
// two other replicas off: its owner keeps a majority of the cluster, and
// so the key, but no longer meets its level. A tell's write gives up
// after the 2 s ask timeout.
func gatedCluster(t *testing.T) (ref, to actor.Ref[GateMsg], heard <-chan int, parked <-chan struct{}, cut func()) {
	t.Helper()
	heardC := make(chan int, 16)
	parkedC := make(chan struct{}, 16)
	listener := actor.Define("listener", func(c *actor.Context[int, GateMsg], m GateMsg) error {
		if h, ok := m.(GHeard); ok {
			heardC <- h.N
		}
		return nil
	}, actor.Pinned()).WithMessages(GHeard{})
	var mu sync.Mutex
	var pending []actor.Deferred[int]
	def := actor.Define("gated", func(c *actor.Context[int, GateMsg], m GateMsg) error {
		switch m := m.(type) {
		case GAdd:
			c.Update(func(n int) int { return n + 1 })
			return actor.Respond(c, m, c.State())
		case GCheck:
			if c.State() < m.Min {
				return errTooLow
			}
			return actor.Respond(c, m, c.State())
		case GPark:
			mu.Lock()
			pending = append(pending, actor.Defer(c, m))
			mu.Unlock()
			parkedC <- struct{}{}
		case GResolve:
			c.Update(func(n int) int { return n + m.N })
			mu.Lock()
			for _, d := range pending {
				d.Resolve(c.State())
			}
			pending = nil
			mu.Unlock()
		case GRelay:
			c.Update(func(n int) int { return n + 100 })
			ctx, cancel := context.WithTimeout(c, time.Second)
			defer cancel()
			if err := m.To.Tell(ctx, GHeard{N: c.State()}); err != nil {
				return err
			}
			return actor.Respond(c, m, c.State())
		}
		return nil
	}, actor.WithReplicas(3, actor.WriteMajority), actor.WithErrors(errTooLow), actor.WithAskTimeout(2*time.Second)).
		WithMessages(GAdd{}, GCheck{}, GPark{}, GResolve{}, GRelay{})
	systems, nets := replicatedCluster(t, 5, def, listener)
	key, replicas := ownedByFirstReplica(t, systems[0], "gated", 3)
	owner, _ := byAddr(t, systems, replicas[0])
	ref = def.Ref(owner, key)
	if got, err := actor.Ask(systemtest.Ctx(t), ref, GAdd{}); err != nil || got != 1 {
		t.Fatalf("add with every replica up: %d, %v; want 1", got, err)
	}
	cut = func() {
		for _, addr := range replicas[1:] {
			_, i := byAddr(t, systems, addr)
			nets[i].Cut()
		}
	}
	return ref, listener.RefAt(owner, owner.Addr(), "l"), heardC, parkedC, cut
}

func TestADeferredReplyWaitsForTheStateOfTheMessageThatResolvesIt(t *testing.T) {
	ref, _, _, parked, cut := gatedCluster(t)
	type outcome struct {
		n   int
		err error
	}
	asked := make(chan outcome, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n, err := actor.Ask(ctx, ref, GPark{})
		asked <- outcome{n, err}
	}()
	systemtest.Recv(t, parked, "the ask to park")
	cut()
	if err := ref.Tell(context.Background(), GResolve{N: 5}); err != nil {
		t.Fatal(err)
	}
	got := systemtest.Recv(t, asked, "the parked ask's answer")
	if !errors.Is(got.err, actor.ErrUnavailable) {
		t.Fatalf("a deferred reply resolved with a state that missed its level: %d, %v; want ErrUnavailable", got.n, got.err)
	}
}

func TestADeclaredErrorFromAnOwnerThatCannotConfirmTheKeyIsNotSent(t *testing.T) {
	ref, _, _, _, cut := gatedCluster(t)
	cut()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	got, err := actor.Ask(ctx, ref, GCheck{Min: 100})
	if !errors.Is(err, actor.ErrUnavailable) {
		t.Fatalf("a declared error answered by an owner that cannot reach a majority of its replicas: %d, %v; want ErrUnavailable", got, err)
	}
}

// FanMsg is the message of fanDef.
type FanMsg interface{ fanMsg() }

// FOut adds one, then asks To FGet from eight goroutines through a context
// derived from the handler's, and answers the count.
type FOut struct {
	actor.Reply[FanMsg, int]
	To actor.Ref[FanMsg]
}

// FGet answers the count.
type FGet struct{ actor.Reply[FanMsg, int] }

func (FOut) fanMsg() {}
func (FGet) fanMsg() {}

func TestAsksFromGoroutinesOfADurableHandlerCommitOneAtATime(t *testing.T) {
	def := actor.Define("fan", func(c *actor.Context[int, FanMsg], m FanMsg) error {
		switch m := m.(type) {
		case FOut:
			c.Update(func(n int) int { return n + 1 })
			ctx, cancel := context.WithCancel(c)
			defer cancel()
			errs := make(chan error, 8)
			for range 8 {
				go func() {
					_, err := actor.Ask(ctx, m.To, FGet{})
					errs <- err
				}()
			}
			for range 8 {
				if err := <-errs; err != nil {
					return err
				}
			}
			return actor.Respond(c, m, c.State())
		case FGet:
			return actor.Respond(c, m, c.State())
		}
		return nil
	}, actor.Durable()).WithMessages(FOut{}, FGet{})
	sys := newStandalone(t, system.Config{}, def)
	// The race detector reports two commits at once.
	for i := 1; i <= 10; i++ {
		if got, err := actor.Ask(systemtest.Ctx(t), def.Ref(sys, "a"), FOut{To: def.Ref(sys, "b")}); err != nil || got != i {
			t.Fatalf("fan out %d: %d, %v; want %d", i, got, err, i)
		}
	}
}
func TestATellThroughAContextDerivedFromTheHandlersWaitsForTheState(t *testing.T) {
	ref, to, heard, _, cut := gatedCluster(t)
	cut()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	got, err := actor.Ask(ctx, ref, GRelay{To: to})
	if !errors.Is(err, actor.ErrUnavailable) {
		t.Fatalf("a relay whose state missed its level: %d, %v; want ErrUnavailable", got, err)
	}
	select {
	case n := <-heard:
		t.Fatalf("the listener heard %d, from a state that was not stored", n)
	case <-time.After(300 * time.Millisecond):
	}
}

func TestAReplyToAStateChangeThatMissesItsLevelFailsWithErrUnavailable(t *testing.T) {
	ref, _, _, _, cut := gatedCluster(t)
	cut()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	got, err := actor.Ask(ctx, ref, GAdd{})
	if !errors.Is(err, actor.ErrUnavailable) {
		t.Fatalf("an add whose state missed its level: %d, %v; want ErrUnavailable", got, err)
	}
}
