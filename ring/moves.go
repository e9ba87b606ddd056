package ring

import "slices"

// Range is an arc of the ring: the tokens after Start up to and including
// End, walking clockwise, so it may wrap past the largest token to zero. A
// Range with Start == End is the whole ring. Every token in a Range has the
// same replicas, because they all share the same next virtual node.
type Range struct {
	Start, End Token
}

// Contains reports whether t lies in the range.
func (g Range) Contains(t Token) bool {
	switch {
	case g.Start < g.End:
		return g.Start < t && t <= g.End
	case g.Start > g.End:
		return t > g.Start || t <= g.End
	default:
		return true
	}
}

// Move is a range whose replicas differ between two rings: Before in the
// earlier ring, After in the later one, each in walk order (primary first).
// A range whose replicas are the same members in another order also moves,
// since its primary changes.
type Move struct {
	Range  Range
	Before []NodeID
	After  []NodeID
}

// Moves returns the ranges whose first n replicas differ between before and
// after, disjoint, ordered by End from the smallest token (only the first may
// wrap past zero), adjacent ranges with the same change merged. Handoff uses it to find what each member must send and
// receive when the member set changes. Either ring may be nil (empty); n < 1
// gives no moves.
func Moves(before, after *Ring, n int) []Move {
	if n < 1 || (before.Len() == 0 && after.Len() == 0) {
		return nil
	}
	bounds := make([]Token, 0, before.vnodeCount()+after.vnodeCount())
	for _, r := range []*Ring{before, after} {
		if r != nil {
			for _, v := range r.vnodes {
				bounds = append(bounds, v.token)
			}
		}
	}
	slices.Sort(bounds)
	bounds = slices.Compact(bounds)

	// Segment i is (bounds[i-1], bounds[i]], segment 0 wrapping around;
	// within a segment both rings have the same next virtual node.
	var moves []Move
	var b, a []NodeID // scratch, copied only into new moves
	for i, end := range bounds {
		start := bounds[(i+len(bounds)-1)%len(bounds)]
		b = before.AppendReplicas(b[:0], end, n)
		a = after.AppendReplicas(a[:0], end, n)
		if slices.Equal(a, b) {
			continue
		}
		if k := len(moves) - 1; k >= 0 && moves[k].Range.End == start &&
			slices.Equal(moves[k].Before, b) && slices.Equal(moves[k].After, a) {
			moves[k].Range.End = end
			continue
		}
		moves = append(moves, Move{Range: Range{Start: start, End: end}, Before: slices.Clone(b), After: slices.Clone(a)})
	}
	// The last move may continue into the first across the wrap.
	if k := len(moves) - 1; k > 0 && moves[k].Range.End == moves[0].Range.Start &&
		slices.Equal(moves[k].Before, moves[0].Before) && slices.Equal(moves[k].After, moves[0].After) {
		moves[0].Range.Start = moves[k].Range.Start
		moves = moves[:k]
	}
	return moves
}
