package replica

import (
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/troupe-go/troupe/internal/lincheck"
	"github.com/troupe-go/troupe/replication"
	"github.com/troupe-go/troupe/ring"
	"pgregory.net/rapid"
)

// TestRaisingFloorsIsAPointwiseMaximum checks floors against a naive
// model: after raises, a token's floor is the largest term of the raises
// whose range holds it, naming the departures of all of them in the order
// they were last named, and the spans stay sorted, disjoint and merged.
func TestRaisingFloorsIsAPointwiseMaximum(t *testing.T) {
	edges := []ring.Token{0, 1, 100, 200, math.MaxUint64 - 1, math.MaxUint64}
	token := rapid.Custom(func(t *rapid.T) ring.Token {
		if rapid.Bool().Draw(t, "edge") {
			return rapid.SampledFrom(edges).Draw(t, "e")
		}
		return ring.Token(rapid.Uint64Range(0, 300).Draw(t, "t"))
	})
	rapid.Check(t, func(t *rapid.T) {
		type raise struct {
			g        ring.Range
			e        Epoch
			departed []ring.NodeID
		}
		var raises []raise
		var fs floors
		probes := slices.Clone(edges)
		for range rapid.IntRange(0, 6).Draw(t, "raises") {
			e := Epoch{Term: rapid.Uint64Range(0, 5).Draw(t, "term")}
			if rapid.Bool().Draw(t, "fenced") {
				e.Node = rapid.SampledFrom([]ring.NodeID{nodeA, nodeX}).Draw(t, "fencer")
			}
			var departed []ring.NodeID
			for _, id := range []ring.NodeID{nodeA, nodeB, nodeC} {
				if rapid.IntRange(0, 3).Draw(t, "departed") == 0 {
					departed = append(departed, id)
				}
			}
			r := raise{ring.Range{Start: token.Draw(t, "start"), End: token.Draw(t, "end")}, e, departed}
			raises = append(raises, r)
			fs, _ = fs.raise(r.g, r.e, nil, r.departed)
			probes = append(probes, r.g.Start, r.g.End, r.g.Start+1, r.g.End+1)
		}
		probes = append(probes, token.Draw(t, "probe"))
		for _, p := range probes {
			var want Epoch
			var wantGone, wantCopiers []ring.NodeID
			for _, r := range raises {
				if !r.g.Contains(p) || r.e.IsZero() {
					continue
				}
				if r.e.Compare(want) > 0 {
					want = r.e
				}
				if !slices.Contains(wantCopiers, r.e.Node) {
					wantCopiers = append(wantCopiers, r.e.Node)
				}
				wantGone = slices.DeleteFunc(wantGone, func(d ring.NodeID) bool { return slices.Contains(r.departed, d) })
				wantGone = append(wantGone, r.departed...)
			}
			if got := fs.find(p); got.epoch != want || !slices.Equal(got.departed, wantGone) {
				t.Fatalf("token %d: floor %v naming %v after %v, want %v naming %v (floors %v)", p, got.epoch, got.departed, raises, want, wantGone, fs)
			}
			// Every copier named, the top one apart (in any order).
			wantCopiers = slices.DeleteFunc(wantCopiers, func(x ring.NodeID) bool { return x == want.Node })
			got := slices.SortedFunc(slices.Values(fs.find(p).copiers), ring.NodeID.Compare)
			if !slices.Equal(got, slices.SortedFunc(slices.Values(wantCopiers), ring.NodeID.Compare)) {
				t.Fatalf("token %d: floor %v names earlier copiers %v after %v, want %v", p, want, got, raises, wantCopiers)
			}
		}
		for i, f := range fs {
			if f.lo > f.hi || f.epoch.IsZero() {
				t.Fatalf("span %d is %+v: empty or of the zero epoch (floors %v)", i, f, fs)
			}
			if i > 0 && (fs[i-1].hi >= f.lo || (fs[i-1].hi+1 == f.lo && fs[i-1].same(f))) {
				t.Fatalf("spans %d and %d overlap, are out of order or unmerged: %v", i-1, i, fs)
			}
		}
		var again floors
		for _, f := range fs.list() {
			again, _ = again.raise(f.Range, f.Epoch, f.Copiers, f.Departed)
		}
		if !slices.EqualFunc(again, fs, func(a, b floorSpan) bool {
			return a.span == b.span && a.same(b)
		}) {
			t.Fatalf("floors %v listed and raised again give %v", fs, again)
		}
	})
}

func TestRaisingAFloorReportsAChangeOnlyWhenATokenRose(t *testing.T) {
	g := ring.Range{Start: 10, End: 20}
	fs, changed := floors(nil).raise(g, Epoch{Term: 3, Node: nodeX}, nil, nil)
	if !changed {
		t.Fatal("raising an empty set reported no change")
	}
	if _, changed := fs.raise(g, Epoch{Term: 3, Node: nodeX}, nil, nil); changed {
		t.Fatal("raising to the same epoch reported a change")
	}
	if _, changed := fs.raise(ring.Range{Start: 12, End: 15}, Epoch{Term: 2, Node: nodeX}, nil, nil); changed {
		t.Fatal("raising part of the range to an older epoch reported a change")
	}
	if _, changed := fs.raise(ring.Range{Start: 12, End: 25}, Epoch{Term: 2, Node: nodeX}, nil, nil); !changed {
		t.Fatal("raising past the range reported no change")
	}
	named, changed := fs.raise(ring.Range{Start: 12, End: 15}, Epoch{Term: 2, Node: nodeX}, nil, []ring.NodeID{nodeC})
	if !changed {
		t.Fatal("naming a departure over part of the range reported no change")
	}
	if got := named.find(13); got.epoch != (Epoch{Term: 3, Node: nodeX}) || !slices.Equal(got.departed, []ring.NodeID{nodeC}) {
		t.Fatalf("an older fence naming a departure left %v naming %v, want the newer epoch naming it", got.epoch, got.departed)
	}
	if _, changed := named.raise(ring.Range{Start: 12, End: 15}, Epoch{Term: 3, Node: nodeX}, nil, []ring.NodeID{nodeC}); changed {
		t.Fatal("naming a departure named already reported a change")
	}
}

var (
	nodeA = ring.NodeID{Addr: "a", Incarnation: 1}
	nodeB = ring.NodeID{Addr: "b", Incarnation: 1}
	nodeC = ring.NodeID{Addr: "c", Incarnation: 1}
	nodeX = ring.NodeID{Addr: "x", Incarnation: 1}
)

