package wire

import (
	"cmp"
	"strconv"
)

// NodeID names one process lifetime of a node: the address other nodes
// dial (as advertised, before any AddressMap translation) and the process
// incarnation, which changes on every restart. A restarted node with the
// same address is a different NodeID, so what its previous life had
// received is never assumed. A client, which nobody dials, has an empty
// Addr.
type NodeID struct {
	Addr        string `msgpack:"addr"`
	Incarnation uint64 `msgpack:"inc"`
}

// String formats the identity as addr#incarnation.
func (n NodeID) String() string { return n.Addr + "#" + strconv.FormatUint(n.Incarnation, 10) }

// IsZero reports whether n is the zero identity.
func (n NodeID) IsZero() bool { return n == NodeID{} }

// Compare orders identities by incarnation, then address. The simultaneous
// dial rule keeps the connection dialed by the smaller identity.
func (n NodeID) Compare(o NodeID) int {
	if c := cmp.Compare(n.Incarnation, o.Incarnation); c != 0 {
		return c
	}
	return cmp.Compare(n.Addr, o.Addr)
}
