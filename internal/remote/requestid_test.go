package remote

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/cluster"
)

// An ask's request id reaches its handler on every way the router takes
// it: straight to the owner, retried at the owner a non-owner names,
// relayed around a silent link, sent again after its owner left.

func TestAskCarriesItsRequestIDToTheOwner(t *testing.T) {
	ns := newTestNodes(t, "a:1", "b:1")
	a, b := ns[0], ns[1]
	a.setView(a, b)
	b.setView(a, b)
	key := keyWhere(t, func(k string) bool { return ownerIn(k, a, b) == b.id })
	got, err := actor.Ask(actor.WithRequestID(ctxT(t), "req-1"), counter.Ref(a, key), whoAsks{})
	if err != nil || got != "req-1" {
		t.Fatalf("got %q, %v: want the handler on b to see req-1", got, err)
	}
	first, err1 := actor.Ask(ctxT(t), counter.Ref(a, key), whoAsks{})
	second, err2 := actor.Ask(ctxT(t), counter.Ref(a, key), whoAsks{})
	if err1 != nil || err2 != nil || len(first) != 32 || len(second) != 32 || first == second {
		t.Fatalf("got %q (%v) and %q (%v): want two different ids of 32 hex digits made by a", first, err1, second, err2)
	}
}

func TestAskRetriedAtTheOwnerANonOwnerNamesKeepsItsRequestID(t *testing.T) {
	ns := newTestNodes(t, "a:1", "b:1", "c:1")
	a, b, c := ns[0], ns[1], ns[2]
	// a has not heard of c yet; b and c have: b sends a to c.
	key := keyWhere(t, func(k string) bool { return ownerIn(k, a, b) == b.id && ownerIn(k, a, b, c) == c.id })
	a.setView(a, b)
	b.setView(a, b, c)
	c.setView(a, b, c)
	got, err := actor.Ask(actor.WithRequestID(ctxT(t), "retried"), counter.Ref(a, key), whoAsks{})
	if err != nil || got != "retried" {
		t.Fatalf("got %q, %v: want c to see the id a named", got, err)
	}
}

func TestUnavailableNamesTheRequestID(t *testing.T) {
	a, b, c, key := staleAtA(t)
	c.setView(a, b) // c thinks b owns it: nobody accepts
	_, err := actor.Ask(actor.WithRequestID(ctxT(t), "nobody"), counter.Ref(a, key), get{})
	var re *actor.RequestError
	if !errors.Is(err, actor.ErrUnavailable) || !errors.As(err, &re) || re.RequestID != "nobody" || actor.RequestIDOf(err) != "nobody" {
		t.Fatalf("err = %v, want ErrUnavailable in a *actor.RequestError naming nobody", err)
	}
}

func TestRelayedAskKeepsItsRequestID(t *testing.T) {
	_, ns, eps, atB, _ := silentLinkNodes(t)
	a, c := ns[0], ns[2]
	silenceAtA(t, ns, eps)
	got, err := actor.Ask(actor.WithRequestID(ctxT(t), "relayed"), counter.Ref(a, atB), whoAsks{})
	if err != nil || got != "relayed" {
		t.Fatalf("got %q, %v: want b, reached through c, to see the id a named", got, err)
	}
	if n := c.r.servingN(); n != 0 {
		t.Errorf("expected the relay to forget the ask it relayed, still serving %d", n)
	}
}

// An ask that may have run (its message is not actor.ReadOnly) is not run
// a second time when its owner dies before answering, or a newer process
// takes its address (it was killed and restarted: the chaos run's write
// applied twice): the ask fails with ErrOutcomeUnknown, which matches
// ErrUnavailable too.
func TestAnAskThatMayHaveRunIsNotSentAgainWhenItsOwnerGoes(t *testing.T) {
	for _, tc := range []struct {
		name string
		view func(a, b, l *testNode) []cluster.Member
	}{
		{"dead", func(a, b, l *testNode) []cluster.Member {
			return append(viewOf(a, b), cluster.Member{ID: l.id, Status: cluster.StatusDead, ActorTypes: []string{"counter", "seq"}})
		}},
		{"retired", func(a, b, l *testNode) []cluster.Member {
			restarted := l.id
			restarted.Incarnation++
			return append(leftView([]*testNode{a, b}, l),
				cluster.Member{ID: restarted, Status: cluster.StatusAlive, Joining: true, ActorTypes: []string{"counter", "seq"}})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, l, key := leaverOwns(t)
			ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
			defer cancel()
			done := async(func() (int, error) { return actor.Ask(ctx, counter.Ref(a, key), incr{}) })
			pollUntil(t, "the ask to wait on l", func() bool { return a.r.waiting() == 1 })
			a.r.Update(a.id, true, tc.view(a, b, l))
			err := (<-done).err
			if !errors.Is(err, actor.ErrOutcomeUnknown) || !errors.Is(err, actor.ErrUnavailable) {
				t.Fatalf("expected ErrOutcomeUnknown (and ErrUnavailable), not a second run at b; got %v", err)
			}
			if n, err := actor.Ask(ctx, counter.Ref(b, key), get{}); err != nil || n != 0 {
				t.Fatalf("expected b never to have counted; got %d, %v", n, err)
			}
		})
	}
}