// keyRange returns a range holding k's token and no other.
func keyRange(k Key) ring.Range {
	t := k.Token()
	return ring.Range{Start: t - 1, End: t}
}

// messagesOf returns r's messages of type typ.
func messagesOf(r Ready, typ MsgType) []Message {
	var out []Message
	for _, m := range r.Messages {
		if m.Type == typ {
			out = append(out, m)
		}
	}
	return out
}

// A fence answers the highest term the replica promised for a key of the
// range before the fence, then raises the floor, which it asks the
// driver to persist with the answer.
func TestAFenceAnswersThePromisedTermBeforeRaisingTheFloor(t *testing.T) {
	b := New(nodeB, Counting)
	b.Step(Message{Type: MsgPrepare, From: nodeA, To: nodeB, Key: keyA, Epoch: Epoch{Term: 4, Node: nodeA}})
	b.Ready()
	b.Step(Message{Type: MsgFence, From: nodeX, To: nodeB, Range: keyRange(keyA), Round: 9, Epoch: Epoch{Term: 2}})
	rd := b.Ready()
	fenced := messagesOf(rd, MsgFenced)
	if len(fenced) != 1 {
		t.Fatalf("a fence was answered with %v, want one fenced", rd.Messages)
	}
	if m := fenced[0]; m.To != nodeX || m.Round != 9 || m.Epoch.Term != 2 || m.Promised.Term != 4 || !m.Counted {
		t.Fatalf("the fence's answer is %+v, want round 9, term 2, promised 4, counted, to x", m)
	}
	want := []Floor{{Range: keyRange(keyA), Epoch: Epoch{Term: 2, Node: nodeX}}}
	if !reflect.DeepEqual(rd.Floors, want) {
		t.Fatalf("Ready.Floors = %v, want %v", rd.Floors, want)
	}
	b.Step(Message{Type: MsgFence, From: nodeX, To: nodeB, Range: keyRange(keyA), Round: 10, Epoch: Epoch{Term: 5}})
	if m := messagesOf(b.Ready(), MsgFenced); len(m) != 1 || m[0].Promised.Term != 4 {
		t.Fatalf("a second fence at 5 was answered %v, want promised 4: the floor is not a promise of a key", m)
	}
}

// A message of an epoch below the floor of its key's range is refused
// naming the floor (its term and copier), so the owner steps down or
// acquires again above it; a key outside the range is not affected.
func TestAMessageBelowTheFloorIsRefused(t *testing.T) {
	b := New(nodeB, Counting)
	b.Step(Message{Type: MsgFence, From: nodeX, To: nodeB, Range: keyRange(keyA), Round: 1, Epoch: Epoch{Term: 5}})
	b.Ready()
	old := Epoch{Term: 4, Node: nodeA}
	b.Step(Message{Type: MsgAccept, From: nodeA, To: nodeB, Key: keyA, Epoch: old, Records: []Record{{Kind: KindState, Epoch: old, Version: 1, Value: []byte("v")}}})
	rd := b.Ready()
	refused := messagesOf(rd, MsgRefuse)
	if len(refused) != 1 || refused[0].Promised != (Epoch{Term: 5, Node: nodeX}) || !refused[0].Floor {
		t.Fatalf("an accept below the floor was answered %v, want a refusal naming the floor 5 of x", rd.Messages)
	}
	if _, ok := b.Stored(keyA, stateSlot); ok || len(rd.Persist) != 0 {
		t.Fatal("an accept below the floor was stored")
	}
	other := Key{Type: "counter", ID: "elsewhere"}
	if keyRange(keyA).Contains(other.Token()) {
		t.Fatal("test keys share a token")
	}
	b.Step(Message{Type: MsgPrepare, From: nodeA, To: nodeB, Key: other, Epoch: old})
	if m := messagesOf(b.Ready(), MsgPromise); len(m) != 1 {
		t.Fatal("a key outside the fenced range was refused")
	}
	// The floor bounds terms: an owner at its term, whatever its node,
	// picked its term knowing it.
	shows := []ring.NodeID{nodeA, nodeB, nodeX}
	at := Epoch{Term: 5, Node: nodeA}
	b.Step(Message{Type: MsgPrepare, From: nodeA, To: nodeB, Key: keyA, Epoch: at, Reads: shows})
	if m := messagesOf(b.Ready(), MsgPromise); len(m) != 1 {
		t.Fatal("an owner at the floor's term was refused")
	}
	b.Step(Message{Type: MsgPrepare, From: nodeA, To: nodeB, Key: keyA, Epoch: Epoch{Term: 7, Node: nodeA}, Reads: shows})
	b.Step(Message{Type: MsgPrepare, From: nodeC, To: nodeB, Key: keyA, Epoch: Epoch{Term: 6, Node: nodeC}, Reads: shows})
	if m := messagesOf(b.Ready(), MsgRefuse); len(m) != 1 || m[0].Floor {
		t.Fatalf("a promise above the floor was answered %v, want a refusal naming the promise, not the floor", m)
	}
}

// A prepare passes a floor, whatever its term, only if it lists the
// floor's copier: its owner's view shows the change the copier fenced the
// range for. One on a view that lags the change is refused naming the
// floor, so that it cannot acquire above the floor over the previous set.
func TestAPrepareThatDoesNotListTheFloorsCopierIsRefused(t *testing.T) {
	b := New(nodeB, Counting)
	b.Step(Message{Type: MsgFence, From: nodeX, To: nodeB, Range: keyRange(keyA), Round: 1, Epoch: Epoch{Term: 5}})
	b.Ready()
	above := Epoch{Term: 9, Node: nodeA}
	b.Step(Message{Type: MsgPrepare, From: nodeA, To: nodeB, Key: keyA, Epoch: above, Reads: []ring.NodeID{nodeA, nodeB, nodeC}})
	rd := b.Ready()
	refused := messagesOf(rd, MsgRefuse)
	if len(refused) != 1 || !refused[0].Floor || refused[0].Promised != (Epoch{Term: 5, Node: nodeX}) {
		t.Fatalf("a prepare above the floor that does not list its copier was answered %v, want a refusal naming the floor", rd.Messages)
	}
	if len(rd.Persist) != 0 {
		t.Fatalf("the refused prepare persisted %v", rd.Persist)
	}
	b.Step(Message{Type: MsgPrepare, From: nodeA, To: nodeB, Key: keyA, Epoch: above, Reads: []ring.NodeID{nodeA, nodeB, nodeX}})
	if m := messagesOf(b.Ready(), MsgPromise); len(m) != 1 {
		t.Fatal("a prepare above the floor that lists its copier was not promised")
	}
	// Accepts and checks at a promised epoch are not prepares: the
	// promise was given to a prepare that listed the copier.
	b.Step(Message{Type: MsgAccept, From: nodeA, To: nodeB, Key: keyA, Epoch: above, Records: []Record{{Kind: KindState, Epoch: above, Version: 1, Value: []byte("v")}}})
	if m := messagesOf(b.Ready(), MsgAccepted); len(m) != 1 {
		t.Fatal("an accept at the promised epoch was not accepted")
	}
}

