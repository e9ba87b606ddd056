// Package ring places actors on cluster members with a consistent-hash ring.
//
// The ring is a pure value: no goroutines, clocks, sockets or locks. Every
// node, and every Client that is not a member, computes the same ring from the
// same member set, so any of them can route a message to a key's owner
// without asking anyone. The runtime uses it to route every message; use
// it directly to predict where a key lives:
//
//	r := ring.New(members)             // members: []ring.NodeID
//	t := ring.KeyToken("counter", "page-views")
//	owner, err := r.Owner(t, 1, alive) // alive: a ring.Liveness
//
// # Members and virtual nodes
//
// A member is named by its NodeID: its advertised address and the
// incarnation of its process. NodeID is the node identity throughout
// Troupe (membership records, the transport, routing); it lives here, in
// the package that imports nothing of Troupe, so every layer can use it.
// Each member occupies VirtualNodes (128) positions on the ring, so load
// spreads evenly and a change of one member moves about 1/N of the keys. A
// restarted process has a new incarnation and therefore new positions.
//
// # Tokens, byte by byte
//
// A position is a Token: the first 8 bytes, read as a big-endian unsigned
// integer, of the BLAKE2b-512 digest (RFC 7693, no key, 64-byte output) of an
// input built as below. Note that this is a truncated BLAKE2b-512 digest, not
// BLAKE2b with an 8-byte output length, which is a different function. Every
// integer is 8 bytes big-endian; strings are their raw bytes (UTF-8 as given,
// no normalisation) preceded by their length in bytes.
//
//	virtual node i (0..127) of member m:
//	    0x76 ('v')
//	    len(m.Addr)      8 bytes
//	    m.Addr
//	    m.Incarnation    8 bytes
//	    i                8 bytes
//
//	key k of actor type a:
//	    0x6B ('k')
//	    len(a)           8 bytes
//	    a
//	    len(k)           8 bytes
//	    k
//
// The leading tag keeps the kinds of input apart, and the length prefixes keep
// ("ab", "c") apart from ("a", "bc"). In Python:
//
//	def token(data): return int.from_bytes(hashlib.blake2b(data).digest()[:8], "big")
//	token(b"k" + (7).to_bytes(8, "big") + b"counter" + (10).to_bytes(8, "big") + b"page-views")
//	# 0x640316e0dc1f435c
//
// The golden tests pin these values; a change to any input byte moves every
// key in every deployed cluster, so it needs a new ring scheme, not an edit.
//
// # Order and ties
//
// Positions are sorted by token. Two members at the same token (a 64-bit
// collision) are ordered by the canonical member order: address bytes, then
// incarnation (NodeID.Compare). New therefore gives the same ring whatever
// order its members arrive in, and With and Without give the ring New would.
//
// # Replicas and owners
//
// A key's replicas are found by walking clockwise from its token, starting at
// the first position at or after it and wrapping past the largest token,
// collecting distinct members and skipping further positions of members
// already chosen. With positions A1 A2 B1 A3 C1 after a key, three replicas
// are A, B, C. The count is capped by the number of members.
//
// The owner is the first replica, in that order, that the caller's membership
// view holds alive or suspect (a Liveness). A dead member stays in the ring,
// and in the replica sets, until membership removes it: shrinking the ring on
// suspicion would let each side of a partition compute smaller replica sets
// and acknowledge writes independently. When a primary dies, ownership passes
// to the next replica; the replica set itself does not change.
//
// # Placement version
//
// A Version is the first 16 bytes of the BLAKE2b-512 digest of the canonical
// member set:
//
//	0x72 ('r')
//	128 (VirtualNodes)   8 bytes
//	number of members    8 bytes
//	then, for each member in canonical order:
//	    len(Addr)        8 bytes
//	    Addr
//	    Incarnation      8 bytes
//
// Versions are compared for equality only: a Client learns from a differing
// Version that its cached ring is stale, never which ring is newer.
//
// # Handoff and the preceding ring
//
// When the member set changes, the keys of some ranges get new replicas, and
// their state has to travel there. Moves lists the ranges whose replicas
// changed between two rings, with the replicas before and after, for handoff
// to plan what to send where. A Placement holds the current ring and, until
// the caller settles it, the ring before the change. Serving routes a key by
// the previous ring until the caller marks its range Received, and by the
// current ring after; OwnerBefore and OwnerNow answer for each ring alone. A
// new replica does not hold a moved range before it is received and must not
// count toward a quorum for it until then.
//
// # Cost
//
// Lookups do not allocate; an owner lookup from a token takes well under
// 150 ns at 100 members, and hashing a key (one BLAKE2b-512 compression,
// about 200 ns) costs more than that, so refs compute their key's token
// once. Building a ring digests 128 positions per member (about 3 ms for
// 100 members, which take about 270 KB); With and Without reuse the
// positions of the members that stay.
//
// # Known gaps
//
//   - Balance is statistical: with 128 random positions per member, a
//     member's share of the keys varies by about 9% (one standard deviation)
//     and the busiest member of a ring carries about 1.2 times the mean,
//     sometimes up to 1.35. For the same reason a single join or leave moves
//     more than 1.2 K/N keys in about 1% of clusters. Weights or bounded-load
//     placement are not provided.
//   - Moves compares ordered replica lists; it does not say which of the old
//     replicas should send a range. That choice belongs to handoff.
//   - Placement remembers one previous ring: a second change before the first
//     handoff settles forgets the older ring.
//   - The ring does not validate addresses, and knows nothing of pinned
//     actors, which bypass it.
//   - No decoder lives here (a Version travels as its 16 bytes), so there is
//     nothing to fuzz but the key encoding, which FuzzKeyToken covers.
package ring
