package membership

import (
	"slices"

	"github.com/troupe-go/troupe/ring"
)

// The overlay is a HyParView-style pair of views. The active view (about
// ActiveView members, kept symmetric) is who this node pings every
// Heartbeat and pushes gossip to; the passive view (about PassiveView
// members) holds replacements. Because every node holds the full table,
// the passive view is refreshed by sampling the table rather than by
// HyParView's shuffle walks.

func (c *Core) inActive(id ring.NodeID) bool { return slices.Contains(c.active, id) }

func (c *Core) addActive(id ring.NodeID) {
	if id == c.self.ID || c.inActive(id) {
		return
	}
	c.active = append(c.active, id)
	c.passive = slices.DeleteFunc(c.passive, func(o ring.NodeID) bool { return o == id })
	c.pendingNb = slices.DeleteFunc(c.pendingNb, func(p pending) bool { return p.id == id })
	// Watching starts now: a new neighbour gets a full SuspectAfter.
	c.watchFrom[id] = c.now
}

// dropActive removes id from the active view; toPassive keeps it as a
// replacement candidate.
func (c *Core) dropActive(id ring.NodeID, toPassive bool) {
	if !c.inActive(id) {
		return
	}
	c.active = slices.DeleteFunc(c.active, func(o ring.NodeID) bool { return o == id })
	if toPassive && !slices.Contains(c.passive, id) {
		c.passive = append(c.passive, id)
		if len(c.passive) > c.cfg.PassiveView {
			c.passive = c.passive[1:]
		}
	}
}

// evictOne removes a random active neighbour to make room, telling it so.
func (c *Core) evictOne() {
	if len(c.active) == 0 {
		return
	}
	victim := c.active[c.rng.IntN(len(c.active))]
	c.dropActive(victim, true)
	c.send(victim.Addr, Message{Type: MsgDisconnect, To: victim})
}

func (c *Core) onNeighbourRequest(from ring.NodeID, priority bool) {
	if !c.liveRecord(from) {
		c.send(from.Addr, Message{Type: MsgNeighbourReply, To: from, Accept: false})
		return
	}
	if !c.inActive(from) {
		if len(c.active) >= c.cfg.ActiveView {
			if !priority {
				c.send(from.Addr, Message{Type: MsgNeighbourReply, To: from, Accept: false})
				return
			}
			c.evictOne()
		}
		c.addActive(from)
	}
	c.send(from.Addr, Message{Type: MsgNeighbourReply, To: from, Accept: true, Records: []Member{c.self.Clone()}})
}

func (c *Core) onNeighbourReply(from ring.NodeID, accept bool) {
	c.pendingNb = slices.DeleteFunc(c.pendingNb, func(p pending) bool { return p.id == from })
	if !accept || c.inActive(from) {
		return
	}
	if len(c.active) >= c.cfg.ActiveView || !c.liveRecord(from) {
		c.send(from.Addr, Message{Type: MsgDisconnect, To: from})
		return
	}
	c.addActive(from)
}

// peerCallsUsNeighbour keeps the views symmetric: a peer that pings us as
// its neighbour becomes ours if there is room, and is told otherwise.
func (c *Core) peerCallsUsNeighbour(from ring.NodeID) {
	if c.inActive(from) {
		return
	}
	if len(c.active) < c.cfg.ActiveView && c.liveRecord(from) {
		c.addActive(from)
		return
	}
	c.send(from.Addr, Message{Type: MsgDisconnect, To: from})
}

// liveRecord reports whether id is a known member that is alive, leaving
// or suspect.
func (c *Core) liveRecord(id ring.NodeID) bool {
	m, ok := c.table.Get(id)
	return ok && (live(m.Status) || m.Status == StatusSuspect)
}

// maintainOverlay drops dead neighbours, asks replacements when the active
// view is short, and refills the passive view from the table.
func (c *Core) maintainOverlay() {
	c.pendingNb = slices.DeleteFunc(c.pendingNb, func(p pending) bool {
		return c.now.Sub(p.since) > 2*c.t.Heartbeat
	})
	c.passive = slices.DeleteFunc(c.passive, func(id ring.NodeID) bool {
		m, ok := c.table.Get(id)
		return !ok || !live(m.Status)
	})
	for len(c.passive) < c.cfg.PassiveView {
		id, ok := c.randomMember(func(m Member) bool {
			return m.ID != c.self.ID && live(m.Status) && !c.inActive(m.ID) && !slices.Contains(c.passive, m.ID)
		})
		if !ok {
			break
		}
		c.passive = append(c.passive, id)
	}
	want := c.cfg.ActiveView - len(c.active) - len(c.pendingNb)
	for range max(0, want) {
		id, ok := c.neighbourCandidate()
		if !ok {
			break
		}
		c.pendingNb = append(c.pendingNb, pending{id: id, since: c.now})
		c.send(id.Addr, Message{Type: MsgNeighbour, To: id, Priority: len(c.active) == 0, Records: []Member{c.self.Clone()}})
	}
}

func (c *Core) neighbourCandidate() (ring.NodeID, bool) {
	isPending := func(id ring.NodeID) bool {
		return slices.ContainsFunc(c.pendingNb, func(p pending) bool { return p.id == id })
	}
	var cands []ring.NodeID
	for _, id := range c.passive {
		if !c.inActive(id) && !isPending(id) {
			cands = append(cands, id)
		}
	}
	if len(cands) > 0 {
		return cands[c.rng.IntN(len(cands))], true
	}
	return c.randomMember(func(m Member) bool {
		return m.ID != c.self.ID && live(m.Status) && !c.inActive(m.ID) && !isPending(m.ID)
	})
}
