package membership

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestRandomFaultsThenHealConverge runs random scripts of kills,
// restarts, partitions, pauses and loss on small clusters, then heals
// everything (restarting removed processes, as a runtime would) and
// expects every live process to agree on one member set, see every other
// live process alive, and own again. No process may ever
// declare a process dead that was never stopped, paused or cut off.
func TestRandomFaultsThenHealConverge(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(3, 7).Draw(rt, "nodes")
		seed := rapid.Uint64().Draw(rt, "seed")
		s := newSim(t, simOptions{seed: seed, mem: MemOptions{MinDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond}})
		addrs := s.cluster(n)
		faulted := make(map[string]bool)
		steps := rapid.IntRange(1, 6).Draw(rt, "steps")
		for i := range steps {
			a := addrs[rapid.IntRange(0, n-1).Draw(rt, fmt.Sprintf("who%d", i))]
			switch rapid.IntRange(0, 5).Draw(rt, fmt.Sprintf("op%d", i)) {
			case 0:
				if !s.nodes[a].down {
					s.kill(a)
					faulted[a] = true
				}
			case 1:
				if s.nodes[a].down {
					s.start(a, addrs[0], addrs[1])
				}
			case 2:
				cut := rapid.IntRange(1, n-1).Draw(rt, fmt.Sprintf("cut%d", i))
				s.net.Partition(addrs[:cut], addrs[cut:])
				for _, x := range addrs {
					faulted[x] = true
				}
			case 3:
				s.net.Heal()
			case 4:
				if !s.nodes[a].down && !s.nodes[a].paused {
					s.pause(a)
					faulted[a] = true
				}
			case 5:
				if s.nodes[a].paused {
					s.resume(a)
				}
			}
			s.net.SetDropRate(rapid.SampledFrom([]float64{0, 0, 0.05}).Draw(rt, fmt.Sprintf("loss%d", i)))
			// Mostly short steps, sometimes longer than RemoveAfter so that
			// removals happen too.
			beats := rapid.OneOf(rapid.IntRange(1, 30), rapid.IntRange(60, 90)).Draw(rt, fmt.Sprintf("run%d", i))
			s.run(time.Duration(beats) * fast.Heartbeat)
		}
		// Heal: reconnect, resume, restart whatever was removed or killed.
		s.net.Heal()
		s.net.SetDropRate(0)
		for _, a := range addrs {
			if s.nodes[a].paused {
				s.resume(a)
			}
		}
		s.run(20 * fast.Heartbeat)
		for _, a := range addrs {
			if n := s.nodes[a]; n.down || n.core.Removed() {
				s.kill(a)
				s.start(a, addrs...)
			}
		}
		live := func() []string {
			var out []string
			for _, n := range s.live() {
				out = append(out, n.addr)
			}
			return out
		}
		d, ok := s.until(fast.RemoveAfter+fast.TombstoneTTL, func() bool {
			// A runtime restarts a removed process with a new incarnation.
			for _, a := range addrs {
				if n := s.nodes[a]; !n.down && n.core.Removed() {
					s.kill(a)
					s.start(a, addrs...)
				}
			}
			l := live()
			if !s.allSee(l, l, StatusAlive) {
				return false
			}
			want := s.nodes[l[0]].core.MemberSet()
			for _, a := range l {
				c := s.nodes[a].core
				if !c.Owning() || !slices.Equal(c.MemberSet(), want) {
					return false
				}
			}
			return true
		})
		if !ok {
			var views string
			for _, a := range live() {
				c := s.nodes[a].core
				views += fmt.Sprintf("\n  %s owning=%v removed=%v: %v", a, c.Owning(), c.Removed(), c.Members())
			}
			rt.Fatalf("expected every live process to agree on one member set, all alive and owning, after healing; not after %v:%s", d, views)
		}
		for _, a := range addrs {
			for _, b := range addrs {
				if a == b || faulted[b] {
					continue
				}
				if s.everDeclared(a, s.nodes[b].core.ID(), StatusDead) {
					rt.Fatalf("expected no false death: %s declared %s dead though it was never stopped, paused or cut off", a, b)
				}
			}
		}
	})
}
