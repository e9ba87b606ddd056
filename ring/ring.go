package ring

import (
	"cmp"
	"math"
	"slices"
)

// Ring is an immutable consistent-hash ring over a set of members. Build one
// with New, or derive one from another with With and Without. A nil *Ring is
// the empty ring. A Ring is safe for concurrent use: nothing in it changes
// after construction.
type Ring struct {
	members []NodeID // canonical order, no duplicates
	vnodes  []vnode  // sorted by token; a token and its member share a cache line
	version Version

	// bucket[p] is the index of the first position whose top bits are at
	// least p, for p up to 2^bits (a power of two at least len(vnodes)), so
	// a search narrows to about one position with one load.
	bucket []uint32
	shift  uint // 64 - bits
}

// vnode is one virtual node: a position and the index of its member.
type vnode struct {
	token Token
	owner int32
}

// compareVNodes orders virtual nodes by token and breaks ties by the
// canonical order of their members, so equal tokens sort alike everywhere.
// Two equal tokens of one member need no order: they name the same member.
func compareVNodes(a, b vnode) int {
	if c := cmp.Compare(a.token, b.token); c != 0 {
		return c
	}
	return cmp.Compare(a.owner, b.owner)
}

// New returns the ring of members. The order of members does not matter and
// duplicates count once: the same set gives the same ring on every node.
// New does not validate addresses; membership does.
func New(members []NodeID) *Ring {
	ms := slices.Clone(members)
	slices.SortFunc(ms, NodeID.Compare)
	ms = slices.Compact(ms)
	vs := make([]vnode, 0, len(ms)*VirtualNodes)
	var toks []Token
	for i, m := range ms {
		toks = appendVNodeTokens(toks[:0], m)
		for _, t := range toks {
			vs = append(vs, vnode{token: t, owner: int32(i)})
		}
	}
	slices.SortFunc(vs, compareVNodes)
	return assemble(ms, vs)
}

func assemble(members []NodeID, vs []vnode) *Ring {
	r := &Ring{members: members, vnodes: vs}
	r.finish()
	return r
}

// finish derives the version and the bucket index once members, tokens and
// owners are in place.
func (r *Ring) finish() {
	r.version = versionOf(r.members)
	r.indexBuckets()
}

func (r *Ring) indexBuckets() {
	bits := uint(1)
	for 1<<bits < len(r.vnodes) {
		bits++
	}
	r.shift = 64 - bits
	r.bucket = make([]uint32, 1<<bits+1)
	i := 0
	for p := range 1 << bits {
		for i < len(r.vnodes) && uint64(r.vnodes[i].token)>>r.shift < uint64(p) {
			i++
		}
		r.bucket[p] = uint32(i)
	}
	r.bucket[1<<bits] = uint32(len(r.vnodes))
}

// With returns the ring with m added, or r itself if m is already a member.
// It reuses r's positions instead of digesting every member again, and gives
// exactly the ring New would give for the same set.
func (r *Ring) With(m NodeID) *Ring {
	pos, found := r.index(m)
	if found {
		return r
	}
	ms := slices.Insert(r.Members(), pos, m)
	add := make([]vnode, 0, VirtualNodes)
	for _, t := range appendVNodeTokens(make([]Token, 0, VirtualNodes), m) {
		add = append(add, vnode{token: t, owner: int32(pos)})
	}
	slices.SortFunc(add, compareVNodes)
	size := r.vnodeCount() + len(add)
	next := &Ring{members: ms, vnodes: make([]vnode, 0, size)}
	i, j := 0, 0
	for i < r.vnodeCount() || j < len(add) {
		if i < r.vnodeCount() {
			old := r.vnodes[i]
			if old.owner >= int32(pos) {
				old.owner++
			}
			if j == len(add) || compareVNodes(old, add[j]) <= 0 {
				next.vnodes = append(next.vnodes, old)
				i++
				continue
			}
		}
		next.vnodes = append(next.vnodes, add[j])
		j++
	}
	next.finish()
	return next
}

// Without returns the ring with m removed, or r itself if m is not a member.
func (r *Ring) Without(m NodeID) *Ring {
	pos, found := r.index(m)
	if !found {
		return r
	}
	ms := slices.Delete(slices.Clone(r.members), pos, pos+1)
	size := r.vnodeCount() - VirtualNodes
	next := &Ring{members: ms, vnodes: make([]vnode, 0, size)}
	for _, v := range r.vnodes {
		switch {
		case v.owner == int32(pos):
			continue
		case v.owner > int32(pos):
			v.owner--
		}
		next.vnodes = append(next.vnodes, v)
	}
	next.finish()
	return next
}

func (r *Ring) index(m NodeID) (int, bool) {
	if r == nil {
		return 0, false
	}
	return slices.BinarySearchFunc(r.members, m, NodeID.Compare)
}

func (r *Ring) vnodeCount() int {
	if r == nil {
		return 0
	}
	return len(r.vnodes)
}

// Len returns the number of members.
func (r *Ring) Len() int {
	if r == nil {
		return 0
	}
	return len(r.members)
}

// Contains reports whether m is a member of the ring.
func (r *Ring) Contains(m NodeID) bool {
	_, found := r.index(m)
	return found
}

// Members returns a copy of the members in canonical order (see
// NodeID.Compare).
func (r *Ring) Members() []NodeID {
	if r == nil {
		return nil
	}
	return slices.Clone(r.members)
}

