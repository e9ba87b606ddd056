package membership

import (
	"slices"
	"time"
)

// Joining and meeting: when a member becomes routable, when a member with
// seeds gives up waiting for them, and how clusters that formed apart find
// each other. docs/membership.md ("Joining" and "Merging") argues why the
// rules are safe.

// HoldUntilReady makes this node's record say Joining until the runtime
// calls MarkReady (and the node has joined and sees a majority), so that
// nobody routes to it before its own view is in place. Call it before the
// first Tick or Step. Without it the record never says Joining.
func (c *Core) HoldUntilReady() {
	c.gateReady = true
	c.self.Joining = true
	c.table.set(c.self.Clone())
}

// MarkReady tells the core that the runtime has installed the view the
// core published and may take keys. The record stops saying Joining as
// soon as the node has also joined, sees a majority and knows another
// member that takes keys (unless it founds the cluster: see mayFound), at
// a new membership incarnation gossiped like any announcement.
func (c *Core) MarkReady() error {
	if c.removed {
		return ErrRemoved
	}
	c.readyAsked = true
	c.maybeReady()
	c.flush()
	return nil
}

// Routable reports whether this node's record no longer says Joining.
func (c *Core) Routable() bool { return !c.self.Joining }

// maybeReady clears Joining once every condition holds.
func (c *Core) maybeReady() {
	if !c.self.Joining || !c.readyAsked || !c.joined || !c.owning || c.removed {
		return
	}
	if !c.founder && !c.seesPlacedMember() {
		if !c.waitLogged {
			c.waitLogged = true
			c.log.Info("joined; taking no keys until a member that takes them is known: a new cluster starts at the smallest address of the seed list",
				"first", firstSeed(c.cfg.Seeds))
		}
		return
	}
	c.self.Joining = false
	c.updateSelf(c.self.Status)
	c.log.Info("ready: taking keys", "record", c.self.String())
}

// mayFound reports whether a node advertising addr with seeds may be the
// first member of a cluster to take keys: with no seeds besides itself, or
// as the smallest address of a seed list that names it. Every other node
// takes keys only once it knows a member that already does.
//
// Why: members that start together each join whichever seed answers, so
// for a while each may know only some of the others. Were every member
// free to take keys while it saw no other member doing so, two of them
// could each place every key on a ring of their own and acknowledge
// replicated writes the other never sees (two quorums of one). With one
// founder per seed list the rings grow from one member, a step at a time,
// as for any join (TestMembersStartedTogetherAgreeOnOneFirstRing).
func mayFound(addr string, seeds []string) bool {
	others := false
	for _, s := range seeds {
		others = others || s != addr
	}
	return !others || (slices.Contains(seeds, addr) && firstSeed(seeds) == addr)
}

// firstSeed is the smallest address of seeds: the one that starts a new
// cluster whatever order each member lists them in.
func firstSeed(seeds []string) string {
	if len(seeds) == 0 {
		return ""
	}
	return slices.Min(seeds)
}

// seesPlacedMember reports whether the table holds a member, other than
// this process, that takes keys or did (dead members stay in the rings).
func (c *Core) seesPlacedMember() bool {
	found := false
	c.table.each(func(m Member) {
		if m.ID.Addr != c.self.ID.Addr && !m.Joining && m.Status != StatusLeft && m.Status != StatusLeaving {
			found = true
		}
	})
	return found
}

// knownProbeEvery is how often one address is probed by probeKnown.
func (c *Core) knownProbeEvery() time.Duration { return c.t.SuspectAfter }

// probeKnown sends a full table to one address that this node knows of
// (a seed, or the address of a record it holds) but where it knows no
// live process: a process that started there since with no seeds (a
// seed's first command) formed a cluster of its own, and merges tables
// with this one. Only a node that owns probes (a minority must not
// recruit); one address per Heartbeat, each at most every
// knownProbeEvery; and in a cluster of more than ten only about ten nodes
// try per Heartbeat, as reconnect does, so an address that stays dark
// sees a few probes per Heartbeat in all, not one from every member.
func (c *Core) probeKnown() {
	if !c.owning {
		return
	}
	if c.members > 10 && c.rng.IntN(c.members) >= 10 {
		return
	}
	manned := map[string]bool{c.self.ID.Addr: true}
	var addrs []string
	c.table.each(func(m Member) {
		if m.Status == StatusAlive || m.Status == StatusLeaving || m.Status == StatusSuspect {
			manned[m.ID.Addr] = true
		} else {
			addrs = append(addrs, m.ID.Addr)
		}
	})
	addrs = append(addrs, c.seeds...)
	slices.Sort(addrs)
	addrs = slices.Compact(addrs)
	for k := range c.lastKnownProbe {
		if manned[k] || !slices.Contains(addrs, k) {
			delete(c.lastKnownProbe, k)
		}
	}
	for _, a := range addrs {
		if manned[a] {
			continue
		}
		if at, ok := c.lastKnownProbe[a]; ok && c.now.Sub(at) < c.knownProbeEvery() {
			continue
		}
		c.lastKnownProbe[a] = c.now
		c.send(a, Message{Type: MsgSync, Records: c.fullTable()})
		return
	}
}
