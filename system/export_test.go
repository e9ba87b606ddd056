package system

import "github.com/troupe-go/troupe/ring"

// OwnerOf returns the address of the member s believes serves typ/key.
func OwnerOf(s *System, typ, key string) string {
	id, _, err := s.m.router.Dest(typ, key, uint64(ring.KeyToken(typ, key)))
	if err != nil {
		return "error: " + err.Error()
	}
	return id.Addr
}

// RingOwnerOf returns the address of key's first replica on s's ring of
// typ: where the key lives once what moved has settled (OwnerOf follows
// the router, which keeps a moving key on its old owner while that one
// still runs it).
func RingOwnerOf(s *System, typ, key string) string {
	r := s.m.router.Ring(typ)
	if r == nil {
		return "no ring of " + typ
	}
	return r.AppendReplicas(nil, ring.KeyToken(typ, key), 1)[0].Addr
}

// ForceRejoin makes a clustered s rejoin with a new incarnation, as if the
// cluster had removed it.
func ForceRejoin(s *System) {
	select {
	case s.m.force <- struct{}{}:
	default:
	}
}

// HandoffOpen reports whether s, a member, may still hold messages to its
// own keys (a hand-off window is open, or a key is held): until it does
// not, they may go through its router rather than in process.
func HandoffOpen(s *System) bool { return s.m.router.HandoffOpen() }

// ReplicasOf returns the addresses of the n replicas of typ/key as s
// places them, in ring order (the first is the owner while it is up).
func ReplicasOf(s *System, typ, key string, n int) []string {
	ids, err := s.m.router.Replicas(nil, typ, uint64(ring.KeyToken(typ, key)), n)
	if err != nil {
		return []string{"error: " + err.Error()}
	}
	addrs := make([]string, len(ids))
	for i, id := range ids {
		addrs[i] = id.Addr
	}
	return addrs
}