// A served owner refused by a floor whose copier is in its replica set
// (its view shows the change) acquires again above it without failing
// what waits on it: its write is done once the new epoch's write-back met
// the level, and the next owner reads it. An owner whose own replica
// holds the floor picks a term above it at once if its caller names the
// floor's copier, and steps down at once if not.
func TestAnOwnerFencedByAFloorAcquiresAboveItAndKeepsItsWrite(t *testing.T) {
	s := newSim(t, 3, replication.Majority, []Key{keyA})
	serve(t, s, 0)
	owner := s.nodes[0]
	term := owner.core.owned[keyA].epoch.Term
	copier := s.nodes[2].id
	for _, n := range s.nodes[1:] {
		n.core.Step(Message{Type: MsgFence, From: copier, To: n.id, Range: keyRange(keyA), Round: 1, Epoch: Epoch{Term: term + 3}})
		s.apply(n)
	}
	s.net = slices.DeleteFunc(s.net, func(m Message) bool { return m.Type == MsgFenced })
	tk := write(t, s, 0, 1)
	s.flush()
	if !released(s, 0, tk) || !owner.core.Serving(keyA) {
		t.Fatalf("after a floor refused its write the owner serves %v and the write is released %v; want both", owner.core.Serving(keyA), released(s, 0, tk))
	}
	if got := owner.core.owned[keyA].epoch.Term; got <= term+3 {
		t.Fatalf("the owner acquired again at term %d, want above the floor %d", got, term+3)
	}
	owner.core.Resign(keyA)
	s.apply(owner)
	serve(t, s, 1)
	if got := decodeValue(s.nodes[1].core.Current(keyA, stateSlot)); got != 1 {
		t.Fatalf("the next owner reads %d, want the write of the fenced owner, 1", got)
	}
	c := New(nodeB, Counting)
	c.RestoreFloors(Floor{Range: keyRange(keyA), Epoch: Epoch{Term: 7, Node: nodeX}})
	// Its caller's view shows x: the acquisition names it.
	if err := c.AcquireWith(keyA, []ring.NodeID{nodeB}, replication.Majority, AcquireOptions{Copiers: []ring.NodeID{nodeX}}); err != nil {
		t.Fatal(err)
	}
	if o := c.owned[keyA]; o == nil || o.epoch.Term != 8 {
		t.Fatalf("an owner whose replica holds floor 7 of a copier its caller named acquired %v, want it at term 8", o)
	}
	// Not named, the copier's floor refuses the acquisition whatever
	// its term.
	c.Resign(keyA)
	c.Ready()
	if err := c.Acquire(keyA, []ring.NodeID{nodeB}, replication.Majority); err != nil {
		t.Fatal(err)
	}
	if rd := c.Ready(); c.Serving(keyA) || len(rd.Changes) != 1 || !rd.Changes[0].Floor || rd.Changes[0].Epoch != (Epoch{Term: 7, Node: nodeX}) {
		t.Fatalf("an acquisition that did not name the copier of its own replica's floor serves %v and reported %v, want it stepped down naming the floor", c.Serving(keyA), rd.Changes)
	}
}

// fenceAll has node 2, a copier in keyA's set, fence every replica at
// term, its answers dropped.
func fenceAll(s *sim, term uint64) {
	for _, n := range s.nodes {
		n.core.Step(Message{Type: MsgFence, From: s.nodes[2].id, To: n.id, Range: keyRange(keyA), Round: 1, Epoch: Epoch{Term: term}})
		s.apply(n)
	}
	s.net = slices.DeleteFunc(s.net, func(m Message) bool { return m.Type == MsgFenced })
}

// servedWithOneWrite has node 0 serve keyA with a write of 1 acknowledged.
func servedWithOneWrite(t *testing.T) (*sim, *simNode) {
	t.Helper()
	s := newSim(t, 3, replication.Majority, []Key{keyA})
	serve(t, s, 0)
	first := write(t, s, 0, 1)
	s.flush()
	if !released(s, 0, first) {
		t.Fatal("the first write was not acknowledged")
	}
	return s, s.nodes[0]
}

// keptTheWriteOf2 checks, once every message was delivered, that owner
// still serves keyA and its write of 2, tk, was done, not failed, and
// that the next owner reads 2.
func keptTheWriteOf2(t *testing.T, s *sim, owner *simNode, tk Ticket) {
	t.Helper()
	s.flush()
	if !owner.core.Serving(keyA) || !released(s, 0, tk) {
		t.Fatalf("fenced with a write in flight, the owner serves %v and the write is settled %v: want both", owner.core.Serving(keyA), released(s, 0, tk))
	}
	for _, op := range s.history {
		if in := op.Input.(regInput); in.Op == lincheck.Write && in.New == 2 && op.Output.(regOutput).Unknown {
			t.Fatal("the write in flight failed; want it done at the new epoch")
		}
	}
	owner.core.Resign(keyA)
	s.apply(owner)
	serve(t, s, 1)
	if got := decodeValue(s.nodes[1].core.Current(keyA, stateSlot)); got != 2 {
		t.Fatalf("the next owner reads %d, want the write that was in flight, 2", got)
	}
}

// A floor raised on every replica, the owner's own included, refuses the
// owner's write in flight everywhere, so its new acquisition adopts the
// value committed before it, not the one the owner set aside. That value
// is the owner's own, of the refused epoch: no other owner served, and
// the owner keeps serving with its write done at the new epoch.
func TestAnOwnerFencedOnEveryReplicaKeepsItsWriteInFlight(t *testing.T) {
	s, owner := servedWithOneWrite(t)
	fenceAll(s, owner.core.owned[keyA].epoch.Term+1)
	keptTheWriteOf2(t, s, owner, write(t, s, 0, 2))
}

