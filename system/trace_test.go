package system_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

// spanTracer is a Tracer that makes a "span" per handled message: it
// records what it was called with and gives the handler a trace context
// of the message's trace id and a parent id of its own, numbered per
// member.
type spanTracer struct {
	member string
	mu     sync.Mutex
	seen   []tracerCall
}

// tracerCall is one call of a spanTracer.
type tracerCall struct {
	actor.Handling
	member   string
	in, out  actor.TraceContext
	ended    bool
	endedErr error
}

func (s *spanTracer) Handle(ctx context.Context, m actor.Handling) (actor.TraceContext, func(error)) {
	in := actor.TraceContextFrom(ctx)
	s.mu.Lock()
	i := len(s.seen)
	out := actor.TraceContext{}
	if !in.IsZero() {
		out = actor.TraceContext{Parent: fmt.Sprintf("%s%016x-01", in.Parent[:36], 0xabc000+i), State: in.State}
	}
	s.seen = append(s.seen, tracerCall{Handling: m, member: s.member, in: in, out: out})
	s.mu.Unlock()
	return out, func(err error) {
		s.mu.Lock()
		s.seen[i].ended, s.seen[i].endedErr = true, err
		s.mu.Unlock()
	}
}

// calls returns the calls for key so far.
func (s *spanTracer) calls(key string) []tracerCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []tracerCall
	for _, c := range s.seen {
		if c.Key == key {
			out = append(out, c)
		}
	}
	return out
}

func TestTheTracerMakesTheHandlersTraceContextAcrossMembers(t *testing.T) {
	tracers := []*spanTracer{{}, {}}
	members := systemtest.StartCluster(t, 2, func(i int, cfg *system.Config) {
		cfg.Tracer = tracers[i]
	}, Bank)
	a, b := members[0], members[1]
	for i, s := range members {
		tracers[i].member = s.Addr()
	}
	onB := keyPlacedOn(t, a, b, "bank", "traced-")
	onA := keyPlacedOn(t, a, a, "bank", "traced-target-")

	// Asked from a, handled on b, which asks on to a key on a.
	got, err := actor.Ask(actor.WithTraceContext(ctx(t), traced), Bank.Ref(a, onB), HopTrace{Target: onA})
	if err != nil {
		t.Fatal(err)
	}
	// The reply leaves at Respond; a call ends when its handler returns.
	ended := func(s *spanTracer, key string, n int) func() bool {
		return func() bool {
			c := s.calls(key)
			return len(c) == n && c[n-1].ended
		}
	}
	systemtest.WaitUntil(t, "the hop's call to end", ended(tracers[1], onB, 1))
	systemtest.WaitUntil(t, "the target's call to end", ended(tracers[0], onA, 1))
	hop := tracers[1].calls(onB)
	if len(hop) != 1 || hop[0].Type != "bank" || !hop[0].Ask || hop[0].in != traced || !hop[0].ended || hop[0].endedErr != nil {
		t.Fatalf("the tracer of %s saw %+v: want one ask to bank/%s with %+v, ended with nil", b.Addr(), hop, onB, traced)
	}
	target := tracers[0].calls(onA)
	if len(target) != 1 || target[0].in != hop[0].out || !target[0].ended {
		t.Fatalf("the tracer of %s saw %+v: want the ask on with the first span's trace context %+v", a.Addr(), target, hop[0].out)
	}
	if got != target[0].out {
		t.Fatalf("the next handler saw %+v: want the trace context its tracer gave it, %+v", got, target[0].out)
	}

	// A tell, and a handler's failure: end gets the error.
	id := fmt.Sprintf("tracer-tell-%d", sleeperIDs.Add(1))
	if err := Bank.Ref(a, onB).Tell(actor.WithTraceContext(ctx(t), tracedWithState), NoteTrace{ID: id}); err != nil {
		t.Fatal(err)
	}
	note := systemtest.Recv(t, traceNote(id), "the traced tell's note")
	systemtest.WaitUntil(t, "the tell's call to end", ended(tracers[1], onB, 2))
	tell := tracers[1].calls(onB)[1]
	if tell.Ask || tell.in != tracedWithState || note != tell.out {
		t.Fatalf("tell: the tracer saw %+v, the handler %+v: want a tell with %+v, the handler under the tracer's", tell, note, tracedWithState)
	}
	if _, err := actor.Ask(ctx(t), Bank.Ref(a, onB), Refuse{Kind: "sentinel"}); !errors.Is(err, ErrInsufficientFunds) {
		t.Fatalf("got %v, want ErrInsufficientFunds", err)
	}
	systemtest.WaitUntil(t, "the refusing handler's call to end", ended(tracers[1], onB, 3))
	refused := tracers[1].calls(onB)[2]
	if !refused.in.IsZero() || !refused.out.IsZero() || !errors.Is(refused.endedErr, ErrInsufficientFunds) {
		t.Fatalf("untraced ask: the tracer saw %+v: want no trace context, ended with ErrInsufficientFunds", refused)
	}
	panicking := keyPlacedOn(t, a, b, "bank", "traced-panic-")
	if _, err := actor.Ask(ctx(t), Bank.Ref(a, panicking), Refuse{Kind: "panic"}); !errors.Is(err, actor.ErrActorFailed) {
		t.Fatalf("got %v, want a failure", err)
	}
	systemtest.WaitUntil(t, "the panicking handler's call to end", ended(tracers[1], panicking, 1))
	var pe *actor.PanicError
	if c := tracers[1].calls(panicking); len(c) != 1 || !errors.As(c[0].endedErr, &pe) {
		t.Fatalf("panic: the tracer saw %+v: want it ended with the *PanicError", c)
	}
}

// Tells with and without a trace context, mixed in one stream, arrive in
// order, each with its own: traced ones leave the fast paths (the
// sender's, the batch's continued tells, the receiver's runs of tells,
// the handler's loop) and the others stay on them.
func TestTracedAndUntracedTellsKeepTheirOrderAndTheirOwnTraceContexts(t *testing.T) {
	members := systemtest.StartCluster(t, 2, nil, Bank)
	a := members[0]
	const n = 600
	for _, on := range members {
		key := keyPlacedOn(t, a, on, "bank", "mixed-")
		ref := Bank.Ref(a, key)
		for i := range n {
			c := ctx(t)
			if i%3 == 0 {
				c = actor.WithTraceContext(c, actor.TraceContext{Parent: traced.Parent, State: fmt.Sprintf("n=%d", i)})
			}
			if err := ref.Tell(c, LogTrace{N: i}); err != nil {
				t.Fatal(err)
			}
		}
		log := traceLogOf(key)
		systemtest.WaitUntil(t, "every tell handled on "+on.Addr(), func() bool { return len(log.get()) == n })
		for i, got := range log.get() {
			want := loggedTrace{N: i}
			if i%3 == 0 {
				want.TC = actor.TraceContext{Parent: traced.Parent, State: fmt.Sprintf("n=%d", i)}
			}
			if got != want {
				t.Fatalf("on %s (from %s): tell %d was %+v, want %+v", on.Addr(), a.Addr(), i, got, want)
			}
		}
	}
}