// An ask unanswered by a member that left in order is placed again, on
// the key's new owner, only if the member retired first (it said, after
// its answers, that it runs no more asks): the ask never ran there. One
// whose owner left without retiring on its lane may have run there, and
// fails with ErrOutcomeUnknown once retireGrace is over. Either way the
// view may go from alive to left in one step (the leaving record came
// and went between two updates).
func TestAnAskUnansweredByAMemberThatLeftInOrderRunsOnTheNewOwnerOnlyIfItRetired(t *testing.T) {
	t.Run("retired", func(t *testing.T) {
		a, b, l, key, net := leaverOwnsOn(t)
		ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
		defer cancel()
		done := async(func() (int, error) { return actor.Ask(ctx, counter.Ref(a, key), incr{}) })
		pollUntil(t, "the ask to wait on l", func() bool { return a.r.waiting() == 1 })
		net.Heal(a.id.Addr, l.id.Addr)
		if err := l.r.Retire(ctx); err != nil {
			t.Fatal(err)
		}
		a.r.Update(a.id, true, leftView([]*testNode{a, b}, l))
		if got := <-done; got.err != nil || got.v != 1 {
			t.Fatalf("got %d, %v: want the ask run once, by b", got.v, got.err)
		}
	})
	t.Run("not retired", func(t *testing.T) {
		a, b, l, key, _ := leaverOwnsOn(t)
		ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
		defer cancel()
		done := async(func() (int, error) { return actor.Ask(ctx, counter.Ref(a, key), incr{}) })
		pollUntil(t, "the ask to wait on l", func() bool { return a.r.waiting() == 1 })
		a.r.Update(a.id, true, leftView([]*testNode{a, b}, l))
		if err := (<-done).err; !errors.Is(err, actor.ErrOutcomeUnknown) {
			t.Fatalf("an ask whose owner left without retiring: %v, want ErrOutcomeUnknown", err)
		}
		if n, err := actor.Ask(ctx, counter.Ref(b, key), get{}); err != nil || n != 0 {
			t.Fatalf("expected b never to have counted; got %d, %v", n, err)
		}
	})
}

// A member that retired answers every later ask "not the owner", so that
// its asker places it again; its retirement waits for the asks it runs.
func TestARetiringMemberAnswersWhatItRunsThenRefusesTheRest(t *testing.T) {
	a, b, l, key, net := leaverOwnsOn(t)
	net.Heal(a.id.Addr, l.id.Addr)
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	if err := l.r.Retire(ctx); err != nil {
		t.Fatal(err)
	}
	// a's view still places the key on l: l refuses, and the ask runs on
	// b once a's view changes.
	done := async(func() (int, error) { return actor.Ask(ctx, counter.Ref(a, key), incr{}) })
	pollUntil(t, "the ask to wait for a's view to change", func() bool { return a.r.waiting() == 1 })
	a.r.Update(a.id, true, leftView([]*testNode{a, b}, l))
	if got := <-done; got.err != nil || got.v != 1 {
		t.Fatalf("got %d, %v: want the ask run once, by b", got.v, got.err)
	}
	if n, err := actor.Ask(ctx, counter.Ref(b, key), get{}); err != nil || n != 1 {
		t.Fatalf("expected b to have counted the ask that l refused; got %d, %v", n, err)
	}
}

// A ReadOnly ask whose owner goes before answering (it left, or died) is
// asked again of the key's new owner, under its own request id.
func TestAReadOnlyAskIsSentAgainWhenItsOwnerGoesAndKeepsItsRequestID(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status cluster.Status
	}{{"left", cluster.StatusLeft}, {"dead", cluster.StatusDead}} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, l, key := leaverOwns(t)
			ctx, cancel := context.WithTimeout(actor.WithRequestID(ctxT(t), "read-again"), 5*time.Second)
			defer cancel()
			done := async(func() (string, error) { return actor.Ask(ctx, counter.Ref(a, key), whoAsks{}) })
			pollUntil(t, "the ask to wait on l", func() bool { return a.r.waiting() == 1 })
			a.r.Update(a.id, true, append(viewOf(a, b), cluster.Member{ID: l.id, Status: tc.status, ActorTypes: []string{"counter", "seq"}}))
			if got := <-done; got.err != nil || got.v != "read-again" {
				t.Fatalf("got %q, %v: want the ask answered by b, the new owner, under its id", got.v, got.err)
			}
		})
	}
}

// answer is what an ask run by async returned.
type answer[R any] struct {
	v   R
	err error
}

// async runs ask in a goroutine; its answer arrives on the channel.
func async[R any](ask func() (R, error)) <-chan answer[R] {
	done := make(chan answer[R], 1)
	go func() {
		v, err := ask()
		done <- answer[R]{v, err}
	}()
	return done
}
