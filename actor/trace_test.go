package actor_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/system"
)

// Trace contexts on the local path: what the handler sees, what its own
// tells, asks and pipes carry, what a Tracer sees and gives.

type TraceMsg interface{ traceMsg() }

// SeeTrace answers the trace context the handler sees.
type SeeTrace struct {
	actor.Reply[TraceMsg, actor.TraceContext]
}

// NoteTrace reports the trace context the handler sees on the test's
// channel; Blocked first waits for the gate.
type NoteTrace struct {
	N       int
	Blocked bool
}

// OnTrace sends on from the handler to the key Target: as Ask
// ("ask"), Tell of NoteTrace ("tell"), Pipe ("pipe") or a timer of
// NoteTrace ("timer"), with the handler's Context or, when Set, with
// WithTraceContext(c, To); it answers what the ask or the pipe saw.
type OnTrace struct {
	actor.Reply[TraceMsg, actor.TraceContext]
	Target, Via string
	Set         bool
	To          actor.TraceContext
}

// FailTrace fails its handler: with an error, or a panic.
type FailTrace struct {
	actor.Reply[TraceMsg, string]
	Panic bool
}

type pipedTrace struct {
	d  actor.Deferred[actor.TraceContext]
	tc actor.TraceContext
	e  error
}

func (SeeTrace) traceMsg()   {}
func (NoteTrace) traceMsg()  {}
func (OnTrace) traceMsg()    {}
func (FailTrace) traceMsg()  {}
func (pipedTrace) traceMsg() {}

