package actor_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/system"
	"github.com/vmihailenco/msgpack/v5"
)

func TestRefsFromOneSystemCompareEqualByKey(t *testing.T) {
	sys := newSystem(t, system.Config{}, counter)
	a1, a2, b := counter.Ref(sys, "a"), counter.Ref(sys, "a"), counter.Ref(sys, "b")
	if a1 != a2 {
		t.Errorf("two refs of counter/a from one system differ: %#v vs %#v", a1, a2)
	}
	if a1 == b {
		t.Errorf("refs of counter/a and counter/b compare equal")
	}
	other := newSystem(t, system.Config{}, counter)
	if a1 == counter.Ref(other, "a") {
		t.Errorf("refs of counter/a from two systems compare equal; they deliver to different runtimes")
	}
	if a1.ID() != counter.Ref(other, "a").ID() {
		t.Errorf("refs of counter/a from two systems have different IDs")
	}
	set := map[actor.Ref[CounterMsg]]int{a1: 1}
	set[a2]++
	if len(set) != 1 || set[a1] != 2 {
		t.Errorf("refs as map keys: got %v, want one entry counted twice", set)
	}
}

func TestRefPrintsTypeSlashKey(t *testing.T) {
	sys := newSystem(t, system.Config{}, counter)
	ref := counter.Ref(sys, "visits")
	if got := fmt.Sprint(ref); got != "counter/visits" {
		t.Errorf("fmt.Sprint(ref) = %q, want counter/visits", got)
	}
	if got := ref.ID().String(); got != "counter/visits" {
		t.Errorf("ID().String() = %q, want counter/visits", got)
	}
	if got := fmt.Sprintf("%#v", ref); got != `actor.Ref{"counter", "visits"}` {
		t.Errorf("%%#v of ref = %s", got)
	}
	if ref.Key() != "visits" || ref.ID() != (actor.ID{Type: "counter", Key: "visits"}) {
		t.Errorf("Key/ID = %q/%v", ref.Key(), ref.ID())
	}
	var zero actor.Ref[CounterMsg]
	if !zero.IsZero() || ref.IsZero() {
		t.Errorf("IsZero: zero ref %v, bound ref %v", zero.IsZero(), ref.IsZero())
	}
	if got := fmt.Sprint(zero); got != "<nil ref>" {
		t.Errorf("zero ref prints %q, want <nil ref>", got)
	}
}

// Envelope is a message struct that carries refs.
type Envelope struct {
	To      actor.Ref[CounterMsg]
	ReplyTo actor.Ref[CounterMsg]
	Note    string
}

// Roster is a state that holds refs.
type Roster struct {
	Members map[string]actor.Ref[CounterMsg]
	Order   []actor.Ref[CounterMsg]
	Leader  *actor.Ref[CounterMsg]
}

func TestRefRoundTripsThroughMsgpackInsideMessagesAndState(t *testing.T) {
	sys := newSystem(t, system.Config{}, counter)
	a, b := counter.Ref(sys, "a"), counter.Ref(sys, "b/with/slashes")

	raw, err := msgpack.Marshal(Envelope{To: a, ReplyTo: b, Note: "hi"})
	if err != nil {
		t.Fatalf("encode message: %v", err)
	}
	var env Envelope
	if err := msgpack.Unmarshal(raw, &env); err != nil {
		t.Fatalf("decode message: %v", err)
	}
	if env.To.ID() != a.ID() || env.ReplyTo.ID() != b.ID() || env.Note != "hi" {
		t.Errorf("message round trip: got %v %v %q, want %v %v hi", env.To, env.ReplyTo, env.Note, a, b)
	}

	st := Roster{Members: map[string]actor.Ref[CounterMsg]{"a": a, "b": b}, Order: []actor.Ref[CounterMsg]{b, a}, Leader: &a}
	raw, err = msgpack.Marshal(st)
	if err != nil {
		t.Fatalf("encode state: %v", err)
	}
	var got Roster
	if err := msgpack.Unmarshal(raw, &got); err != nil {
		t.Fatalf("decode state: %v", err)
	}
	if got.Members["a"].ID() != a.ID() || got.Members["b"].ID() != b.ID() ||
		len(got.Order) != 2 || got.Order[0].ID() != b.ID() || got.Order[1].ID() != a.ID() ||
		got.Leader == nil || got.Leader.ID() != a.ID() {
		t.Errorf("state round trip: got %+v", got)
	}

	var zero, back actor.Ref[CounterMsg]
	raw, err = msgpack.Marshal(zero)
	if err != nil {
		t.Fatalf("encode zero ref: %v", err)
	}
	if err := msgpack.Unmarshal(raw, &back); err != nil || !back.IsZero() {
		t.Errorf("zero ref round trip: %v, IsZero=%v", err, back.IsZero())
	}
}