// A second floor while the first refresh writes back: the quorum holds
// the records of the epoch before it, the owner's own, so it acquires
// again and keeps its write in flight.
func TestAnOwnerFencedTwiceKeepsItsWriteInFlight(t *testing.T) {
	s, owner := servedWithOneWrite(t)
	term := owner.core.owned[keyA].epoch.Term
	fenceAll(s, term+1)
	tk := write(t, s, 0, 2)
	// Deliver until the owner writes back at its new epoch, not further.
	for o := owner.core.owned[keyA]; o != nil && !(o.phase == writingBack && o.epoch.Term > term+1); o = owner.core.owned[keyA] {
		if len(s.net) == 0 {
			t.Fatal("the owner never acquired again above the first floor")
		}
		s.deliver(0, false)
	}
	if owner.core.owned[keyA] == nil {
		t.Fatal("the owner stepped down at the first floor")
	}
	fenceAll(s, owner.core.owned[keyA].epoch.Term+1)
	keptTheWriteOf2(t, s, owner, tk)
}

// A served owner refused by a floor whose new acquisition finds another
// owner's write fails what waited and steps down.
func TestAnOwnerFencedByAFloorStepsDownWhenAnotherOwnerWrote(t *testing.T) {
	s := newSim(t, 3, replication.Majority, []Key{keyA})
	serve(t, s, 0)
	owner := s.nodes[0]
	owner.paused = true
	serve(t, s, 1)
	write(t, s, 1, 5)
	s.flush()
	// Above the other owner's term: refusals name the floor, not it.
	floor := s.nodes[1].core.owned[keyA].epoch.Term + 1
	s.nodes[1].core.Resign(keyA)
	s.apply(s.nodes[1])
	tk := write(t, s, 0, 1)
	for _, n := range s.nodes {
		n.core.Step(Message{Type: MsgFence, From: s.nodes[2].id, To: n.id, Range: keyRange(keyA), Round: 1, Epoch: Epoch{Term: floor}})
		s.apply(n)
	}
	s.net = slices.DeleteFunc(s.net, func(m Message) bool { return m.Type == MsgFenced })
	owner.paused = false
	s.flush()
	if owner.core.Serving(keyA) || !released(s, 0, tk) {
		t.Fatalf("the owner serves %v (want false) and its write is settled %v (want failed)", owner.core.Serving(keyA), released(s, 0, tk))
	}
}

// An owner refused by a floor whose copier is not in its replica set may
// be on a view of membership that lags the hand-off: it steps down, and
// what waited fails, however its next acquisition would fare.
func TestAnOwnerFencedByACopierOutsideItsSetStepsDown(t *testing.T) {
	s := newSim(t, 3, replication.Majority, []Key{keyA})
	serve(t, s, 0)
	owner := s.nodes[0]
	term := owner.core.owned[keyA].epoch.Term
	for _, n := range s.nodes[1:] {
		n.core.Step(Message{Type: MsgFence, From: nodeX, To: n.id, Range: keyRange(keyA), Round: 1, Epoch: Epoch{Term: term + 1}})
		s.apply(n)
	}
	s.net = slices.DeleteFunc(s.net, func(m Message) bool { return m.Type == MsgFenced })
	tk := write(t, s, 0, 1)
	s.flush()
	if owner.core.Serving(keyA) || owner.core.owned[keyA] != nil || !released(s, 0, tk) {
		t.Fatalf("the owner serves %v, holds %v, its write settled %v: want stepped down, the write failed", owner.core.Serving(keyA), owner.core.owned[keyA] != nil, released(s, 0, tk))
	}
}

// A replica still receiving part of the range raises nothing and answers
// that it does not count.
func TestAFenceAtAReceivingReplicaIsNotCounted(t *testing.T) {
	b := New(nodeB, Counting)
	b.AddReceiving(ring.Range{Start: keyA.Token() - 10, End: keyA.Token() + 10})
	b.Step(Message{Type: MsgFence, From: nodeX, To: nodeB, Range: keyRange(keyA), Round: 1, Epoch: Epoch{Term: 5}})
	rd := b.Ready()
	if m := messagesOf(rd, MsgFenced); len(m) != 1 || m[0].Counted {
		t.Fatalf("a receiving replica answered a fence %v, want not counted", rd.Messages)
	}
	if rd.Floors != nil || len(b.Floors()) != 0 {
		t.Fatalf("a receiving replica raised its floors to %v", b.Floors())
	}
}

// Floors survive a restart: the driver restores what Ready.Floors listed.
func TestFloorsAreRestored(t *testing.T) {
	b := New(nodeB, Counting)
	b.Step(Message{Type: MsgFence, From: nodeX, To: nodeB, Range: keyRange(keyA), Round: 1, Epoch: Epoch{Term: 5}})
	persisted := b.Ready().Floors
	again := New(nodeB, Counting)
	again.RestoreFloors(persisted...)
	again.Step(Message{Type: MsgPrepare, From: nodeA, To: nodeB, Key: keyA, Epoch: Epoch{Term: 4, Node: nodeA}})
	if m := messagesOf(again.Ready(), MsgRefuse); len(m) != 1 {
		t.Fatal("a restored replica promised below its floor")
	}
}

func fenced(from ring.NodeID, id, term, promised uint64, counted bool) Message {
	return Message{Type: MsgFenced, From: from, To: nodeX, Round: id, Epoch: Epoch{Term: term}, Promised: Epoch{Term: promised}, Counted: counted}
}

