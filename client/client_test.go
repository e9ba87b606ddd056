package client_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/client"
	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
	"github.com/troupe-go/troupe/wire"
)

type Msg interface{ msg() }

type Add struct{ N int }

type Get struct {
	actor.Reply[Msg, int]
}

// Hold blocks until its asker leaves, then closes the channel named ID.
type Hold struct {
	actor.Reply[Msg, int]
	ID string
}

func (Add) msg()  {}
func (Get) msg()  {}
func (Hold) msg() {}

var (
	released, holding sync.Map // ID -> chan struct{}
	holdSeq           atomic.Int64
)

func releasedCh(id string) chan struct{} {
	ch, _ := released.LoadOrStore(id, make(chan struct{}))
	return ch.(chan struct{})
}

// holdingCh is closed once Hold's handler runs: the key's activation
// alone does not say so (the ask may still wait to run, and a cancel
// would drop it unseen).
func holdingCh(id string) chan struct{} {
	ch, _ := holding.LoadOrStore(id, make(chan struct{}))
	return ch.(chan struct{})
}

// closeOnce closes ch unless it is closed.
func closeOnce(ch chan struct{}) {
	select {
	case <-ch:
	default:
		close(ch)
	}
}

var Counter = actor.Define("counter", func(c *actor.Context[int, Msg], m Msg) error {
	switch m := m.(type) {
	case Add:
		c.SetState(c.State() + m.N)
	case Get:
		return actor.Respond(c, m, c.State())
	case Hold:
		closeOnce(holdingCh(m.ID))
		<-c.Done()
		closeOnce(releasedCh(m.ID))
	}
	return nil
}).WithMessages(Add{}, Get{}, Hold{})

func newClient(t *testing.T, seeds ...string) *client.Client {
	t.Helper()
	c, err := client.New(systemtest.Ctx(t), client.Config{ClusterName: "test", Seeds: seeds, SyncInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatalf("client.New: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestClientReachesEveryKeyFromManyGoroutines(t *testing.T) {
	systems := systemtest.StartCluster(t, 3, nil, Counter)
	c := newClient(t, systems[0].Addr())
	if n := len(c.Members()); n != 3 {
		t.Fatalf("client knows %d members, want 3", n)
	}
	ctx := systemtest.Ctx(t)
	const workers, keys = 64, 32
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			if err := Counter.Ref(c, "k"+strconv.Itoa(w%keys)).Tell(ctx, Add{N: 1}); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Asked through members, which are other senders than the client:
	// the tells arrive in their own time, all of them.
	systemtest.WaitUntil(t, "every tell counted", func() bool {
		total := 0
		for k := range keys {
			n, err := actor.Ask(ctx, Counter.Ref(systems[k%3], "k"+strconv.Itoa(k)), Get{})
			if err != nil {
				t.Fatal(err)
			}
			total += n
		}
		if total > workers {
			t.Fatalf("counted %d, more than the %d told", total, workers)
		}
		return total == workers
	})
	// Through the client, the same counts, in the client's own order.
	total := 0
	for k := range keys {
		n, err := actor.Ask(ctx, Counter.Ref(c, "k"+strconv.Itoa(k)), Get{})
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	if total != workers {
		t.Fatalf("counted %d through the client, want %d", total, workers)
	}
	busy := 0
	for _, s := range systems {
		if s.Stats().Active > 0 {
			busy++
		}
	}
	if busy != 3 {
		t.Fatalf("keys active on %d members, want all 3", busy)
	}
}

func TestClientCancelWithdrawsTheAskOnTheOwner(t *testing.T) {
	systems := systemtest.StartCluster(t, 2, nil, Counter)
	c := newClient(t, systems[1].Addr())
	ctx, cancel := context.WithCancel(systemtest.Ctx(t))
	id := fmt.Sprintf("%s#%d", t.Name(), holdSeq.Add(1)) // unique across -count runs
	errc := make(chan error, 1)
	go func() {
		_, err := actor.Ask(ctx, Counter.Ref(c, "held"), Hold{ID: id})
		errc <- err
	}()
	systemtest.Recv(t, holdingCh(id), "the ask to run")
	cancel()
	if err := systemtest.Recv(t, errc, "the ask"); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want Canceled", err)
	}
	systemtest.Recv(t, releasedCh(id), "the owner's handler to see the cancellation")
}

func TestClientKeepsServingThroughAMembersDeath(t *testing.T) {
	var victim systemtest.Net
	systems := systemtest.StartCluster(t, 3, func(i int, cfg *system.Config) {
		if i == 2 {
			victim.Attach(t, cfg)
		}
	}, Counter)
	c := newClient(t, systems[0].Addr())
	ctx := systemtest.Ctx(t)
	keys := make([]string, 30)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
		if _, err := actor.Ask(ctx, Counter.Ref(c, keys[i]), Get{}); err != nil {
			t.Fatal(err)
		}
	}
	systemtest.Crash(systems[2], &victim)
	systemtest.WaitUntil(t, "every key served again", func() bool {
		for _, k := range keys {
			if _, err := actor.Ask(ctx, Counter.Ref(c, k), Get{}); err != nil {
				return false
			}
		}
		return true
	})
}

func TestClientErrors(t *testing.T) {
	if _, err := client.New(systemtest.Ctx(t), client.Config{}); !errors.Is(err, client.ErrInvalidConfig) {
		t.Fatalf("no seeds: err = %v", err)
	}
	if _, err := client.New(systemtest.Ctx(t), client.Config{Seeds: []string{"nonsense"}}); !errors.Is(err, client.ErrInvalidConfig) {
		t.Fatalf("bad seed: err = %v", err)
	}
	systems := systemtest.StartCluster(t, 1, nil, Counter)
	// A seed of another cluster refuses the handshake: New says so at
	// once, even under a context without a deadline.
	var refused *wire.Refused
	if _, err := client.New(context.Background(), client.Config{ClusterName: "other", Seeds: []string{systems[0].Addr()}}); !errors.Is(err, cluster.ErrJoinRefused) ||
		!errors.As(err, &refused) || refused.Reason != wire.RefusedCluster {
		t.Fatalf("wrong cluster: expected ErrJoinRefused with a *wire.Refused for the cluster name; got %v", err)
	}
	c := newClient(t, systems[0].Addr())
	other := actor.Define("hosted-nowhere", func(*actor.Context[int, Msg], Msg) error { return nil }).WithMessages(Get{})
	if _, err := actor.Ask(systemtest.Ctx(t), other.Ref(c, "x"), Get{}); !errors.Is(err, actor.ErrUnknownActor) {
		t.Fatalf("unknown type: err = %v", err)
	}
	c.Close()
	if err := Counter.Ref(c, "x").Tell(systemtest.Ctx(t), Add{}); !errors.Is(err, actor.ErrSystemClosed) {
		t.Fatalf("after Close: err = %v", err)
	}
}
