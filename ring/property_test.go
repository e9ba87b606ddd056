package ring

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// memberGen draws members from a small space of addresses and incarnations,
// so sets often share an address across incarnations.
func memberGen() *rapid.Generator[NodeID] {
	return rapid.Custom(func(t *rapid.T) NodeID {
		return NodeID{
			Addr:        fmt.Sprintf("10.0.0.%d:7400", rapid.IntRange(1, 24).Draw(t, "host")),
			Incarnation: rapid.Uint64Range(1, 3).Draw(t, "incarnation"),
		}
	})
}

func membersGen(maxLen int) *rapid.Generator[[]NodeID] {
	return rapid.SliceOfNDistinct(memberGen(), 0, maxLen, rapid.ID[NodeID])
}

func tokenGen() *rapid.Generator[Token] {
	return rapid.Map(rapid.Uint64(), func(u uint64) Token { return Token(u) })
}

// naiveRing is the model: every position with its member, sorted by token
// then member, walked by linear scan.
type naiveRing []struct {
	token  Token
	member NodeID
}

func newNaiveRing(members []NodeID) naiveRing {
	var n naiveRing
	for _, m := range members {
		for _, tok := range appendVNodeTokens(nil, m) {
			n = append(n, struct {
				token  Token
				member NodeID
			}{tok, m})
		}
	}
	slices.SortFunc(n, func(a, b struct {
		token  Token
		member NodeID
	}) int {
		return cmp.Or(cmp.Compare(a.token, b.token), a.member.Compare(b.member))
	})
	return n
}

func (n naiveRing) replicas(t Token, count int) []NodeID {
	start := 0
	for start < len(n) && n[start].token < t {
		start++
	}
	var out []NodeID
	for k := range n {
		m := n[(start+k)%len(n)].member
		if len(out) < count && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

func sameRing(a, b *Ring) bool {
	return slices.Equal(a.members, b.members) && slices.Equal(a.vnodes, b.vnodes) &&
		a.version == b.version
}

func TestPropertySameMembersInAnyOrderGiveTheSameRing(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ms := membersGen(12).Draw(t, "members")
		shuffled := rapid.Permutation(ms).Draw(t, "shuffled")
		if a, b := New(ms), New(shuffled); !sameRing(a, b) {
			t.Fatalf("rings of %v and of its permutation %v differ", ms, shuffled)
		}
	})
}

func TestPropertyWithAndWithoutGiveTheRingNewGives(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ms := membersGen(10).Draw(t, "members")
		m := memberGen().Draw(t, "changed")
		r := New(ms)
		rest := slices.DeleteFunc(slices.Clone(ms), func(x NodeID) bool { return x == m })
		if got, want := r.With(m), New(append(slices.Clone(rest), m)); !sameRing(got, want) {
			t.Fatalf("New(%v).With(%v) differs from New of the joined set", ms, m)
		}
		if got, want := r.Without(m), New(rest); !sameRing(got, want) {
			t.Fatalf("New(%v).Without(%v) differs from New of the remaining set", ms, m)
		}
	})
}

func TestPropertyReplicasMatchTheNaiveWalk(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ms := membersGen(10).Draw(t, "members")
		r, model := New(ms), newNaiveRing(ms)
		for range 20 {
			tok := tokenGen().Draw(t, "token")
			n := rapid.IntRange(1, 12).Draw(t, "n")
			got := r.AppendReplicas(nil, tok, n)
			if want := model.replicas(tok, n); !slices.Equal(got, want) {
				t.Fatalf("replicas(%#x, %d) = %v, want %v from the naive walk", uint64(tok), n, got, want)
			}
			if len(got) != min(n, len(ms)) {
				t.Fatalf("replicas(%#x, %d) of %d members has %d entries, want %d", uint64(tok), n, len(ms), len(got), min(n, len(ms)))
			}
			if len(slices.Compact(slices.SortedFunc(slices.Values(got), NodeID.Compare))) != len(got) {
				t.Fatalf("replicas(%#x, %d) = %v repeats a member", uint64(tok), n, got)
			}
		}
	})
}

