package membership

import "slices"

// PlanChanges returns the sequence of member sets that leads from the
// applied set from to the target set to, one member per step: every joiner
// first, in NodeID order, then every departure, in NodeID order. Each set
// in the result is sorted. Every node computes the same plan from the same
// two sets, whatever order they are given in; placement applies one step,
// hands over, then the next.
func PlanChanges(from, to []NodeID) [][]NodeID {
	cur := sortedIDs(from)
	target := sortedIDs(to)
	var joins, leaves []NodeID
	for _, id := range target {
		if _, ok := slices.BinarySearchFunc(cur, id, NodeID.Compare); !ok {
			joins = append(joins, id)
		}
	}
	for _, id := range cur {
		if _, ok := slices.BinarySearchFunc(target, id, NodeID.Compare); !ok {
			leaves = append(leaves, id)
		}
	}
	steps := make([][]NodeID, 0, len(joins)+len(leaves))
	for _, id := range joins {
		i, _ := slices.BinarySearchFunc(cur, id, NodeID.Compare)
		cur = slices.Insert(slices.Clone(cur), i, id)
		steps = append(steps, cur)
	}
	for _, id := range leaves {
		i, _ := slices.BinarySearchFunc(cur, id, NodeID.Compare)
		cur = slices.Delete(slices.Clone(cur), i, i+1)
		steps = append(steps, cur)
	}
	return steps
}

func sortedIDs(ids []NodeID) []NodeID {
	out := slices.Clone(ids)
	slices.SortFunc(out, NodeID.Compare)
	return slices.Compact(out)
}
