package cluster

import "time"

// Majority standing. A node owns non-pinned actors only while it sees a
// majority of the member set alive (alive or leaving; suspect and dead
// members do not count, and an isolated node counts only itself). When it
// stops seeing one, it keeps owning for a grace of DeadAfter/2, so that
// observations that briefly cross the threshold do not end activations,
// then steps down; it resumes as soon as it sees a majority again. Peers
// declare a silent node dead no sooner than SuspectAfter + DeadAfter after
// its silence began, and it loses their majority no later than SuspectAfter
// after, so the grace leaves DeadAfter/2 for the step-down to finish first.

func (c *Core) hasMajority() bool {
	alive := c.seenAlive
	if c.isolated {
		alive = 0
		if c.self.Status.SeenAlive() {
			alive = 1
		}
	}
	return 2*alive > c.members
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
		c.log.Info("majority lost", "seen_alive", c.seenAlive, "members", c.members, "isolated", c.isolated)
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