func TestPropertyOwnerIsTheFirstLiveReplica(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ms := membersGen(10).Draw(t, "members")
		dead := map[NodeID]bool{}
		for _, m := range ms {
			dead[m] = rapid.Bool().Draw(t, "dead "+m.String())
		}
		live := func(m NodeID) bool { return !dead[m] }
		r := New(ms)
		tok := tokenGen().Draw(t, "token")
		n := rapid.IntRange(1, 5).Draw(t, "n")
		got, err := r.Owner(tok, n, live)
		replicas := r.AppendReplicas(nil, tok, n)
		i := slices.IndexFunc(replicas, live)
		switch {
		case len(ms) == 0:
			if err != ErrEmptyRing {
				t.Fatalf("Owner on the empty ring = %v, %v; want ErrEmptyRing", got, err)
			}
		case i < 0:
			if err != ErrNoLiveReplica {
				t.Fatalf("Owner with replicas %v all dead = %v, %v; want ErrNoLiveReplica", replicas, got, err)
			}
		case err != nil || got != replicas[i]:
			t.Fatalf("Owner = %v, %v; want %v, the first live of replicas %v", got, err, replicas[i], replicas)
		}
	})
}

// movedShare returns the fraction of the token space in moves.
func movedShare(moves []Move) float64 {
	var s float64
	for _, mv := range moves {
		if mv.Range.Start == mv.Range.End {
			return 1
		}
		s += float64(uint64(mv.Range.End-mv.Range.Start)) / math.Exp2(64)
	}
	return s
}

func TestPropertyAJoinMovesKeysOnlyToTheJoiner(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ms := membersGen(12).Draw(t, "members")
		joiner := memberGen().Filter(func(m NodeID) bool { return !slices.Contains(ms, m) }).Draw(t, "joiner")
		before := New(ms)
		after := before.With(joiner)
		moves := Moves(before, after, 1)
		for _, mv := range moves {
			if len(mv.After) != 1 || mv.After[0] != joiner {
				t.Fatalf("join of %v moved range %v from %v to %v; keys may only move to the joiner", joiner, mv.Range, mv.Before, mv.After)
			}
		}
		// The moved share is the joiner's share: about 1/N, and with 128
		// positions never near 1.5/N (about 6 standard deviations).
		n := float64(after.Len())
		if got := movedShare(moves) * n; got > 1.5 {
			t.Fatalf("join into %d members moved %.3f of 1/N of the keys, want about 1", after.Len(), got)
		}
	})
}

func TestPropertyALeaveMovesOnlyTheLeaversKeys(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ms := membersGen(12).Filter(func(ms []NodeID) bool { return len(ms) >= 2 }).Draw(t, "members")
		leaver := rapid.SampledFrom(ms).Draw(t, "leaver")
		before := New(ms)
		after := before.Without(leaver)
		moves := Moves(before, after, 1)
		for _, mv := range moves {
			if len(mv.Before) != 1 || mv.Before[0] != leaver {
				t.Fatalf("leave of %v moved range %v from %v to %v; only the leaver's keys may move", leaver, mv.Range, mv.Before, mv.After)
			}
		}
		if got := movedShare(moves) * float64(before.Len()); got > 1.5 {
			t.Fatalf("leave from %d members moved %.3f of 1/N of the keys, want about 1", before.Len(), got)
		}
	})
}

func TestPropertyMovesListExactlyTheTokensWhoseReplicasChanged(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		before := New(membersGen(6).Draw(t, "before"))
		after := New(membersGen(6).Draw(t, "after"))
		n := rapid.IntRange(1, 4).Draw(t, "n")
		moves := Moves(before, after, n)
		var probes []Token
		for range 30 {
			probes = append(probes, tokenGen().Draw(t, "token"))
		}
		for i, mv := range moves {
			if i > 0 && (mv.Range.Start >= mv.Range.End || mv.Range.Start < moves[i-1].Range.End) {
				t.Fatalf("move %d %v is not clockwise after move %d %v, or wraps; only the first may wrap", i, mv.Range, i-1, moves[i-1].Range)
			}
		}
		if k := len(moves) - 1; k > 0 && moves[0].Range.Start > moves[0].Range.End && moves[0].Range.Start < moves[k].Range.End {
			t.Fatalf("wrapping move %v overlaps the last move %v", moves[0].Range, moves[k].Range)
		}
		for range min(len(moves), 10) { // the edges are where off-by-one errors live
			mv := rapid.SampledFrom(moves).Draw(t, "move")
			probes = append(probes, mv.Range.Start, mv.Range.Start+1, mv.Range.End, mv.Range.End+1)
		}
		for _, tok := range probes {
			b := before.AppendReplicas(nil, tok, n)
			a := after.AppendReplicas(nil, tok, n)
			var in []Move
			for _, mv := range moves {
				if mv.Range.Contains(tok) {
					in = append(in, mv)
				}
			}
			switch {
			case len(in) > 1:
				t.Fatalf("token %#x lies in %d moved ranges, want at most one", uint64(tok), len(in))
			case slices.Equal(a, b) && len(in) == 1:
				t.Fatalf("token %#x kept replicas %v but lies in moved range %v", uint64(tok), b, in[0].Range)
			case !slices.Equal(a, b) && len(in) == 0:
				t.Fatalf("token %#x changed replicas %v -> %v but lies in no moved range", uint64(tok), b, a)
			case len(in) == 1 && (!slices.Equal(in[0].Before, b) || !slices.Equal(in[0].After, a)):
				t.Fatalf("token %#x: move says %v -> %v, rings say %v -> %v", uint64(tok), in[0].Before, in[0].After, b, a)
			}
		}
	})
}

