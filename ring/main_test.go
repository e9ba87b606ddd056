package ring

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// seededMembers returns n distinct members with addresses and incarnations
// drawn from a PCG seeded with seed, so every run sees the same cluster.
func seededMembers(seed uint64, n int) []NodeID {
	rng := rand.New(rand.NewPCG(seed, 0x7472_6f75_7065))
	seen := make(map[NodeID]bool, n)
	ms := make([]NodeID, 0, n)
	for len(ms) < n {
		m := NodeID{
			Addr:        fmt.Sprintf("10.%d.%d.%d:7400", rng.IntN(256), rng.IntN(256), rng.IntN(256)),
			Incarnation: rng.Uint64(),
		}
		if !seen[m] {
			seen[m] = true
			ms = append(ms, m)
		}
	}
	return ms
}

// seededKeyTokens returns the tokens of k keys of one actor type.
func seededKeyTokens(k int) []Token {
	ts := make([]Token, k)
	for i := range ts {
		ts[i] = KeyToken("counter", fmt.Sprintf("key-%d", i))
	}
	return ts
}

// shares returns each member's exact fraction of the token space as primary,
// indexed like r.members.
func shares(r *Ring) []float64 {
	var s []float64
	for _, sh := range r.Shares() {
		s = append(s, sh.Ratio)
	}
	return s
}

// ringOfPositions builds a ring whose virtual nodes are exactly the given
// positions, named by member address, bypassing the digests. It lets a test
// state a walk as a picture: tokens 10, 20, 30... in the order given.
func ringOfPositions(addrs ...string) *Ring {
	index := map[string]int32{}
	var ms []NodeID
	for _, a := range addrs {
		if _, ok := index[a]; !ok {
			index[a] = int32(len(ms))
			ms = append(ms, NodeID{Addr: a})
		}
	}
	vs := make([]vnode, len(addrs))
	for i, a := range addrs {
		vs[i] = vnode{token: Token(10 * (i + 1)), owner: index[a]}
	}
	return assemble(ms, vs)
}

func allLive(NodeID) bool { return true }

func liveExcept(dead ...NodeID) Liveness {
	return func(m NodeID) bool {
		for _, d := range dead {
			if m == d {
				return false
			}
		}
		return true
	}
}

// tokensOf returns the ring's positions in order.
func tokensOf(r *Ring) []Token {
	ts := make([]Token, len(r.vnodes))
	for i, v := range r.vnodes {
		ts[i] = v.token
	}
	return ts
}
