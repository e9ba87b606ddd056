package replica

import (
	"slices"
	"testing"

	"github.com/troupe-go/troupe/internal/lincheck"
	"github.com/troupe-go/troupe/replication"
	"github.com/troupe-go/troupe/ring"
)

// setChange builds the change of set from {A,B,C} to {D,A,B} while C
// lives and serves the key: C (the old owner) is cut off from A, and D
// (the new owner) from B, so each could reach a quorum of its own set
// alone: {B,C} and {D,A}. D acquires, then both owners write.
func setChange(t *testing.T, plain bool) (s *sim, oldOwner, newOwner *simNode, oldWrite, newWrite Ticket, newServes bool) {
	t.Helper()
	s = newSim(t, 4, replication.Majority, []Key{keyA})
	s.plain = plain
	a, b, c, d := s.nodes[0], s.nodes[1], s.nodes[2], s.nodes[3]
	serve(t, s, 2)
	s.previous[keyA] = s.replicas[keyA]
	s.replicas[keyA] = []ring.NodeID{d.id, a.id, b.id}
	for _, link := range [][2]*simNode{{c, a}, {d, b}} {
		s.cut[[2]string{link[0].id.Addr, link[1].id.Addr}] = true
		s.cut[[2]string{link[1].id.Addr, link[0].id.Addr}] = true
	}
	s.acquire(d, keyA)
	s.flush()
	newServes = d.core.Serving(keyA)
	if c.core.Serving(keyA) {
		oldWrite = write(t, s, 2, 1)
		s.flush()
	}
	if newServes {
		newWrite = write(t, s, 3, 2)
		s.flush()
	}
	return s, c, d, oldWrite, newWrite, newServes
}

// acknowledged reports whether the write of v was released as done.
func acknowledged(s *sim, v int) bool {
	for _, op := range s.history {
		if in := op.Input.(regInput); in.Op == lincheck.Write && in.New == v && !op.Output.(regOutput).Unknown {
			return true
		}
	}
	return false
}

func TestAPlainAcquisitionAfterASetChangeLetsTwoOwnersWrite(t *testing.T) {
	s, c, d, oldWrite, _, newServes := setChange(t, true)
	if !newServes {
		t.Fatal("the new owner did not serve with a quorum {D,A} of its set")
	}
	if oldWrite == 0 || !acknowledged(s, 1) || !acknowledged(s, 2) {
		t.Fatalf("expected the unfenced change to acknowledge both owners' writes (old %v at %s, new %v at %s): the scenario no longer shows the gap",
			acknowledged(s, 1), c.id, acknowledged(s, 2), d.id)
	}
}

func TestAJointAcquisitionFencesTheOwnerOfThePreviousSet(t *testing.T) {
	s, c, d, _, _, newServes := setChange(t, false)
	if !newServes {
		t.Fatal("the joint acquisition did not serve with {D,A} of the new set and {A,C} of the previous one")
	}
	if c.core.Serving(keyA) {
		t.Fatalf("%s still serves after a quorum of its set promised %s's epoch", c.id, d.id)
	}
	if acknowledged(s, 1) {
		t.Fatal("the old owner's write was acknowledged after a quorum of its set promised the new epoch")
	}
	if !acknowledged(s, 2) {
		t.Fatal("the new owner's write was not acknowledged")
	}
	// Writes go to the new set only: the previous set's leaver was
	// only asked to promise.
	if r, ok := c.core.Stored(keyA, stateSlot); ok && r.Epoch.Node == d.id {
		t.Fatalf("%s, outside the new set, was sent the new owner's write", c.id)
	}
}

func TestAJointAcquisitionAdoptsWhatThePreviousSetAcknowledged(t *testing.T) {
	s := newSim(t, 4, replication.Majority, []Key{keyA})
	a, b, c, d := s.nodes[0], s.nodes[1], s.nodes[2], s.nodes[3]
	serve(t, s, 2)
	// C's write reaches B and C only: acknowledged on {B,C}.
	s.cut[[2]string{c.id.Addr, a.id.Addr}] = true
	tk := write(t, s, 2, 9)
	s.flush()
	if !released(s, 2, tk) {
		t.Fatal("the write on {B,C} was not acknowledged")
	}
	s.cut = map[[2]string]bool{}
	// The new set {D,A,B}; D does not hear from B: {D,A} alone would
	// miss the write.
	s.previous[keyA] = s.replicas[keyA]
	s.replicas[keyA] = []ring.NodeID{d.id, a.id, b.id}
	s.cut[[2]string{d.id.Addr, b.id.Addr}] = true
	s.cut[[2]string{b.id.Addr, d.id.Addr}] = true
	s.acquire(d, keyA)
	s.flush()
	if !d.core.Serving(keyA) {
		t.Fatal("the joint acquisition did not serve")
	}
	if got := decodeValue(d.core.Current(keyA, stateSlot)); got != 9 {
		t.Fatalf("the new owner adopted %d, want the write 9 acknowledged on the previous set", got)
	}
	if _, changing := s.previous[keyA]; changing {
		t.Fatal("the simulation kept naming the previous set after a joint acquisition served")
	}
}

// A key served over P={A,B,C} whose set moves to R={A,B,D}: the owner's
// joint acquisition must fence P and move to R, not return at once
// because the key is served. Then A, cut off from B and D, must not get
// a write acknowledged by {A,C} while D serves over R after a plain
// acquisition with {B,D}.
func TestAJointAcquisitionOfAKeyServedOverThePreviousSetMovesItToTheNewSet(t *testing.T) {
	s := newSim(t, 4, replication.Majority, []Key{keyA})
	a, b, d := s.nodes[0], s.nodes[1], s.nodes[3]
	serve(t, s, 0)
	write(t, s, 0, 1)
	s.flush()
	s.previous[keyA] = s.replicas[keyA]
	s.replicas[keyA] = []ring.NodeID{a.id, b.id, d.id}
	s.acquire(a, keyA)
	s.flush()
	if !a.core.Serving(keyA) {
		t.Fatal("the joint acquisition of a key already served did not serve")
	}
	if o := a.core.owned[keyA]; !slices.Equal(o.replicas, sortedSet(s.replicas[keyA])) {
		t.Fatalf("after the joint acquisition the owner writes to %v, want the new set %v", o.replicas, s.replicas[keyA])
	}
	if _, changing := s.previous[keyA]; changing {
		t.Fatal("the joint acquisition served but the simulation still names the previous set")
	}
	for _, o := range []*simNode{b, d} {
		s.cut[[2]string{a.id.Addr, o.id.Addr}] = true
		s.cut[[2]string{o.id.Addr, a.id.Addr}] = true
	}
	s.acquire(d, keyA)
	s.flush()
	if !d.core.Serving(keyA) {
		t.Fatal("the new set's owner did not serve with {B,D}")
	}
	if a.core.Serving(keyA) {
		write(t, s, 0, 2)
		s.flush()
	}
	if acknowledged(s, 2) {
		t.Fatal("two owners: the old owner's write was acknowledged while the new set's owner serves")
	}
	if got := decodeValue(d.core.Current(keyA, stateSlot)); got != 1 {
		t.Fatalf("the new set's owner adopted %d, want 1", got)
	}
}