func TestPropertyPlacementAnswersBeforeAndNow(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ms := membersGen(8).Draw(t, "members")
		joiner := memberGen().Draw(t, "joiner")
		before := New(ms)
		p := NewPlacement(before).Next(before.With(joiner))
		tok := tokenGen().Draw(t, "token")
		n := rapid.IntRange(1, 3).Draw(t, "n")
		wantBefore, errB := before.Owner(tok, n, nil)
		wantNow, errN := before.With(joiner).Owner(tok, n, nil)
		if p.InHandoff() {
			if got, err := p.OwnerBefore(tok, n, nil); got != wantBefore || err != errB {
				t.Fatalf("OwnerBefore during handoff = %v, %v; want %v, %v", got, err, wantBefore, errB)
			}
		}
		if got, err := p.OwnerNow(tok, n, nil); got != wantNow || err != errN {
			t.Fatalf("OwnerNow = %v, %v; want %v, %v", got, err, wantNow, errN)
		}
		if got, err := p.Settled().OwnerBefore(tok, n, nil); got != wantNow || err != errN {
			t.Fatalf("OwnerBefore once settled = %v, %v; want the current owner %v, %v", got, err, wantNow, errN)
		}
	})
}

func TestPropertySuccessorIsTheFirstPositionAtOrAfterTheToken(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := New(membersGen(6).Filter(func(ms []NodeID) bool { return len(ms) > 0 }).Draw(t, "members"))
		tokens := tokensOf(r)
		near := rapid.SampledFrom(tokens).Draw(t, "position")
		for _, tok := range []Token{tokenGen().Draw(t, "token"), near - 1, near, near + 1} {
			want, _ := slices.BinarySearch(tokens, tok)
			if want == len(tokens) {
				want = 0
			}
			if got := r.successor(tok); got != want {
				t.Fatalf("successor(%#x) = %d, want %d", uint64(tok), got, want)
			}
		}
	})
}

func TestPropertyServingFollowsTheReceivedRanges(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		before := New(membersGen(6).Draw(t, "before"))
		after := New(membersGen(6).Draw(t, "after"))
		n := rapid.IntRange(1, 3).Draw(t, "n")
		p := NewPlacement(before).Next(after)
		var got []Range
		for range rapid.IntRange(0, 6).Draw(t, "marks") {
			g := Range{tokenGen().Draw(t, "start"), tokenGen().Draw(t, "end")}
			if moves := p.Moves(n); len(moves) > 0 && rapid.Bool().Draw(t, "a moved range") {
				g = rapid.SampledFrom(moves).Draw(t, "move").Range
			}
			p = p.Received(g)
			got = append(got, g)
		}
		var probes []Token
		for range 20 {
			probes = append(probes, tokenGen().Draw(t, "token"))
		}
		for _, g := range got {
			probes = append(probes, g.Start, g.Start+1, g.End, g.End+1)
		}
		for _, tok := range probes {
			in := slices.ContainsFunc(got, func(g Range) bool { return g.Contains(tok) })
			want, wantErr := before.Owner(tok, n, nil)
			if !p.InHandoff() || in {
				want, wantErr = after.Owner(tok, n, nil)
			}
			if m, err := p.Serving(tok, n, nil); m != want || err != wantErr {
				t.Fatalf("Serving(%#x) with received %v = %v, %v; want %v, %v", uint64(tok), got, m, err, want, wantErr)
			}
		}
	})
}