// The copier fences every source again above the highest term one
// reported, and the range is fenced once a quorum answered one round
// with terms below its G.
func TestAFencerFencesAgainAboveTheTermsReported(t *testing.T) {
	f := NewFencer(nodeX, 7, keyRange(keyA), []ring.NodeID{nodeA, nodeB, nodeC}, 2, 1)
	if ms := f.Messages(); len(ms) != 3 || ms[0].Epoch.Term != 2 || ms[0].Round != 7 || ms[0].Type != MsgFence {
		t.Fatalf("the first round is %v, want fences at term 2 to three sources", ms)
	}
	if f.Step(fenced(nodeB, 7, 2, 1, true)) {
		t.Fatal("an answer below G started a new round")
	}
	if !f.Step(fenced(nodeC, 7, 2, 4, true)) {
		t.Fatal("an answer at 4 >= G did not start a new round")
	}
	if _, ok := f.Fenced(); ok {
		t.Fatal("the range is fenced after a source reported a term above G")
	}
	if ms := f.Messages(); len(ms) != 3 || ms[0].Epoch.Term != 5 {
		t.Fatalf("the second round is %v, want fences at term 5 to all three sources", ms)
	}
	f.Step(fenced(nodeB, 7, 2, 1, true)) // a late answer to the first round
	f.Step(fenced(nodeB, 8, 5, 1, true)) // another fencing's
	f.Step(fenced(nodeX, 7, 5, 1, true)) // not a source
	if _, ok := f.Fenced(); ok {
		t.Fatal("answers of another round, fencing or node counted")
	}
	f.Step(fenced(nodeC, 7, 5, 4, true))
	f.Step(fenced(nodeA, 7, 5, 0, true))
	got, ok := f.Fenced()
	if !ok || !slices.Equal(got, []ring.NodeID{nodeC, nodeA}) {
		t.Fatalf("fenced %v, %v; want c and a", got, ok)
	}
	if f.Rounds() != 2 {
		t.Fatalf("%d rounds, want 2", f.Rounds())
	}
}

// Sources still receiving the range block the fencing once too few are
// left for a quorum.
func TestAFencerIsBlockedByReceivingSources(t *testing.T) {
	f := NewFencer(nodeX, 1, keyRange(keyA), []ring.NodeID{nodeA, nodeB, nodeC}, 2, 0)
	f.Step(fenced(nodeA, 1, 1, 0, false))
	if f.Blocked() {
		t.Fatal("one receiving source of three blocks a quorum of two")
	}
	f.Step(fenced(nodeB, 1, 1, 0, false))
	if !f.Blocked() || !slices.Equal(f.Receiving(), []ring.NodeID{nodeA, nodeB}) {
		t.Fatalf("two receiving sources of three: blocked %v, receiving %v", f.Blocked(), f.Receiving())
	}
	g := NewFencer(nodeX, 1, keyRange(keyA), []ring.NodeID{nodeA}, 1, 0)
	g.Step(fenced(nodeA, 1, 1, math.MaxUint64, true))
	if !g.Blocked() || !g.Exhausted() {
		t.Fatal("a source that reported the largest term did not exhaust the fencing")
	}
}

// An owner refused by a floor acquires again, unseen by its caller, with
// the replica set it was acquired with; the key may have moved since. Here
// B serves over {A,B,C}; C fences the range at term 10 (an earlier
// hand-off whose copier, C, is in the set); the set moves to {D,A,B}, and
// A's joint acquisition, while B is paused, serves at term 11 and has
// write 2 acknowledged by A and D. B, resumed and cut off from A, reads:
// its own replica's floor refuses it, and it acquires again over {A,B,C}
// at term 11 too, above A's epoch by its node. C promised A's epoch since
// B acquired: it must refuse, and B step down, not adopt value 1 from
// {B,C} and serve it.
func TestAnOwnerAcquiringAgainAboveAFloorStepsDownWhenAnotherOwnerAcquiredSince(t *testing.T) {
	s := newSim(t, 4, replication.Majority, []Key{keyA})
	a, b, c, d := s.nodes[0], s.nodes[1], s.nodes[2], s.nodes[3]
	state := register{keyA, stateSlot}
	serve(t, s, 1)
	s.issue(b, state, lincheck.Write, 0)
	s.flush()
	for _, n := range []*simNode{a, b, c} {
		n.core.Step(Message{Type: MsgFence, From: c.id, To: n.id, Range: keyRange(keyA), Round: 1, Epoch: Epoch{Term: 10}})
		s.apply(n)
	}
	s.net = slices.DeleteFunc(s.net, func(m Message) bool { return m.Type == MsgFenced })
	b.paused = true
	s.previous[keyA] = s.replicas[keyA]
	s.replicas[keyA] = []ring.NodeID{d.id, a.id, b.id}
	serve(t, s, 0)
	if got := a.core.owned[keyA].epoch; got != (Epoch{Term: 11, Node: a.id}) {
		t.Fatalf("the joint owner's epoch is %v, want 11 at %s", got, a.id)
	}
	s.issue(a, state, lincheck.Write, 0)
	s.flush()
	if !acknowledged(s, 2) {
		t.Fatal("the joint owner's write was not acknowledged")
	}
	b.paused = false
	s.cut[[2]string{a.id.Addr, b.id.Addr}] = true
	s.cut[[2]string{b.id.Addr, a.id.Addr}] = true
	// After write 2 returned: a call at the instant it returns overlaps it.
	s.now++
	s.issue(b, state, lincheck.Read, 0)
	s.flush()
	if b.core.Serving(keyA) {
		t.Errorf("%s serves %v at %v after acquiring again over {A,B,C}, which the key left", b.id, keyA, b.core.owned[keyA].epoch)
	} else if b.core.owned[keyA] != nil || len(b.ops) != 0 {
		t.Errorf("%s still acquires %v (%v) with %d operations waiting: want stepped down, the read failed", b.id, keyA, b.core.owned[keyA] != nil, len(b.ops))
	}
	if res := porcupine.CheckOperations(lincheck.Model[register](), s.history); !res {
		for _, op := range s.history {
			t.Logf("[%d,%d] %s", op.Call, op.Return, lincheck.Model[register]().DescribeOperation(op.Input, op.Output))
		}
		t.Fatal("the history is not linearizable: the acknowledged write 2 was lost")
	}
}

