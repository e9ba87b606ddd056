package replica

import (
	"cmp"
	"slices"
	"sort"

	"github.com/troupe-go/troupe/ring"
)

// tokenIndex lists a core's keys in token order, for the scans of a
// range (a fence, HighestTerm). A hand-off fences hundreds of ranges, and
// a pass over every key per fence held the node's loop for a fifth of a
// source's CPU. A core never forgets a key, so the index only grows: the
// keys added since the last scan wait in fresh and are merged in at the
// next one, which therefore costs at most a pass over the keys, as the
// scan of every key did, and a binary search when no key was added.
type tokenIndex struct {
	sorted []*keyState // by token
	fresh  []*keyState // added since the last merge, in no order
}

func (x *tokenIndex) add(ks *keyState) { x.fresh = append(x.fresh, ks) }

// each calls f for every key whose token lies in g.
func (x *tokenIndex) each(g ring.Range, f func(*keyState)) {
	x.merge()
	switch {
	case g.Start < g.End:
		x.span(g.Start, g.End, f)
	case g.Start > g.End: // it wraps: (Start, max] and [0, End]
		x.span(g.Start, ^ring.Token(0), f)
		for _, ks := range x.sorted {
			if ks.token > g.End {
				break
			}
			f(ks)
		}
	default: // the whole ring
		for _, ks := range x.sorted {
			f(ks)
		}
	}
}

// span calls f for the keys whose token lies in (from, to].
func (x *tokenIndex) span(from, to ring.Token, f func(*keyState)) {
	s := x.sorted
	i := sort.Search(len(s), func(i int) bool { return s[i].token > from })
	for ; i < len(s) && s[i].token <= to; i++ {
		f(s[i])
	}
}

// merge moves the fresh keys into sorted, in place from the back.
func (x *tokenIndex) merge() {
	if len(x.fresh) == 0 {
		return
	}
	slices.SortFunc(x.fresh, func(a, b *keyState) int { return cmp.Compare(a.token, b.token) })
	n, m := len(x.sorted), len(x.fresh)
	x.sorted = slices.Grow(x.sorted, m)[:n+m]
	i, j := n-1, m-1
	for k := n + m - 1; j >= 0; k-- {
		if i >= 0 && x.sorted[i].token > x.fresh[j].token {
			x.sorted[k] = x.sorted[i]
			i--
		} else {
			x.sorted[k] = x.fresh[j]
			j--
		}
	}
	clear(x.fresh)
	x.fresh = x.fresh[:0]
}
