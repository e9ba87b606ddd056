package ring

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
)

func TestReplicaWalkSkipsRepeatedVirtualNodes(t *testing.T) {
	// Positions after the key: A1, A2, B1, A3, C1.
	r := ringOfPositions("A", "A", "B", "A", "C")
	got := r.AppendReplicas(nil, 5, 3)
	want := []NodeID{{Addr: "A"}, {Addr: "B"}, {Addr: "C"}}
	if !slices.Equal(got, want) {
		t.Errorf("three replicas after A1 A2 B1 A3 C1 = %v, want %v", got, want)
	}
}

func TestReplicaWalkStartsAtTheFirstPositionAtOrAfterTheKey(t *testing.T) {
	r := ringOfPositions("A", "B", "C") // tokens 10, 20, 30
	cases := []struct {
		key  Token
		want string
	}{
		{0, "A"}, {10, "A"}, {11, "B"}, {20, "B"}, {21, "C"}, {30, "C"},
		{31, "A"}, {^Token(0), "A"}, // past the largest token the walk wraps to the smallest
	}
	for _, c := range cases {
		if got := r.AppendReplicas(nil, c.key, 1); len(got) != 1 || got[0].Addr != c.want {
			t.Errorf("primary of token %d = %v, want %s", c.key, got, c.want)
		}
	}
}

func TestReplicaWalkWrapsAroundTheRing(t *testing.T) {
	r := ringOfPositions("A", "B", "B", "C") // tokens 10, 20, 30, 40
	got := r.AppendReplicas(nil, 35, 3)
	want := []NodeID{{Addr: "C"}, {Addr: "A"}, {Addr: "B"}}
	if !slices.Equal(got, want) {
		t.Errorf("replicas from token 35 = %v, want %v (C, then wrapping to A and B)", got, want)
	}
}

func TestReplicaCountIsCappedByTheMemberCount(t *testing.T) {
	r := New(seededMembers(3, 3))
	if got := r.AppendReplicas(nil, KeyToken("counter", "a"), 5); len(got) != 3 {
		t.Errorf("asked 5 replicas of a 3-member ring, got %d, want 3", len(got))
	}
}

func TestAppendReplicasAppendsToTheCallersSlice(t *testing.T) {
	r := ringOfPositions("A", "B")
	prefix := []NodeID{{Addr: "X"}}
	got := r.AppendReplicas(prefix, 5, 2)
	want := []NodeID{{Addr: "X"}, {Addr: "A"}, {Addr: "B"}}
	if !slices.Equal(got, want) {
		t.Errorf("AppendReplicas onto [X] = %v, want %v", got, want)
	}
}

func TestNoReplicasForCountBelowOne(t *testing.T) {
	r := ringOfPositions("A", "B")
	if got := r.AppendReplicas(nil, 5, 0); len(got) != 0 {
		t.Errorf("AppendReplicas with n=0 = %v, want nothing", got)
	}
}

func TestOwnerIsThePrimaryWhileItIsLive(t *testing.T) {
	r := ringOfPositions("A", "B", "C")
	m, err := r.Owner(5, 3, allLive)
	if err != nil || m.Addr != "A" {
		t.Errorf("Owner = %v, %v; want the primary A", m, err)
	}
}

func TestOwnerPassesToTheNextLiveReplica(t *testing.T) {
	r := ringOfPositions("A", "A", "B", "A", "C")
	m, err := r.Owner(5, 3, liveExcept(NodeID{Addr: "A"}, NodeID{Addr: "B"}))
	if err != nil || m.Addr != "C" {
		t.Errorf("Owner with A and B dead = %v, %v; want the third replica C", m, err)
	}
}

func TestOwnerLooksOnlyAmongTheKeysReplicas(t *testing.T) {
	r := ringOfPositions("A", "B", "C")
	_, err := r.Owner(5, 2, liveExcept(NodeID{Addr: "A"}, NodeID{Addr: "B"}))
	if !errors.Is(err, ErrNoLiveReplica) {
		t.Errorf("Owner with both of 2 replicas dead returned %v, want ErrNoLiveReplica (C is live but holds no copy)", err)
	}
}

