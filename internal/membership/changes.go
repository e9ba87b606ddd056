package membership

import (
	"slices"

	"github.com/troupe-go/troupe/ring"
)

// PlanChanges returns the sequence of member sets that leads from the
// applied set from to the target set to, one member per step: every joiner
// first, in NodeID order, then every departure, in NodeID order. Each set
// in the result is sorted. Every node computes the same plan from the same
// two sets, whatever order they are given in; placement applies one step,
// hands over, then the next.
func PlanChanges(from, to []ring.NodeID) [][]ring.NodeID {
	cur := sortedIDs(from)
	target := sortedIDs(to)
	var joins, leaves []ring.NodeID
	for _, id := range target {
		if _, ok := slices.BinarySearchFunc(cur, id, ring.NodeID.Compare); !ok {
			joins = append(joins, id)
		}
	}
	for _, id := range cur {
		if _, ok := slices.BinarySearchFunc(target, id, ring.NodeID.Compare); !ok {
			leaves = append(leaves, id)
		}
	}
	steps := make([][]ring.NodeID, 0, len(joins)+len(leaves))
	for _, id := range joins {
		i, _ := slices.BinarySearchFunc(cur, id, ring.NodeID.Compare)
		cur = slices.Insert(slices.Clone(cur), i, id)
		steps = append(steps, cur)
	}
	for _, id := range leaves {
		i, _ := slices.BinarySearchFunc(cur, id, ring.NodeID.Compare)
		cur = slices.Delete(slices.Clone(cur), i, i+1)
		steps = append(steps, cur)
	}
	return steps
}

func sortedIDs(ids []ring.NodeID) []ring.NodeID {
	out := slices.Clone(ids)
	slices.SortFunc(out, ring.NodeID.Compare)
	return slices.Compact(out)
}