// A prepare that names the epoch of its owner's first acquisition (an
// acquisition again above a floor) is refused, naming the promise, when
// the replica promised another node's epoch after that one; its own
// earlier epochs and older ones pass.
func TestAPrepareAboveAFloorIsRefusedAfterAnotherNodesNewerPromise(t *testing.T) {
	since := Epoch{Term: 3, Node: nodeA}
	again := Message{Type: MsgPrepare, From: nodeA, To: nodeB, Key: keyA, Epoch: Epoch{Term: 9, Node: nodeA}, Promised: since}
	for _, tc := range []struct {
		promised Epoch
		refused  bool
	}{
		{Epoch{Term: 2, Node: nodeC}, false},
		{since, false},
		{Epoch{Term: 5, Node: nodeA}, false},
		{Epoch{Term: 3, Node: nodeC}, true},
		{Epoch{Term: 5, Node: nodeC}, true},
	} {
		b := New(nodeB, Counting)
		b.Step(Message{Type: MsgPrepare, From: tc.promised.Node, To: nodeB, Key: keyA, Epoch: tc.promised})
		b.Ready()
		b.Step(again)
		rd := b.Ready()
		refusals := messagesOf(rd, MsgRefuse)
		if got := len(refusals) == 1; got != tc.refused {
			t.Fatalf("after a promise of %v a prepare since %v answered %v, want refused %v", tc.promised, since, rd.Messages, tc.refused)
		}
		if tc.refused && (refusals[0].Promised != tc.promised || refusals[0].Floor || b.Promised(keyA) != tc.promised) {
			t.Fatalf("the refusal %+v names another epoch than %v, or the promise moved to %v", refusals[0], tc.promised, b.Promised(keyA))
		}
		if !tc.refused && b.Promised(keyA) != again.Epoch {
			t.Fatalf("after a promise of %v a prepare since %v left the promise at %v", tc.promised, since, b.Promised(keyA))
		}
	}
	plain := again
	plain.Promised = Epoch{}
	b := New(nodeB, Counting)
	b.Step(Message{Type: MsgPrepare, From: nodeC, To: nodeB, Key: keyA, Epoch: Epoch{Term: 5, Node: nodeC}})
	b.Ready()
	b.Step(plain)
	if len(messagesOf(b.Ready(), MsgRefuse)) != 0 {
		t.Fatal("a prepare that names no epoch was refused below its own")
	}
}

// A fence reports the term of another copier's floor over the range as
// it reports a promised term, so that the copier's next round goes above
// it and the fenced sources' floors name the new copier. Here C fenced the
// range of A's key at term 10 for an earlier hand-off (C is in A's set
// {A,B,C}); then X, a new replica, fences it from term 1. Were the floors
// left at C's, A, refused by one, would acquire again above it over
// {A,B,C} (it holds C) and keep writing to the set X copied from; with
// X's, it steps down.
func TestAFenceGoesAboveAnEarlierCopiersFloorAndNamesItsCopier(t *testing.T) {
	s := newSim(t, 3, replication.Majority, []Key{keyA})
	serve(t, s, 0)
	owner, c := s.nodes[0], s.nodes[2]
	for _, n := range s.nodes {
		n.core.Step(Message{Type: MsgFence, From: c.id, To: n.id, Range: keyRange(keyA), Round: 1, Epoch: Epoch{Term: 10}})
		s.apply(n)
	}
	s.net = slices.DeleteFunc(s.net, func(m Message) bool { return m.Type == MsgFenced })
	f := NewFencer(nodeX, 1, keyRange(keyA), s.replicas[keyA], 2, 0)
	for range 5 {
		if _, ok := f.Fenced(); ok {
			break
		}
		for _, m := range f.Messages() {
			n := s.node(m.To)
			n.core.Step(m)
			s.apply(n)
		}
		var answers []Message
		s.net = slices.DeleteFunc(s.net, func(m Message) bool {
			if m.Type == MsgFenced {
				answers = append(answers, m)
				return true
			}
			return false
		})
		for _, m := range answers {
			f.Step(m)
		}
	}
	if _, ok := f.Fenced(); !ok || f.Term() <= 10 {
		t.Fatalf("the fencing is done %v at term %d after %d rounds; want done above C's floor, 10", ok, f.Term(), f.Rounds())
	}
	for _, n := range s.nodes {
		if fs := n.core.Floors(); len(fs) != 1 || fs[0].Epoch != (Epoch{Term: f.Term(), Node: nodeX}) {
			t.Fatalf("%s's floors are %v, want X's at term %d", n.id, fs, f.Term())
		}
	}
	tk := write(t, s, 0, 1)
	s.flush()
	if owner.core.owned[keyA] != nil || !released(s, 0, tk) || acknowledged(s, 1) {
		t.Fatalf("the owner holds the key %v, its write settled %v, acknowledged %v: want stepped down, the write failed",
			owner.core.owned[keyA] != nil, released(s, 0, tk), acknowledged(s, 1))
	}
}

// A fence does not report the copier's own floors: a fence sent again
// after its answer was lost would otherwise start a new round.
func TestAFenceReportsAnotherCopiersFloorNotItsOwn(t *testing.T) {
	b := New(nodeB, Counting)
	b.Step(Message{Type: MsgFence, From: nodeC, To: nodeB, Range: keyRange(keyA), Round: 1, Epoch: Epoch{Term: 10}})
	b.Ready()
	for _, tc := range []struct {
		from ring.NodeID
		term uint64
		want uint64
	}{
		{nodeX, 3, 10},
		{nodeC, 10, 0},
		{nodeX, 11, 10},
		// Sent again: X's floor replaced C's.
		{nodeX, 11, 0},
	} {
		b.Step(Message{Type: MsgFence, From: tc.from, To: nodeB, Range: keyRange(keyA), Round: 1, Epoch: Epoch{Term: tc.term}})
		m := messagesOf(b.Ready(), MsgFenced)
		if len(m) != 1 || m[0].Promised.Term != tc.want {
			t.Fatalf("a fence from %s at %d answered %v, want the term %d", tc.from, tc.term, m, tc.want)
		}
	}
}

