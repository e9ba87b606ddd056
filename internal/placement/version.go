package placement

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"slices"

	"github.com/troupe-go/troupe/ring"
)

// tag starts the digested bytes: the admin API's revision, a digest of
// another kind, starts with 'R', so the two are never spelt alike.
const tag = 'P'

// Version returns the placement version of rings (each actor type's full
// ring, dead members included), where serves reports whether a ring
// member takes keys (alive or suspected). It returns the same token for
// the same types, rings and serving members, however the map was built.
func Version(rings map[string]*ring.Ring, serves func(ring.NodeID) bool) string {
	types := make([]string, 0, len(rings))
	for t := range rings {
		types = append(types, t)
	}
	slices.Sort(types)
	b := []byte{tag}
	b = binary.BigEndian.AppendUint64(b, uint64(len(types)))
	var down []ring.NodeID
	for _, t := range types {
		b = appendString(b, t)
		v := rings[t].Version()
		b = append(b, v[:]...)
		for _, m := range rings[t].Members() {
			if !serves(m) {
				down = append(down, m)
			}
		}
	}
	slices.SortFunc(down, ring.NodeID.Compare)
	down = slices.Compact(down)
	b = binary.BigEndian.AppendUint64(b, uint64(len(down)))
	for _, m := range down {
		b = appendString(b, m.Addr)
		b = binary.BigEndian.AppendUint64(b, m.Incarnation)
	}
	return Digest(b)
}

// Digest returns the 128-bit hex token of b: the first half of its
// SHA-256. Callers digest a canonical encoding that starts with a tag of
// their own, so that tokens of different kinds never collide by
// construction.
func Digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:16])
}

func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}