func TestDeadMemberStaysInTheReplicaSet(t *testing.T) {
	r := ringOfPositions("A", "B", "C")
	dead := NodeID{Addr: "B"}
	replicas := r.AppendReplicas(nil, 5, 3)
	if !slices.Contains(replicas, dead) {
		t.Fatalf("replicas %v lack B before any failure", replicas)
	}
	if m, _ := r.Owner(15, 3, liveExcept(dead)); m.Addr != "C" {
		t.Errorf("owner of a key whose primary B is dead = %v, want C", m)
	}
	if got := r.AppendReplicas(nil, 5, 3); !slices.Equal(got, replicas) {
		t.Errorf("replicas changed to %v when B died, want still %v: the ring drops a member only when membership removes it", got, replicas)
	}
}

func TestNilLivenessTreatsEveryMemberAsLive(t *testing.T) {
	r := ringOfPositions("A", "B")
	if m, err := r.Owner(15, 2, nil); err != nil || m.Addr != "B" {
		t.Errorf("Owner with nil liveness = %v, %v; want B", m, err)
	}
}

func TestOwnerOfEmptyRingFails(t *testing.T) {
	for _, r := range []*Ring{nil, New(nil)} {
		if _, err := r.Owner(1, 3, allLive); !errors.Is(err, ErrEmptyRing) {
			t.Errorf("Owner on an empty ring returned %v, want ErrEmptyRing", err)
		}
	}
}

func TestOwnerRejectsReplicaCountBelowOne(t *testing.T) {
	r := ringOfPositions("A")
	if _, err := r.Owner(1, 0, allLive); !errors.Is(err, ErrReplicaCount) {
		t.Errorf("Owner with n=0 returned %v, want ErrReplicaCount", err)
	}
}

func TestOwnerIsAllocationFree(t *testing.T) {
	r := New(seededMembers(2, 20))
	tok := KeyToken("counter", "a")
	primary := r.AppendReplicas(nil, tok, 1)[0]
	live := liveExcept(primary)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := r.Owner(tok, 3, live); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Owner walking past a dead primary allocated %v times per call, want 0", allocs)
	}
}

func TestNewIgnoresDuplicateMembers(t *testing.T) {
	ms := seededMembers(4, 5)
	once, twice := New(ms), New(append(slices.Clone(ms), ms...))
	if once.Len() != 5 || twice.Len() != 5 || once.Version() != twice.Version() {
		t.Errorf("rings of 5 members given once and twice have %d and %d members, versions %s and %s; want 5 and equal",
			once.Len(), twice.Len(), once.Version(), twice.Version())
	}
	if len(twice.vnodes) != 5*VirtualNodes {
		t.Errorf("ring of 5 members has %d positions, want %d", len(twice.vnodes), 5*VirtualNodes)
	}
}

func TestSameAddressWithAnotherIncarnationIsAnotherMember(t *testing.T) {
	r := New([]NodeID{{"10.0.0.1:7400", 1}, {"10.0.0.1:7400", 2}})
	if r.Len() != 2 {
		t.Errorf("ring of one address at incarnations 1 and 2 has %d members, want 2", r.Len())
	}
}

func TestVersionChangesWithTheMemberSet(t *testing.T) {
	ms := seededMembers(5, 4)
	base := New(ms).Version()
	restarted := slices.Clone(ms)
	restarted[0].Incarnation++
	for name, other := range map[string]*Ring{
		"one member fewer":         New(ms[1:]),
		"one member restarted":     New(restarted),
		"one member more":          New(seededMembers(5, 5)),
		"members in another order": New([]NodeID{ms[3], ms[1], ms[0], ms[2]}),
	} {
		same := other.Version() == base
		if want := name == "members in another order"; same != want {
			t.Errorf("%s: version equal to the original = %v, want %v", name, same, want)
		}
	}
}

func TestWithAnExistingMemberReturnsTheSameRing(t *testing.T) {
	ms := seededMembers(6, 3)
	r := New(ms)
	if r.With(ms[1]) != r {
		t.Error("With of an existing member built a new ring, want the receiver")
	}
	if r.Without(NodeID{Addr: "absent"}) != r {
		t.Error("Without of a non-member built a new ring, want the receiver")
	}
}

func TestMembersAreInCanonicalOrderAndACopy(t *testing.T) {
	r := New([]NodeID{{"b", 1}, {"a", 2}, {"a", 1}})
	got := r.Members()
	want := []NodeID{{"a", 1}, {"a", 2}, {"b", 1}}
	if !slices.Equal(got, want) {
		t.Fatalf("Members = %v, want %v", got, want)
	}
	got[0].Addr = "changed"
	if r.Members()[0].Addr != "a" {
		t.Error("changing the slice Members returned changed the ring")
	}
}