// A floor raised by a fence for a departure refuses a prepare that lists
// its copier but does not name the departed member gone, whatever its
// term, and names the departure in its refusal: the copier of a leave is a
// member every view shows, so listing it says nothing of the leave.
func TestAPrepareThatDoesNotNameTheFloorsDeparturesIsRefused(t *testing.T) {
	b := New(nodeB, Counting)
	b.Step(Message{Type: MsgFence, From: nodeX, To: nodeB, Range: keyRange(keyA), Round: 1, Epoch: Epoch{Term: 5}, Gone: []ring.NodeID{nodeC}})
	if rd := b.Ready(); len(rd.Floors) != 1 || !slices.Equal(rd.Floors[0].Departed, []ring.NodeID{nodeC}) {
		t.Fatalf("a fence for c's departure left floors %v, want one naming c", rd.Floors)
	}
	above := Epoch{Term: 9, Node: nodeA}
	b.Step(Message{Type: MsgPrepare, From: nodeA, To: nodeB, Key: keyA, Epoch: above, Reads: []ring.NodeID{nodeA, nodeB, nodeC, nodeX}})
	refused := messagesOf(b.Ready(), MsgRefuse)
	if len(refused) != 1 || !refused[0].Floor || refused[0].Promised != (Epoch{Term: 5, Node: nodeX}) || !slices.Equal(refused[0].Gone, []ring.NodeID{nodeC}) {
		t.Fatalf("a prepare that lists the copier but not c gone was answered %v, want a refusal naming the floor and c", refused)
	}
	b.Step(Message{Type: MsgPrepare, From: nodeA, To: nodeB, Key: keyA, Epoch: above, Reads: []ring.NodeID{nodeA, nodeB, nodeX}, Gone: []ring.NodeID{nodeC}})
	if m := messagesOf(b.Ready(), MsgPromise); len(m) != 1 {
		t.Fatal("a prepare that lists the copier and names c gone was not promised")
	}
	// A second fence, for another departure, keeps the first's: a view
	// that lags both changes is refused by the floor the second leaves.
	b.Step(Message{Type: MsgFence, From: nodeX, To: nodeB, Range: keyRange(keyA), Round: 2, Epoch: Epoch{Term: 12}, Gone: []ring.NodeID{nodeA}})
	b.Ready()
	later := Epoch{Term: 13, Node: nodeX}
	b.Step(Message{Type: MsgPrepare, From: nodeX, To: nodeB, Key: keyA, Epoch: later, Reads: []ring.NodeID{nodeB, nodeX}, Gone: []ring.NodeID{nodeA}})
	if refused := messagesOf(b.Ready(), MsgRefuse); len(refused) != 1 || !slices.Equal(refused[0].Gone, []ring.NodeID{nodeC, nodeA}) {
		t.Fatalf("a prepare naming only the second departure was answered %v, want a refusal naming both", refused)
	}
	b.Step(Message{Type: MsgPrepare, From: nodeX, To: nodeB, Key: keyA, Epoch: later, Reads: []ring.NodeID{nodeB, nodeX}, Gone: []ring.NodeID{nodeA, nodeC}})
	if m := messagesOf(b.Ready(), MsgPromise); len(m) != 1 {
		t.Fatal("a prepare naming both departures was not promised")
	}
}

// exchange delivers the messages of cores among them until none is left,
// and returns the changes they reported.
func exchange(cores ...*Core) []Change {
	byID := make(map[ring.NodeID]*Core, len(cores))
	for _, c := range cores {
		byID[c.self] = c
	}
	var changes []Change
	for range 100 {
		moved := false
		for _, c := range cores {
			rd := c.Ready()
			changes = append(changes, rd.Changes...)
			for _, m := range rd.Messages {
				if d := byID[m.To]; d != nil {
					d.Step(m)
					moved = true
				}
			}
		}
		if !moved {
			break
		}
	}
	return changes
}

// An owner whose set still holds the member a floor names departed is on a
// view that lags the leave or removal the floor's copier fenced the range
// for: it steps down naming the departure, even though its caller named
// the copier, a member its view shows. One whose set holds the copier and
// not the departed member acquires again above the floor, naming the
// departure, and is served.
func TestAnOwnerWhoseSetHoldsAFloorsDepartedMemberStepsDown(t *testing.T) {
	fenced := func() *Core {
		b := New(nodeB, Counting)
		b.Step(Message{Type: MsgFence, From: nodeX, To: nodeB, Range: keyRange(keyA), Round: 1, Epoch: Epoch{Term: 5}, Gone: []ring.NodeID{nodeC}})
		b.Ready()
		return b
	}
	// The lagging owner: c left, x took its place in the set, and the
	// owner's view shows x (a member for long) but not the leave. It
	// acquires above the floor's term (it promised a term above it
	// already): rule 1 refuses it, not the term.
	a := New(nodeA, Counting)
	a.Step(Message{Type: MsgPrepare, From: nodeB, To: nodeA, Key: keyA, Epoch: Epoch{Term: 7, Node: nodeB}})
	a.Ready()
	if err := a.AcquireWith(keyA, []ring.NodeID{nodeA, nodeB, nodeC}, replication.Majority, AcquireOptions{Copiers: []ring.NodeID{nodeX}}); err != nil {
		t.Fatal(err)
	}
	changes := exchange(a, fenced())
	if a.Serving(keyA) || len(changes) != 1 || changes[0].Serving || !changes[0].Floor || !slices.Equal(changes[0].Departed, []ring.NodeID{nodeC}) {
		t.Fatalf("an owner over the set that still holds c reported %+v (serving %v), want a step-down at the floor naming c", changes, a.Serving(keyA))
	}
	// Its caller, once its view shows c gone, names it: served.
	if err := a.AcquireWith(keyA, []ring.NodeID{nodeA, nodeB, nodeC}, replication.Majority, AcquireOptions{Copiers: []ring.NodeID{nodeX}, Gone: []ring.NodeID{nodeC}}); err != nil {
		t.Fatal(err)
	}
	b := fenced()
	if exchange(a, b); !a.Serving(keyA) {
		t.Fatal("an acquisition naming the copier and c gone was not served")
	}
	// An owner on the view after the leave: its set holds x, not c.
	n := New(nodeA, Counting)
	if err := n.AcquireWith(keyA, []ring.NodeID{nodeA, nodeB, nodeX}, replication.Majority, AcquireOptions{}); err != nil {
		t.Fatal(err)
	}
	changes = exchange(n, fenced())
	if !n.Serving(keyA) || n.owned[keyA].epoch.Term <= 5 || !slices.Equal(n.owned[keyA].gone, []ring.NodeID{nodeC}) {
		t.Fatalf("an owner over the set after the leave reported %+v (serving %v), want served above the floor naming c gone", changes, n.Serving(keyA))
	}
}

// A floor names at most maxDeparted departures: the one named least
// recently goes first, and one a fence names again counts as named last.
func TestAFloorKeepsTheDeparturesNamedLast(t *testing.T) {
	g := ring.Range{Start: 10, End: 20}
	member := func(i int) ring.NodeID { return ring.NodeID{Addr: "d", Incarnation: uint64(i)} }
	var fs floors
	for i := range maxDeparted + 2 {
		fs, _ = fs.raise(g, Epoch{Term: uint64(i + 1), Node: nodeX}, nil, []ring.NodeID{member(i)})
	}
	var want []ring.NodeID
	for i := 2; i < maxDeparted+2; i++ {
		want = append(want, member(i))
	}
	if got := fs.find(15).departed; !slices.Equal(got, want) {
		t.Fatalf("after %d departures the floor names %v, want the last %d: %v", maxDeparted+2, got, maxDeparted, want)
	}
	// Named again, the oldest kept moves last, and the next one pushes
	// out the one after it.
	fs, _ = fs.raise(g, Epoch{Term: 20, Node: nodeX}, nil, []ring.NodeID{member(2)})
	fs, _ = fs.raise(g, Epoch{Term: 21, Node: nodeX}, nil, []ring.NodeID{member(50)})
	want = append(append(want[2:], member(2)), member(50))
	if got := fs.find(15).departed; !slices.Equal(got, want) {
		t.Fatalf("after naming %v again and then %v, the floor names %v, want %v", member(2), member(50), got, want)
	}
}

