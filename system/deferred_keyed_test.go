package system_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

// Escrow messages: an actor whose Reserve defers its reply until a later
// Release gives it.
type EscrowMsg interface{ escrowMsg() }

// Reserve adds N to the sum and defers its reply, the sum, to a Release.
type Reserve struct {
	actor.Reply[EscrowMsg, int]
	N int
}

// Release gives the oldest deferred reply of a Reserve, or with Refuse fails
// it with the declared errRefused; it answers whether one was open.
type Release struct {
	actor.Reply[EscrowMsg, bool]
	Refuse bool
}

func (Reserve) escrowMsg() {}
func (Release) escrowMsg() {}

// errRefused is escrowDef's declared error.
var errRefused = errors.New("refused")

// escrow is what escrowDef's handler shares with its test: how many
// Reserves ran, and the replies they deferred, in order.
type escrow struct {
	reserves atomic.Int32
	open     chan actor.Deferred[int]
}

func newEscrow() *escrow { return &escrow{open: make(chan actor.Deferred[int], 8)} }

func escrowDef(e *escrow, opts ...actor.Option) *actor.Def[int, EscrowMsg] {
	opts = append(opts, actor.WithErrors(errRefused))
	return actor.Define("escrow", func(c *actor.Context[int, EscrowMsg], m EscrowMsg) error {
		switch m := m.(type) {
		case Reserve:
			e.reserves.Add(1)
			c.Update(func(n int) int { return n + m.N })
			e.open <- actor.Defer(c, m)
		case Release:
			select {
			case d := <-e.open:
				if m.Refuse {
					d.Fail(errRefused)
				} else {
					d.Resolve(c.State())
				}
				return actor.Respond(c, m, true)
			default:
				return actor.Respond(c, m, false)
			}
		}
		return nil
	}, opts...).WithMessages(Reserve{}, Release{})
}

// reserveAsked asks ref, with idempotency key key, to reserve n, and returns
// the outcome's channel once the handler deferred the reply.
func reserveAsked(t *testing.T, e *escrow, ref actor.Ref[EscrowMsg], key string, n int) <-chan askOutcome {
	t.Helper()
	out := make(chan askOutcome, 1)
	before := e.reserves.Load()
	go func() {
		got, err := actor.Ask(keyed(t, key), ref, Reserve{N: n})
		out <- askOutcome{got, err}
	}()
	systemtest.Await(t, func() error {
		if e.reserves.Load() == before {
			return errors.New("the Reserve has not run yet")
		}
		return nil
	})
	return out
}

type askOutcome struct {
	n   int
	err error
}

// settle asks ref to give the oldest deferred reply (or, with refuse,
// fail it).
func settle(t *testing.T, ref actor.Ref[EscrowMsg], refuse bool) {
	t.Helper()
	if open, err := actor.Ask(systemtest.Ctx(t), ref, Release{Refuse: refuse}); err != nil || !open {
		t.Fatalf("settle: %v, %v; want a deferred reply given", open, err)
	}
}

func TestAKeyedAsksDeferredReplyIsKeptForItsRetries(t *testing.T) {
	e := newEscrow()
	def := escrowDef(e, actor.Durable())
	sys := newStandalone(t, system.Config{}, def)
	ref := def.Ref(sys, "acct")
	first := reserveAsked(t, e, ref, "pay-1", 5)
	// The reply is still open: a retry is told so, and does not run.
	_, err := actor.Ask(keyed(t, "pay-1"), ref, Reserve{N: 5})
	if !errors.Is(err, actor.ErrInProgress) || !actor.Temporary(err) {
		t.Fatalf("a retry while the reply is deferred: %v, want ErrInProgress, temporary", err)
	}
	settle(t, ref, false)
	if o := <-first; o.err != nil || o.n != 5 {
		t.Fatalf("the keyed reserve's deferred reply: %d, %v; want 5", o.n, o.err)
	}
	for i := range 2 {
		if got, err := actor.Ask(keyed(t, "pay-1"), ref, Reserve{N: 5}); err != nil || got != 5 {
			t.Fatalf("retry %d after the reply was given: %d, %v; want 5, the kept reply", i+1, got, err)
		}
	}
	if _, err := actor.Ask(keyed(t, "pay-1"), ref, Reserve{N: 6}); !errors.Is(err, actor.ErrIdempotencyConflict) {
		t.Fatalf("the key reused for another reserve: %v, want ErrIdempotencyConflict", err)
	}
	if n := e.reserves.Load(); n != 1 {
		t.Fatalf("the handler ran %d times for one keyed reserve and its retries, want 1", n)
	}
}

