package system_test

import (
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/system"
)

// TestTenMembersAgreeOnEveryOwnerAndServeThere starts ten members on
// loopback and asks 200 keys from every one of them: each member must
// place each key on the same owner, and the reply must come from that
// owner, from one activation (the count grows by one per member).
func TestTenMembersAgreeOnEveryOwnerAndServeThere(t *testing.T) {
	const n, keys = 10, 200
	start := time.Now()
	systems := startCluster(t, n)
	t.Logf("%d members up and converged in %v", n, time.Since(start).Round(time.Millisecond))
	start = time.Now()
	served := map[string]int{}
	for i := range keys {
		key := "ten-" + strconv.Itoa(i)
		owner := system.OwnerOf(systems[0], "ccounter", key)
		for j, s := range systems {
			if got := system.OwnerOf(s, "ccounter", key); got != owner {
				t.Fatalf("%s: member %d (%s) places it on %s, member 0 on %s", key, j, s.Addr(), got, owner)
			}
		}
		ctx := ctxT(t)
		for j, s := range systems {
			ref := ccounter.Ref(s, key)
			if err := ref.Tell(ctx, Add{N: 1}); err != nil {
				t.Fatalf("%s: tell from member %d: %v", key, j, err)
			}
			// The ask follows the tell from the same sender on the same
			// key; the earlier members' tells were answered already.
			got, err := actor.Ask(ctx, ref, Get{})
			if err != nil {
				t.Fatalf("%s: ask from member %d: %v", key, j, err)
			}
			if got.Node != owner {
				t.Fatalf("%s: asked from member %d, served by %s, owner is %s", key, j, got.Node, owner)
			}
			if got.Count != j+1 {
				t.Fatalf("%s: asked from member %d, count %d, want %d (one activation counting every member's tell)", key, j, got.Count, j+1)
			}
		}
		served[owner]++
	}
	if len(served) != n {
		t.Fatalf("keys served by %d members, want all %d: %v", len(served), n, served)
	}
	t.Logf("%d keys x %d members: tell+ask in %v", keys, n, time.Since(start).Round(time.Millisecond))
	counts := slices.Sorted(maps.Values(served))
	t.Logf("%d keys over %d members: fewest %d, most %d per member", keys, n, counts[0], counts[len(counts)-1])
}