func TestCrowdedPositionsAreSearchedCorrectly(t *testing.T) {
	addrs := make([]string, 40) // 40 positions at tokens 10..400, all in one bucket
	for i := range addrs {
		addrs[i] = string(rune('A' + i%26))
	}
	r := ringOfPositions(addrs...)
	for tok := Token(0); tok <= 410; tok++ {
		want := 0 // at or below the first position, or past the last: wrap to 0
		if tok > 10 && tok <= 400 {
			want = int((tok+9)/10) - 1 // position i sits at token 10(i+1)
		}
		if got := r.successor(tok); got != want {
			t.Fatalf("successor(%d) = %d, want %d", tok, got, want)
		}
	}
}

func TestSingleMemberOwnsEveryKey(t *testing.T) {
	only := seededMembers(31, 1)[0]
	r := New([]NodeID{only})
	for _, tok := range append(seededKeyTokens(100), 0, ^Token(0)) {
		if got := r.AppendReplicas(nil, tok, 3); len(got) != 1 || got[0] != only {
			t.Fatalf("replicas of %#x in a one-member ring = %v, want [%v]", uint64(tok), got, only)
		}
	}
}

func TestRingIsSafeForConcurrentLookups(t *testing.T) {
	r := New(seededMembers(32, 10))
	toks := seededKeyTokens(200)
	want := make([]NodeID, len(toks))
	for i, tok := range toks {
		want[i], _ = r.Owner(tok, 3, nil)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for range 4 {
		wg.Go(func() {
			var dst []NodeID
			for i, tok := range toks {
				dst = r.AppendReplicas(dst[:0], tok, 3)
				if got, _ := r.Owner(tok, 3, nil); got != want[i] || dst[0] != want[i] {
					errs <- fmt.Sprintf("concurrent lookup of %#x gave %v and %v, want %v", uint64(tok), got, dst[0], want[i])
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestSharesAreTheArcsEndingAtEachMembersPositions(t *testing.T) {
	// Positions 10 (a), 20 (b), 30 (a): b owns (10, 20], a the rest.
	r := ringOfPositions("a", "b", "a")
	got := shares(r)
	wantB := 10 / math.Exp2(64)
	if len(got) != 2 || got[1] != wantB || math.Abs(got[0]+got[1]-1) > 1e-12 {
		t.Errorf("Shares() = %v, want [1-%g %g] (b owns the arc (10, 20])", got, wantB, wantB)
	}
	if s := (*Ring)(nil).Shares(); s != nil {
		t.Errorf("the empty ring's Shares() = %v, want nil", s)
	}
	one := New(seededMembers(3, 1))
	if s := shares(one); len(s) != 1 || math.Abs(s[0]-1) > 1e-12 {
		t.Errorf("a ring of one member: Shares() = %v, want [1]", s)
	}
}

func TestSharesMatchTheKeysEachMemberIsPrimaryFor(t *testing.T) {
	r := New(seededMembers(5, 4))
	keys := seededKeyTokens(20_000)
	counts := make(map[NodeID]int)
	for _, k := range keys {
		counts[r.AppendReplicas(nil, k, 1)[0]]++
	}
	sum := 0.0
	for _, sh := range r.Shares() {
		m, share := sh.Node, sh.Ratio
		sum += share
		// 20,000 keys: a share near 0.25 has a standard error of 0.003.
		if got := float64(counts[m]) / float64(len(keys)); math.Abs(got-share) > 0.02 {
			t.Errorf("%v: Shares says %.4f of the ring, but it is primary for %.4f of the keys", m, share, got)
		}
	}
	if math.Abs(sum-1) > 1e-9 {
		t.Errorf("the shares sum to %v, want 1", sum)
	}
}

func TestSharesNameTheirMemberInTheOrderOfMembers(t *testing.T) {
	r := New(seededMembers(7, 5))
	got := r.Shares()
	members := r.Members()
	if len(got) != len(members) {
		t.Fatalf("Shares() has %d entries for %d members, want one each", len(got), len(members))
	}
	for i, sh := range got {
		if sh.Node != members[i] {
			t.Errorf("Shares()[%d] names %v, want %v (the order of Members)", i, sh.Node, members[i])
		}
	}
}