// Version returns the placement version of the ring's member set.
func (r *Ring) Version() Version {
	if r == nil {
		return versionOf(nil)
	}
	return r.version
}

// Share is a member's fraction of the token space as primary.
type Share struct {
	Node NodeID
	// Ratio is from 0 to 1: the arcs that end at Node's positions, in
	// float64 (exact up to its rounding).
	Ratio float64
}

// Shares returns each member's share of the token space as primary (the
// arcs that end at its positions), one per member in the order of
// Members: what an operator reads as "how much of the ring does this
// member own". The ratios sum to 1, up to rounding; nil for the empty
// ring. It walks every position, so it is for reports, not for the
// message path.
func (r *Ring) Shares() []Share {
	if r.Len() == 0 {
		return nil
	}
	s := make([]Share, len(r.members))
	for i, m := range r.members {
		s[i].Node = m
	}
	for i, v := range r.vnodes {
		prev := r.vnodes[(i+len(r.vnodes)-1)%len(r.vnodes)].token
		s[v.owner].Ratio += float64(uint64(v.token-prev)) / math.Exp2(64)
	}
	return s
}

// successor returns the index of the first virtual node at or clockwise
// after t. The ring must not be empty.
func (r *Ring) successor(t Token) int {
	p := uint64(t) >> r.shift
	lo, hi := int(r.bucket[p]), int(r.bucket[p+1])
	if hi-lo > 8 { // rare: a crowded bucket
		i, _ := slices.BinarySearchFunc(r.vnodes[lo:hi], t, func(v vnode, t Token) int { return cmp.Compare(v.token, t) })
		lo += i
	} else {
		for lo < hi && r.vnodes[lo].token < t {
			lo++
		}
	}
	if lo == len(r.vnodes) {
		return 0
	}
	return lo
}

// seenWords is how many 64-bit words of "already chosen" marks a replica walk
// keeps on the stack: rings of up to 1024 members walk without allocating.
const seenWords = 16

// AppendReplicas appends to dst the first n distinct members met walking
// clockwise from t, skipping further virtual nodes of members already chosen,
// and returns the extended slice. Fewer than n are appended when the ring has
// fewer members; none when n < 1. The first appended member is the key's
// primary. With room in dst and at most 1024 members it does not allocate.
func (r *Ring) AppendReplicas(dst []NodeID, t Token, n int) []NodeID {
	n = min(n, r.Len())
	if n < 1 {
		return dst
	}
	i := r.successor(t)
	first := r.vnodes[i].owner
	dst = append(dst, r.members[first])
	if n == 1 {
		return dst
	}
	var stack [seenWords]uint64
	seen := r.marks(&stack)
	seen[first>>6] |= 1 << (first & 63)
	for got := 1; got < n; {
		o := r.nextDistinct(&i, seen)
		dst = append(dst, r.members[o])
		got++
	}
	return dst
}

// marks returns zeroed "already chosen" marks for r's members: stack when
// it is large enough, else a new slice.
func (r *Ring) marks(stack *[seenWords]uint64) []uint64 {
	if len(r.members) > 64*seenWords {
		return make([]uint64, (len(r.members)+63)/64)
	}
	return stack[:]
}

// nextDistinct advances *i clockwise to the next virtual node whose member
// seen has not marked, marks that member and returns its index.
func (r *Ring) nextDistinct(i *int, seen []uint64) int32 {
	for {
		if *i++; *i == len(r.vnodes) {
			*i = 0
		}
		o := r.vnodes[*i].owner
		if seen[o>>6]&(1<<(o&63)) == 0 {
			seen[o>>6] |= 1 << (o & 63)
			return o
		}
	}
}

// Liveness reports whether a member may own keys: true while the caller's
// membership view holds it alive or suspect, false once it is dead. The ring
// keeps dead members until membership removes them; Liveness is how the
// caller's view reaches the ring without the ring holding any state. A nil
// Liveness treats every member as live.
type Liveness func(NodeID) bool

// Owner returns the owner of t among its first n replicas: the first of them,
// in walk order, that live accepts. n is the key's replica count; when the
// primary is dead, ownership passes to the next replica without changing the
// replica set. Owner does not allocate for rings of up to 1024 members
// (beyond what live does).
//
// It returns ErrReplicaCount if n < 1, ErrEmptyRing if the ring has no
// members and ErrNoLiveReplica if no replica is live.
func (r *Ring) Owner(t Token, n int, live Liveness) (NodeID, error) {
	switch {
	case n < 1:
		return NodeID{}, ErrReplicaCount
	case r.Len() == 0:
		return NodeID{}, ErrEmptyRing
	}
	n = min(n, len(r.members))
	i := r.successor(t)
	first := r.vnodes[i].owner
	if live == nil || live(r.members[first]) {
		return r.members[first], nil
	}
	if n == 1 {
		return NodeID{}, ErrNoLiveReplica
	}
	var stack [seenWords]uint64
	seen := r.marks(&stack)
	seen[first>>6] |= 1 << (first & 63)
	for got := 1; got < n; {
		o := r.nextDistinct(&i, seen)
		if live(r.members[o]) {
			return r.members[o], nil
		}
		got++
	}
	return NodeID{}, ErrNoLiveReplica
}