func TestAKeyedAsksDeferredDeclaredErrorIsKeptForItsRetries(t *testing.T) {
	e := newEscrow()
	def := escrowDef(e, actor.Durable())
	sys := newStandalone(t, system.Config{}, def)
	ref := def.Ref(sys, "acct")
	first := reserveAsked(t, e, ref, "pay-1", 5)
	settle(t, ref, true)
	if o := <-first; !errors.Is(o.err, errRefused) {
		t.Fatalf("the keyed reserve's deferred reply: %d, %v; want the declared errRefused", o.n, o.err)
	}
	if _, err := actor.Ask(keyed(t, "pay-1"), ref, Reserve{N: 5}); !errors.Is(err, errRefused) {
		t.Fatalf("a retry after the reply failed: %v, want errRefused, the kept answer", err)
	}
	if n := e.reserves.Load(); n != 1 {
		t.Fatalf("the handler ran %d times for one keyed reserve and its retry, want 1", n)
	}
}

// The answer of a deferred reply is in the key's record: a restart on the
// same DataDir answers a retry with it. A deferred reply never given (the
// system closed first) is not known: its retry fails with
// ErrOutcomeUnknown and does not run.
func TestAKeptDeferredReplySurvivesARestartWithItsDataDir(t *testing.T) {
	dir := t.TempDir()
	e := newEscrow()
	def := escrowDef(e, actor.Durable())
	sys := newStandalone(t, system.Config{DataDir: dir}, def)
	ref := def.Ref(sys, "acct")
	first := reserveAsked(t, e, ref, "given", 3)
	settle(t, ref, false)
	if o := <-first; o.err != nil || o.n != 3 {
		t.Fatalf("the keyed reserve's deferred reply: %d, %v; want 3", o.n, o.err)
	}
	// Given from outside any message: the cell writes it before it leaves.
	second := reserveAsked(t, e, ref, "given-outside", 4)
	(<-e.open).Resolve(70)
	if o := <-second; o.err != nil || o.n != 70 {
		t.Fatalf("the deferred reply given from another goroutine: %d, %v; want 70", o.n, o.err)
	}
	open := reserveAsked(t, e, ref, "never", 1)
	closeNow(t, sys)
	if o := <-open; o.err == nil {
		t.Fatalf("a deferred reply open at Close answered %d", o.n)
	}
	<-e.open // its Deferred, never given
	sys = newStandalone(t, system.Config{DataDir: dir}, def)
	ref = def.Ref(sys, "acct")
	if got, err := actor.Ask(keyed(t, "given"), ref, Reserve{N: 3}); err != nil || got != 3 {
		t.Fatalf("the keyed reserve retried after a restart: %d, %v; want 3, the kept reply", got, err)
	}
	if got, err := actor.Ask(keyed(t, "given-outside"), ref, Reserve{N: 4}); err != nil || got != 70 {
		t.Fatalf("the keyed reserve given from outside, retried after a restart: %d, %v; want 70, the kept reply", got, err)
	}
	if _, err := actor.Ask(keyed(t, "never"), ref, Reserve{N: 1}); !errors.Is(err, actor.ErrOutcomeUnknown) {
		t.Fatalf("the retry of a reserve whose reply was never given: %v, want ErrOutcomeUnknown", err)
	}
	if n := e.reserves.Load(); n != 3 {
		t.Fatalf("the handler ran %d times for three keyed reserves and their retries, want 3", n)
	}
}

func TestAKeptDeferredReplySurvivesItsOwnersCrash(t *testing.T) {
	e := newEscrow()
	def := escrowDef(e, actor.WithReplicas(3, actor.WriteMajority))
	systems, nets := replicatedCluster(t, 3, def)
	owner, i := byAddr(t, systems, system.OwnerOf(systems[0], "escrow", "k"))
	rest := without(systems, owner)
	// Asked through another member: the key crosses the wire.
	first := reserveAsked(t, e, def.Ref(rest[0], "k"), "pay", 7)
	settle(t, def.Ref(rest[0], "k"), false)
	if o := <-first; o.err != nil || o.n != 7 {
		t.Fatalf("the keyed reserve's deferred reply: %d, %v; want 7", o.n, o.err)
	}
	systemtest.Crash(owner, nets[i])
	var got int
	var err error
	systemtest.Await(t, func() error {
		ctx, cancel := context.WithTimeout(keyed(t, "pay"), 2*time.Second)
		defer cancel()
		got, err = actor.Ask(ctx, def.Ref(rest[1], "k"), Reserve{N: 7})
		if errors.Is(err, actor.ErrUnavailable) && !errors.Is(err, actor.ErrOutcomeUnknown) {
			return err // the key's new owner is not settled yet
		}
		return nil
	})
	if err != nil || got != 7 {
		t.Fatalf("the keyed reserve retried after its owner crashed: %d, %v; want 7, the kept reply", got, err)
	}
	if n := e.reserves.Load(); n != 1 {
		t.Fatalf("the handler ran %d times for one keyed reserve and its retry, want 1", n)
	}
}