// Roster must be an acceptable state type: refs are encodable.
var rosterDef = actor.Define("roster", func(c *actor.Context[Roster, CounterMsg], m CounterMsg) error { return nil })

func TestStateHoldingRefsIsAValidDefinition(t *testing.T) {
	if err := rosterDef.Err(); err != nil {
		t.Fatalf("a state holding refs must be accepted: %v", err)
	}
}

func TestRefIsUsableBeforeActivation(t *testing.T) {
	evs := newEvents()
	sys := newSystem(t, system.Config{Observer: evs.Observe}, counter)
	ref := counter.Ref(sys, "lazy")
	if n := sys.Stats().Active; n != 0 {
		t.Fatalf("taking a ref activated %d actors, want 0", n)
	}
	if c := evs.Count(is(system.ActivationStarted, "lazy")); c != 0 {
		t.Fatalf("taking a ref emitted %d ActivationStarted events", c)
	}
	ctx := ctxT(t)
	if err := ref.Tell(ctx, Add{N: 4}); err != nil {
		t.Fatal(err)
	}
	if n, err := actor.Ask(ctx, ref, Get{}); err != nil || n != 4 {
		t.Fatalf("Ask = %d, %v; want 4", n, err)
	}
	if n := sys.Stats().Active; n != 1 {
		t.Errorf("Stats.Active = %d after the first message, want 1", n)
	}
}

// RouterMsg messages carry refs encoded on the wire.
type RouterMsg interface{ routerMsg() }

// Forward carries an encoded Ref[CounterMsg]; the router adds N to it and
// answers with the counter's new value.
type Forward struct {
	actor.Reply[RouterMsg, int]
	Raw []byte
	N   int
}

func (Forward) routerMsg() {}

var router = actor.Define("router", func(c *actor.Context[struct{}, RouterMsg], m RouterMsg) error {
	f := m.(Forward)
	var to actor.Ref[CounterMsg] // decoded outside any system: unbound
	if err := msgpack.Unmarshal(f.Raw, &to); err != nil {
		return err
	}
	if err := to.Tell(c, Add{N: f.N}); err != nil {
		return err
	}
	n, err := actor.Ask(c, to, Get{})
	if err != nil {
		return err
	}
	return actor.Respond(c, f, n)
})