// A floor that two fences raised names both copiers: a prepare that lists
// the last copier but not the earlier one is refused, whatever its term,
// and the refusal names the earlier one; an acquisition whose caller named
// the last only steps down naming both, and one naming both is served. A
// view that shows the second join but lags the first gives the key a set
// from before the first copy.
func TestAFloorOfTwoFencesNamesBothCopiers(t *testing.T) {
	fenced := func() *Core {
		b := New(nodeB, Counting)
		b.Step(Message{Type: MsgFence, From: nodeC, To: nodeB, Range: keyRange(keyA), Round: 1, Epoch: Epoch{Term: 5}})
		b.Step(Message{Type: MsgFence, From: nodeX, To: nodeB, Range: keyRange(keyA), Round: 2, Epoch: Epoch{Term: 6}})
		b.Ready()
		return b
	}
	b := fenced()
	if fs := b.Floors(); len(fs) != 1 || fs[0].Epoch != (Epoch{Term: 6, Node: nodeX}) || !slices.Equal(fs[0].Copiers, []ring.NodeID{nodeC}) {
		t.Fatalf("two fences left floors %+v, want one at x's term naming c among earlier copiers", fs)
	}
	above := Epoch{Term: 9, Node: nodeA}
	b.Step(Message{Type: MsgPrepare, From: nodeA, To: nodeB, Key: keyA, Epoch: above, Reads: []ring.NodeID{nodeA, nodeB, nodeX}})
	refused := messagesOf(b.Ready(), MsgRefuse)
	if len(refused) != 1 || !refused[0].Floor || !slices.Equal(refused[0].Reads, []ring.NodeID{nodeC}) {
		t.Fatalf("a prepare listing x but not c was answered %v, want a refusal naming the floor and c", refused)
	}
	a := New(nodeA, Counting)
	if err := a.AcquireWith(keyA, []ring.NodeID{nodeA, nodeB}, replication.Majority, AcquireOptions{Copiers: []ring.NodeID{nodeX}}); err != nil {
		t.Fatal(err)
	}
	changes := exchange(a, fenced())
	if a.Serving(keyA) || len(changes) != 1 || !changes[0].Floor || changes[0].Epoch.Node != nodeX || !slices.Equal(changes[0].Copiers, []ring.NodeID{nodeC}) {
		t.Fatalf("an acquisition naming x only reported %+v, want a step-down at the floor naming c", changes)
	}
	if err := a.AcquireWith(keyA, []ring.NodeID{nodeA, nodeB}, replication.Majority, AcquireOptions{Copiers: []ring.NodeID{nodeX, nodeC}}); err != nil {
		t.Fatal(err)
	}
	if exchange(a, fenced()); !a.Serving(keyA) {
		t.Fatal("an acquisition naming both copiers was not served")
	}
	// One that names x whose view shows c too (AcquireOptions.View)
	// acquires again naming c, without stepping down; one whose view does
	// not show c steps down.
	for _, shown := range []bool{true, false} {
		n := New(nodeA, Counting)
		view := View{Entered: func(y ring.NodeID) bool { return shown && y == nodeC }}
		if err := n.AcquireWith(keyA, []ring.NodeID{nodeA, nodeB}, replication.Majority, AcquireOptions{Copiers: []ring.NodeID{nodeX}, View: view}); err != nil {
			t.Fatal(err)
		}
		changes := exchange(n, fenced())
		if n.Serving(keyA) != shown || (shown && !slices.Contains(n.owned[keyA].shows, nodeC)) {
			t.Fatalf("an acquisition naming x whose view shows c: %v reported %+v, serving %v", shown, changes, n.Serving(keyA))
		}
	}
}

// A floor keeps the copiers of the last maxDeparted fences before its top
// one, and a prepare passes a copier the floor names departed too when it
// names it gone (a view that shows it gone gives sets without it, as they
// are after its departure, whether it saw it enter or not).
func TestAFloorKeepsTheCopiersOfItsLastFences(t *testing.T) {
	g := ring.Range{Start: 10, End: 20}
	copier := func(i int) ring.NodeID { return ring.NodeID{Addr: "x", Incarnation: uint64(i)} }
	var fs floors
	for i := range maxDeparted + 3 {
		fs, _ = fs.raise(g, Epoch{Term: uint64(i + 1), Node: copier(i)}, nil, nil)
	}
	f := fs.find(15)
	var want []ring.NodeID
	for i := 2; i < maxDeparted+2; i++ {
		want = append(want, copier(i))
	}
	if f.epoch.Node != copier(maxDeparted+2) || !slices.Equal(f.copiers, want) {
		t.Fatalf("after %d fences the floor is %v with earlier copiers %v, want the last one with the %d before it: %v", maxDeparted+3, f.epoch, f.copiers, maxDeparted, want)
	}
	// The same copier fencing again changes nothing but the term.
	again, _ := fs.raise(g, Epoch{Term: 99, Node: copier(maxDeparted + 2)}, nil, nil)
	if got := again.find(15).copiers; !slices.Equal(got, want) {
		t.Fatalf("the top copier fencing again left earlier copiers %v, want %v", got, want)
	}
	// A copier that departed since passes when named gone.
	d := copier(5)
	fs, _ = fs.raise(g, Epoch{Term: 100, Node: nodeX}, nil, []ring.NodeID{d})
	f = fs.find(15)
	reads := append([]ring.NodeID{nodeX}, slices.DeleteFunc(slices.Clone(f.copiers), func(y ring.NodeID) bool { return y == d })...)
	if f.passedBy(reads, nil) {
		t.Fatal("a prepare that neither lists nor names gone a departed copier passed")
	}
	if !f.passedBy(reads, []ring.NodeID{d}) {
		t.Fatal("a prepare that names a departed copier gone did not pass")
	}
}
