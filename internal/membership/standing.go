package membership

import (
	"time"

	"github.com/troupe-go/troupe/ring"
)

// Majority standing. A node owns non-pinned actors only while it sees a
// majority of the member set alive: more than half of the members not
// leaving are alive (suspect and dead members count against it, and an
// isolated node counts only itself). Leaving members count on neither
// side: they still hand over, but they are going, so they must not make
// a majority. A leaver counts itself as alive, so it keeps owning what it
// has not handed over yet. Two sides that disagree on who is leaving still cannot
// both hold a majority (docs/membership.md gives the count). When it
// stops seeing one, it keeps owning for a grace of DeadAfter/2, so that
// observations that briefly cross the threshold do not end activations,
// then steps down; it resumes as soon as it sees a majority again. Peers
// declare a silent node dead no sooner than SuspectAfter + DeadAfter after
// its silence began, and it loses their majority no later than SuspectAfter
// after, so the grace leaves DeadAfter/2 for the step-down to finish first.
//
// That bound must hold while this node doubts itself: its suspicions then
// stretch by (1 + health) (see detect), but peers that do not doubt
// themselves still declare it dead SuspectAfter + DeadAfter after its
// silence began. So the members this node watches count against its
// majority once silent for SuspectAfter, unstretched, whatever their
// status says (silentWatched). Found by a netns test under load: a
// two-member minority, doubting itself, kept owning for 2.9 s while the
// majority had moved its keys at 2.5 s.

func (c *Core) hasMajority() bool {
	alive, leaving := c.alive, c.leaving
	if c.self.Status == StatusLeaving {
		// A leaver keeps counting itself while it hands over: its keys
		// still need an owner until they have moved.
		alive, leaving = alive+1, leaving-1
	}
	if c.isolated {
		alive = 0
		if live(c.self.Status) {
			alive = 1
		}
	} else {
		alive -= c.silentWatched()
	}
	return 2*alive > c.members-leaving
}

// silentWatched counts the members seen alive that this node watches
// (active neighbours and probes) and has not heard from for SuspectAfter.
func (c *Core) silentWatched() int {
	n := 0
	count := func(id ring.NodeID) {
		if m, ok := c.table.Get(id); ok && m.Status.SeenAlive() && c.silence(id) >= c.t.SuspectAfter {
			n++
		}
	}
	for _, id := range c.active {
		count(id)
	}
	for _, p := range c.probes {
		if !c.inActive(p.id) {
			count(p.id)
		}
	}
	return n
}

func (c *Core) updateStanding() {
	if c.removed || !c.joined {
		c.setOwning(false)
		return
	}
	if c.hasMajority() {
		c.lostSince = time.Time{}
		if c.majoritySince.IsZero() {
			c.majoritySince = c.now
		}
		c.setOwning(true)
		return
	}
	c.majoritySince = time.Time{}
	if c.lostSince.IsZero() {
		c.lostSince = c.now
		c.log.Info("majority lost", "alive", c.alive, "leaving", c.leaving, "members", c.members, "isolated", c.isolated)
	}
	if c.owning && c.now.Sub(c.lostSince) >= c.t.DeadAfter/2 {
		c.setOwning(false)
	}
}

func (c *Core) setOwning(o bool) {
	if o == c.owning {
		return
	}
	c.owning = o
	c.emit(Event{Kind: EventStanding, Owning: o})
	c.log.Info("standing changed", "owning", o)
}