func TestDecodedRefDeliversThroughTheHandlersContext(t *testing.T) {
	sys := newSystem(t, system.Config{}, counter, router)
	ctx := ctxT(t)
	raw, err := msgpack.Marshal(counter.Ref(sys, "target"))
	if err != nil {
		t.Fatal(err)
	}

	var unbound actor.Ref[CounterMsg]
	if err := msgpack.Unmarshal(raw, &unbound); err != nil {
		t.Fatal(err)
	}
	mustIs(t, unbound.Tell(context.Background(), Add{N: 1}), actor.ErrNilRef)

	n, err := actor.Ask(ctx, router.Ref(sys, "r"), Forward{Raw: raw, N: 7})
	if err != nil || n != 7 {
		t.Fatalf("router answered %d, %v; want 7 from counter/target", n, err)
	}
	if n, err := actor.Ask(ctx, counter.Ref(sys, "target"), Get{}); err != nil || n != 7 {
		t.Fatalf("counter/target = %d, %v; want 7", n, err)
	}

	// A decoded ref to a type the system does not host fails as unknown.
	raw, _ = msgpack.Marshal(actor.Define("elsewhere", counterHandler).Ref(nil, "x"))
	_, err = actor.Ask(ctx, router.Ref(sys, "r"), Forward{Raw: raw, N: 1})
	mustIs(t, err, actor.ErrActorFailed)
	mustIs(t, err, actor.ErrUnknownActor)
}

func TestZeroRefFailsWithErrNilRef(t *testing.T) {
	ctx := ctxT(t)
	var zero actor.Ref[CounterMsg]
	mustIs(t, zero.Tell(ctx, Add{N: 1}), actor.ErrNilRef)
	_, err := actor.Ask(ctx, zero, Get{})
	mustIs(t, err, actor.ErrNilRef)
	// A ref taken without a system has nowhere to deliver either.
	mustIs(t, counter.Ref(nil, "k").Tell(ctx, Add{N: 1}), actor.ErrNilRef)
}

func TestEmptyKeyFailsWithErrInvalidRef(t *testing.T) {
	sys := newSystem(t, system.Config{}, counter)
	ctx := ctxT(t)
	ref := counter.Ref(sys, "")
	mustIs(t, ref.Tell(ctx, Add{N: 1}), actor.ErrInvalidRef)
	_, err := actor.Ask(ctx, ref, Get{})
	mustIs(t, err, actor.ErrInvalidRef)
	if n := sys.Stats().Active; n != 0 {
		t.Errorf("an empty key activated %d actors", n)
	}
}

func TestTypeNotHostedFailsWithErrUnknownActor(t *testing.T) {
	sys := newSystem(t, system.Config{}, counter)
	ctx := ctxT(t)
	stranger := actor.Define("stranger", counterHandler)
	ref := stranger.Ref(sys, "k")
	mustIs(t, ref.Tell(ctx, Add{N: 1}), actor.ErrUnknownActor)
	_, err := actor.Ask(ctx, ref, Get{})
	mustIs(t, err, actor.ErrUnknownActor)
}

func TestRefsOfATypeNotHostedCompareEqualWithinOneSystem(t *testing.T) {
	sys := newSystem(t, system.Config{}, counter)
	other := newSystem(t, system.Config{}, counter)
	stranger := actor.Define("stranger", counterHandler)
	if a1, a2 := stranger.Ref(sys, "a"), stranger.Ref(sys, "a"); a1 != a2 {
		t.Errorf("two refs of stranger/a from one system differ: %#v vs %#v", a1, a2)
	}
	if stranger.Ref(sys, "a") == stranger.Ref(sys, "b") {
		t.Errorf("refs of stranger/a and stranger/b compare equal")
	}
	if stranger.Ref(sys, "a") == stranger.Ref(other, "a") {
		t.Errorf("refs of stranger/a from two systems compare equal")
	}
}

func TestUnboundRefsCompareEqualByTypeAndKey(t *testing.T) {
	a1, a2 := counter.Ref(nil, "ab"), counter.Ref(nil, "ab")
	if a1 != a2 {
		t.Errorf("two unbound refs of counter/ab differ: %#v vs %#v", a1, a2)
	}
	if a1 == counter.Ref(nil, "a") {
		t.Errorf("unbound refs of counter/ab and counter/a compare equal")
	}
	if a1.Key() != "ab" || a1.ID() != (actor.ID{Type: "counter", Key: "ab"}) {
		t.Errorf("unbound ref: Key %q, ID %v; want ab, counter/ab", a1.Key(), a1.ID())
	}
}