var (
	parentA  = actor.TraceContext{Parent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	parentB  = actor.TraceContext{Parent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", State: "congo=t61rcWkgMzE"}
	errTrace = errors.New("trace: failed on purpose")
)

// noted is what a NoteTrace handler saw.
type noted struct {
	N  int
	TC actor.TraceContext
}

// traceDef returns a definition of the messages above that reports
// NoteTrace on notes, counting the messages it handles; gate, if not
// nil, holds the Blocked ones.
func traceDef(notes chan<- noted, handled *atomic.Int64, gate <-chan struct{}) *actor.Def[int, TraceMsg] {
	var def *actor.Def[int, TraceMsg]
	def = actor.Define("traced", func(c *actor.Context[int, TraceMsg], m TraceMsg) error {
		handled.Add(1)
		if got := actor.TraceContextFrom(c); got != c.TraceContext() {
			return fmt.Errorf("TraceContextFrom %+v, Context.TraceContext %+v", got, c.TraceContext())
		}
		switch m := m.(type) {
		case SeeTrace:
			return actor.Respond(c, m, c.TraceContext())
		case NoteTrace:
			if m.Blocked {
				<-gate
			}
			notes <- noted{N: m.N, TC: c.TraceContext()}
		case OnTrace:
			var hc context.Context = c
			if m.Set {
				hc = actor.WithTraceContext(c, m.To)
			}
			ref := def.Ref(c.System(), m.Target)
			switch m.Via {
			case "ask":
				tc, err := actor.Ask(hc, ref, SeeTrace{})
				if err != nil {
					return err
				}
				return actor.Respond(c, m, tc)
			case "tell":
				return ref.Tell(hc, NoteTrace{})
			case "derived":
				dc, cancel := context.WithCancel(hc)
				defer cancel()
				return ref.Tell(dc, NoteTrace{})
			case "pipe":
				d := actor.Defer(c, m)
				actor.Pipe(c, ref, SeeTrace{}, func(tc actor.TraceContext, err error) TraceMsg {
					return pipedTrace{d: d, tc: tc, e: err}
				})
			case "timer":
				c.After("note", 0, NoteTrace{})
			}
		case pipedTrace:
			switch {
			case m.e != nil:
				m.d.Fail(m.e)
			case c.TraceContext() != m.tc:
				// The answer comes back under the pipe's trace context.
				m.d.Fail(fmt.Errorf("the piped answer carries %+v, the pipe carried %+v", c.TraceContext(), m.tc))
			default:
				m.d.Resolve(m.tc)
			}
		case FailTrace:
			if m.Panic {
				panic("trace: torn")
			}
			return errTrace
		}
		return nil
	}).WithMessages(SeeTrace{}, NoteTrace{}, OnTrace{}, FailTrace{})
	return def
}

func newTraceSystem(t *testing.T, tracer actor.Tracer, gate <-chan struct{}) (*actor.Def[int, TraceMsg], actor.System, chan noted, *atomic.Int64) {
	t.Helper()
	notes := make(chan noted, 256)
	handled := new(atomic.Int64)
	def := traceDef(notes, handled, gate)
	return def, newSystem(t, system.Config{Tracer: tracer}, def), notes, handled
}

func TestTheHandlerSeesTheTraceContextOfItsMessage(t *testing.T) {
	def, sys, notes, _ := newTraceSystem(t, nil, nil)
	ref := def.Ref(sys, "a")
	for _, tc := range []actor.TraceContext{parentA, parentB} {
		if got, err := actor.Ask(actor.WithTraceContext(ctxT(t), tc), ref, SeeTrace{}); err != nil || got != tc {
			t.Fatalf("ask: got %+v, %v: want %+v", got, err, tc)
		}
		if err := ref.Tell(actor.WithTraceContext(ctxT(t), tc), NoteTrace{}); err != nil {
			t.Fatal(err)
		}
		if got := recv(t, notes, "the traced tell"); got.TC != tc {
			t.Fatalf("tell: the handler saw %+v, want %+v", got.TC, tc)
		}
	}
	if got, err := actor.Ask(ctxT(t), ref, SeeTrace{}); err != nil || !got.IsZero() {
		t.Fatalf("an ask without one: got %+v, %v: want none", got, err)
	}
	// The zero TraceContext attached takes the one before away.
	cleared := actor.WithTraceContext(actor.WithTraceContext(ctxT(t), parentA), actor.TraceContext{})
	if got, err := actor.Ask(cleared, ref, SeeTrace{}); err != nil || !got.IsZero() {
		t.Fatalf("cleared: got %+v, %v: want none", got, err)
	}
}

// Tells that arrive in one batch while the actor is busy are handled by
// the handler loop's short path, which traced tells leave: each handler
// still sees its own message's trace context, in order.
func TestTellsOfOneBatchEachCarryTheirOwnTraceContext(t *testing.T) {
	gate := make(chan struct{})
	def, sys, notes, _ := newTraceSystem(t, nil, gate)
	ref := def.Ref(sys, "batch")
	if err := ref.Tell(ctxT(t), NoteTrace{N: -1, Blocked: true}); err != nil {
		t.Fatal(err)
	}
	want := make([]noted, 200)
	for i := range want {
		c := ctxT(t)
		want[i].N = i
		switch i % 4 {
		case 1:
			want[i].TC = parentA
		case 2:
			want[i].TC = parentB
		}
		if !want[i].TC.IsZero() {
			c = actor.WithTraceContext(c, want[i].TC)
		}
		if err := ref.Tell(c, NoteTrace{N: i}); err != nil {
			t.Fatal(err)
		}
	}
	close(gate)
	recv(t, notes, "the blocked tell")
	for i := range want {
		if got := recv(t, notes, "a batched tell"); got != want[i] {
			t.Fatalf("tell %d: handled %+v, want %+v", i, got, want[i])
		}
	}
}

func TestAHandlersSendsCarryItsTraceContextOn(t *testing.T) {
	def, sys, notes, _ := newTraceSystem(t, nil, nil)
	ref := def.Ref(sys, "from")
	traced := actor.WithTraceContext(ctxT(t), parentA)
	for _, via := range []string{"ask", "pipe"} {
		if got, err := actor.Ask(traced, ref, OnTrace{Target: "to-" + via, Via: via}); err != nil || got != parentA {
			t.Fatalf("%s: the next handler saw %+v, %v: want %+v", via, got, err, parentA)
		}
		if got, err := actor.Ask(ctxT(t), ref, OnTrace{Target: "to-" + via, Via: via}); err != nil || !got.IsZero() {
			t.Fatalf("%s from an untraced message: the next handler saw %+v, %v: want none", via, got, err)
		}
		if via == "pipe" {
			continue // Pipe takes the handler's Context, which nothing is attached to
		}
		if got, err := actor.Ask(traced, ref, OnTrace{Target: "to-" + via, Via: via, Set: true, To: parentB}); err != nil || got != parentB {
			t.Fatalf("%s with another attached: the next handler saw %+v, %v: want %+v", via, got, err, parentB)
		}
		if got, err := actor.Ask(traced, ref, OnTrace{Target: "to-" + via, Via: via, Set: true}); err != nil || !got.IsZero() {
			t.Fatalf("%s with the zero one attached: the next handler saw %+v, %v: want none", via, got, err)
		}
	}
	for _, via := range []string{"tell", "derived"} {
		if _, err := actor.Ask(traced, ref, OnTrace{Target: "to-" + via, Via: via}); !errors.Is(err, actor.ErrNoReply) {
			t.Fatalf("%s: %v, want ErrNoReply", via, err)
		}
		if got := recv(t, notes, "the tell on"); got.TC != parentA {
			t.Fatalf("%s: the next handler saw %+v, want %+v", via, got.TC, parentA)
		}
	}
	// A tell's handler carries the tell's on too.
	if err := ref.Tell(actor.WithTraceContext(ctxT(t), parentB), OnTrace{Target: "to-tell", Via: "tell"}); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, notes, "the tell of a tell"); got.TC != parentB {
		t.Fatalf("the next handler saw %+v, want %+v", got.TC, parentB)
	}
	// A timer's message is a new one: it carries none.
	if _, err := actor.Ask(traced, ref, OnTrace{Via: "timer"}); !errors.Is(err, actor.ErrNoReply) {
		t.Fatalf("timer: %v, want ErrNoReply", err)
	}
	if got := recv(t, notes, "the timer's message"); !got.TC.IsZero() {
		t.Fatalf("the timer's message carried %+v, want none", got.TC)
	}
}

func TestAnInvalidTraceContextFailsTheMessageUnsent(t *testing.T) {
	def, sys, _, handled := newTraceSystem(t, nil, nil)
	ref := def.Ref(sys, "a")
	for _, tc := range []actor.TraceContext{
		{Parent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331"},
		{Parent: "00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01"},
		{Parent: "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		{Parent: parentA.Parent, State: "Bad Key=1"},
		{State: "rojo=1"},
	} {
		if err := tc.Validate(); !errors.Is(err, actor.ErrInvalidTraceContext) {
			t.Errorf("%+v: Validate gave %v, want ErrInvalidTraceContext", tc, err)
		}
		c := actor.WithTraceContext(ctxT(t), tc)
		if _, err := actor.Ask(c, ref, SeeTrace{}); !errors.Is(err, actor.ErrInvalidTraceContext) {
			t.Errorf("%+v: ask gave %v, want ErrInvalidTraceContext", tc, err)
		}
		if err := ref.Tell(c, NoteTrace{}); !errors.Is(err, actor.ErrInvalidTraceContext) {
			t.Errorf("%+v: tell gave %v, want ErrInvalidTraceContext", tc, err)
		}
	}
	if n := handled.Load(); n != 0 {
		t.Fatalf("%d messages with invalid trace contexts were handled, want none", n)
	}
	for _, tc := range []actor.TraceContext{{}, parentA, parentB} {
		if err := tc.Validate(); err != nil {
			t.Errorf("%+v: Validate gave %v, want nil", tc, err)
		}
	}
}

// recordingTracer gives each handler the trace id of its message with a
// parent id of its own, and records its calls.
type recordingTracer struct {
	mu    sync.Mutex
	calls []tracerCall
	give  func(in actor.TraceContext, n int) actor.TraceContext
}

type tracerCall struct {
	m      actor.Handling
	in     actor.TraceContext
	ended  bool
	endErr error
}

func (r *recordingTracer) Handle(ctx context.Context, m actor.Handling) (actor.TraceContext, func(error)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := len(r.calls)
	r.calls = append(r.calls, tracerCall{m: m, in: actor.TraceContextFrom(ctx)})
	return r.give(actor.TraceContextFrom(ctx), i), func(err error) {
		r.mu.Lock()
		r.calls[i].ended, r.calls[i].endErr = true, err
		r.mu.Unlock()
	}
}

func (r *recordingTracer) of(key string) []tracerCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []tracerCall
	for _, c := range r.calls {
		if c.m.Key == key {
			out = append(out, c)
		}
	}
	return out
}

// span is the trace context a recordingTracer gives its n-th handler.
func span(in actor.TraceContext, n int) actor.TraceContext {
	if in.IsZero() {
		return actor.TraceContext{}
	}
	return actor.TraceContext{Parent: fmt.Sprintf("%s%016x-01", in.Parent[:36], 0xf00+n), State: in.State}
}

func TestTheTracerIsCalledAroundEachHandlerAndGivesItsTraceContext(t *testing.T) {
	rt := &recordingTracer{give: span}
	def, sys, notes, _ := newTraceSystem(t, rt, nil)
	traced := actor.WithTraceContext(ctxT(t), parentA)
	got, err := actor.Ask(traced, def.Ref(sys, "from"), OnTrace{Target: "to", Via: "ask"})
	if err != nil {
		t.Fatal(err)
	}
	// The reply leaves at Respond; the call ends when the handler returns.
	waitUntil(t, "the first handler's call to end", func() bool { c := rt.of("from"); return len(c) == 1 && c[0].ended })
	from, to := rt.of("from"), rt.of("to")
	if len(from) != 1 || from[0].m != (actor.Handling{Type: "traced", Key: "from", Ask: true}) || from[0].in != parentA || !from[0].ended || from[0].endErr != nil {
		t.Fatalf("the first handler's call: %+v, want one ask to traced/from with %+v, ended with nil", from, parentA)
	}
	if len(to) != 1 || to[0].in != span(parentA, 0) || got != span(parentA, 1) {
		t.Fatalf("the next: the tracer saw %+v and the handler %+v: want the first span's context in, the second span's seen", to, got)
	}
	// A tell, handled on the fast path without a tracer, is called too.
	if err := def.Ref(sys, "note").Tell(ctxT(t), NoteTrace{}); err != nil {
		t.Fatal(err)
	}
	recv(t, notes, "the tell")
	waitUntil(t, "the tell's call to end", func() bool { c := rt.of("note"); return len(c) == 1 && c[0].ended })
	if c := rt.of("note")[0]; c.m.Ask || !c.in.IsZero() {
		t.Fatalf("tell: the tracer saw %+v, want a tell without a trace context", c)
	}
	// Failures end the call with the handler's error, a panic's included.
	if _, err := actor.Ask(ctxT(t), def.Ref(sys, "fails"), FailTrace{}); !errors.Is(err, actor.ErrActorFailed) {
		t.Fatalf("got %v, want a failure", err)
	}
	waitUntil(t, "the failing handler's call to end", func() bool { c := rt.of("fails"); return len(c) == 1 && c[0].ended })
	if c := rt.of("fails"); len(c) != 1 || !errors.Is(c[0].endErr, errTrace) {
		t.Fatalf("error: the tracer saw %+v, want it ended with the handler's error", c)
	}
	if _, err := actor.Ask(ctxT(t), def.Ref(sys, "panics"), FailTrace{Panic: true}); !errors.Is(err, actor.ErrActorFailed) {
		t.Fatalf("got %v, want a failure", err)
	}
	waitUntil(t, "the panicking handler's call to end", func() bool { c := rt.of("panics"); return len(c) == 1 && c[0].ended })
	var pe *actor.PanicError
	if c := rt.of("panics"); len(c) != 1 || !errors.As(c[0].endErr, &pe) {
		t.Fatalf("panic: the tracer saw %+v, want it ended with the *PanicError", c)
	}
}

func TestATracersInvalidTraceContextIsIgnored(t *testing.T) {
	rt := &recordingTracer{give: func(actor.TraceContext, int) actor.TraceContext {
		return actor.TraceContext{Parent: "not a traceparent"}
	}}
	def, sys, _, _ := newTraceSystem(t, rt, nil)
	if got, err := actor.Ask(actor.WithTraceContext(ctxT(t), parentB), def.Ref(sys, "a"), SeeTrace{}); err != nil || got != parentB {
		t.Fatalf("got %+v, %v: want the message's own, %+v", got, err, parentB)
	}
}
