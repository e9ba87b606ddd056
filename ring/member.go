package ring

import (
	"cmp"
	"strconv"
	"strings"
)

// Member is a node identity as the ring sees it: the address peers use to
// reach the node and the incarnation of its process. A restarted process at
// the same address is a different Member, with different virtual nodes.
type Member struct {
	// Addr is the advertised address, exactly as the node announces it
	// (before any address_map translation).
	Addr string
	// Incarnation identifies one process lifetime; it changes on restart.
	Incarnation uint64
}

// Compare orders members canonically: by address bytes, then by
// incarnation. It returns -1, 0 or +1. Every node sorts members this way, so
// the canonical member list and the placement version agree everywhere.
func (m Member) Compare(o Member) int {
	if c := strings.Compare(m.Addr, o.Addr); c != 0 {
		return c
	}
	return cmp.Compare(m.Incarnation, o.Incarnation)
}

// String returns "addr#incarnation", for logs.
func (m Member) String() string {
	return m.Addr + "#" + strconv.FormatUint(m.Incarnation, 10)
}
