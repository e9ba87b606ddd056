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
// soon as the node has also joined and sees a majority, at a new
// membership incarnation gossiped like any announcement.
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
	c.self.Joining = false
	c.updateSelf(c.self.Status)
	c.log.Info("ready: taking keys", "record", c.self.String())
}

// formAloneAfter is how long a node listed among its own seeds asks the
// others before it forms a cluster alone: long enough for a seed that
// starts at the same time to answer, short against a join timeout.
func (c *Core) formAloneAfter() time.Duration { return 2 * c.t.SuspectAfter }

// formAlone ends the wait of a node listed among its own seeds whose other
// seeds did not answer: it forms a cluster of its own. probeKnown keeps
// asking the seeds, and the clusters merge when they meet.
func (c *Core) formAlone() {
	c.log.Warn("no other seed answered; forming a new cluster alone (it merges with theirs once they answer)",
		"seeds", c.seeds, "waited", c.formAloneAfter())
	c.markJoined()
}

// knownProbeEvery is how often one address is probed by probeKnown.
func (c *Core) knownProbeEvery() time.Duration { return c.t.SuspectAfter }

// probeKnown sends a full table to one address that this node knows of
// (a seed, or the address of a record it holds) but where it knows no
// live process: a process that started there since, alone or in another
// cluster of the same name, merges tables with this one. One address per
// Heartbeat, each at most every knownProbeEvery.
func (c *Core) probeKnown() {
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
