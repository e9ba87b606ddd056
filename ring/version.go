package ring

import (
	"encoding/binary"
	"encoding/hex"

	"golang.org/x/crypto/blake2b"
)

// Version identifies a ring by its member set. Two rings have the same
// Version exactly when they have the same members (barring a 128-bit digest
// collision), whatever order the members were given in. A Client compares the
// Version a member reports with its own to learn whether its cached ring is
// current. Compare Versions with == only: the bytes carry no order, and a
// larger value is not a newer ring.
type Version [16]byte

// String returns the Version in lowercase hexadecimal.
func (v Version) String() string { return hex.EncodeToString(v[:]) }

// versionOf digests members, which must be in canonical order without
// duplicates.
func versionOf(members []NodeID) Version {
	size := 1 + 8 + 8
	for _, m := range members {
		size += 8 + len(m.Addr) + 8
	}
	in := make([]byte, 0, size)
	in = append(in, tagVersion)
	in = binary.BigEndian.AppendUint64(in, VirtualNodes)
	in = binary.BigEndian.AppendUint64(in, uint64(len(members)))
	for _, m := range members {
		in = binary.BigEndian.AppendUint64(in, uint64(len(m.Addr)))
		in = append(in, m.Addr...)
		in = binary.BigEndian.AppendUint64(in, m.Incarnation)
	}
	sum := blake2b.Sum512(in)
	var v Version
	copy(v[:], sum[:len(v)])
	return v
}
