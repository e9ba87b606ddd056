package ring

import (
	"cmp"
	"strconv"
	"strings"
)

// NodeID names one process lifetime of a node: the address other nodes dial
// (as advertised, before any address map translation) and the incarnation
// of the process, a number it picks at start and never reuses. A restarted
// process at the same address is a different NodeID, with different virtual
// nodes, so nothing its previous life held or received is assumed. A client,
// which nobody dials, has an empty Addr.
//
// NodeIDs travel in membership messages and transport handshakes as a
// msgpack map with the keys "addr" and "inc".
type NodeID struct {
	// Addr is the advertised address, exactly as the node announces it.
	Addr string `msgpack:"addr"`
	// Incarnation identifies one process lifetime; it changes on restart.
	Incarnation uint64 `msgpack:"inc"`
}

// String returns "addr#incarnation", for logs and for the redirect hints
// that carry an identity as text.
func (n NodeID) String() string {
	return n.Addr + "#" + strconv.FormatUint(n.Incarnation, 10)
}

// IsZero reports whether n is the zero identity, which names no node.
func (n NodeID) IsZero() bool { return n == NodeID{} }

// Compare orders identities canonically: by address bytes, then by
// incarnation. It returns -1, 0 or +1. Every node sorts identities this
// way, so the canonical member list and the placement version agree
// everywhere.
func (n NodeID) Compare(o NodeID) int {
	if c := strings.Compare(n.Addr, o.Addr); c != 0 {
		return c
	}
	return cmp.Compare(n.Incarnation, o.Incarnation)
}
