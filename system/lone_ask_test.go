package system_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

// Remote asks alone in flight and many at once, through the events
// around them: a broken connection, askers coming and going, a cancel.

// LoneHold blocks its handler until the test opens the gate named ID, then
// answers "opened".
type LoneHold struct {
	actor.Reply[LMsg, string]
	ID string
}

// LoneSame answers N.
type LoneSame struct {
	actor.Reply[LMsg, int]
	N int
}

type LMsg interface{ lmsg() }

func (LoneHold) lmsg() {}
func (LoneSame) lmsg() {}

var loneGated = actor.Define("loneGated", func(c *actor.Context[int, LMsg], m LMsg) error {
	switch m := m.(type) {
	case LoneHold:
		close(stallStarted(m.ID))
		select {
		case <-gateOf("lone:" + m.ID):
		case <-c.Done():
			return c.Err()
		}
		return actor.Respond(c, m, "opened")
	case LoneSame:
		return actor.Respond(c, m, m.N)
	}
	return nil
}).WithMessages(LoneHold{}, LoneSame{})

// loneKey finds a key of loneGated that from places on to.
func loneKey(t *testing.T, from, to *system.System) string {
	t.Helper()
	return keyPlacedOn(t, from, to, "loneGated", "g-")
}

// A lone ask whose connection breaks while it waits gets its reply over
// the connection that replaces it.
func TestALoneAskOutlivesABrokenConnection(t *testing.T) {
	var cn systemtest.Net
	systems := systemtest.StartCluster(t, 2, func(i int, cfg *system.Config) {
		if i == 0 {
			cn.Attach(t, cfg)
		}
	}, loneGated)
	ctx := systemtest.Ctx(t)
	key := loneKey(t, systems[0], systems[1])
	id := stallID(t)
	type result struct {
		s   string
		err error
	}
	res := make(chan result, 1)
	go func() {
		s, err := actor.Ask(ctx, loneGated.Ref(systems[0], key), LoneHold{ID: id})
		res <- result{s, err}
	}()
	systemtest.Recv(t, stallStarted(id), "the loneGated handler to run on the owner")
	cn.Cut() // every connection of member 0 closes
	cn.Heal()
	close(gateOf("lone:" + id))
	if r := systemtest.Recv(t, res, "the ask"); r.err != nil || r.s != "opened" {
		t.Fatalf("ask = %q, %v; want opened", r.s, r.err)
	}
	// And asks go on, alone and not.
	for i := range 50 {
		if n, err := actor.Ask(ctx, loneGated.Ref(systems[0], key), LoneSame{N: i}); err != nil || n != i {
			t.Fatalf("ask %d after the break = %d, %v", i, n, err)
		}
	}
}

// Askers that come and go, so that asks are now alone in flight, now
// not, each get their own replies.
func TestLoneAndConcurrentRemoteAsksGetTheirOwnReplies(t *testing.T) {
	systems := systemtest.StartCluster(t, 2, nil, loneGated)
	ctx := systemtest.Ctx(t)
	keys := []string{loneKey(t, systems[0], systems[1])}
	for i := 0; len(keys) < 4; i++ {
		if k := fmt.Sprintf("g2-%d", i); system.OwnerOf(systems[0], "loneGated", k) == systems[1].Addr() {
			keys = append(keys, k)
		}
	}
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				if g%2 == 1 && i%50 == 0 {
					// Now and then one asker alone for a while.
					continue
				}
				want := g*1000 + i
				n, err := actor.Ask(ctx, loneGated.Ref(systems[0], keys[(g+i)%len(keys)]), LoneSame{N: want})
				if err != nil || n != want {
					errc <- fmt.Errorf("asker %d, ask %d: got %d, %v; want %d", g, i, n, err, want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	// One asker alone.
	for i := range 200 {
		if n, err := actor.Ask(ctx, loneGated.Ref(systems[0], keys[i%len(keys)]), LoneSame{N: i}); err != nil || n != i {
			t.Fatalf("lone ask %d = %d, %v", i, n, err)
		}
	}
	// A lone ask cancelled while it waits.
	id := stallID(t)
	cctx, cancel := context.WithCancel(ctx)
	errs := make(chan error, 1)
	go func() {
		_, err := actor.Ask(cctx, loneGated.Ref(systems[0], keys[0]), LoneHold{ID: id})
		errs <- err
	}()
	systemtest.Recv(t, stallStarted(id), "the loneGated handler to run")
	cancel()
	if err := systemtest.Recv(t, errs, "the cancelled ask"); !errorsIs(err, context.Canceled) {
		t.Fatalf("cancelled ask: %v, want Canceled", err)
	}
}
