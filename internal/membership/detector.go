package membership

import (
	"maps"
	"slices"
	"time"

	"github.com/troupe-go/troupe/ring"
)

// The failure detector judges members by elapsed silence. It watches only
// the active neighbours and the members it is probing; verdicts about
// everyone else arrive by gossip.
//
// Evidence of life is the last membership message from the process (sent by
// the loop that owns placement) or, up to DeadAfter beyond that, the last
// bytes of any kind from its address (fed by Heard). Silence is measured
// from the later of that evidence and the moment this node started watching
// the process.
//
// Verdicts: after SuspectAfter of silence an observer marks the member
// suspect and adds itself to the record's accusers; after SuspectAfter +
// DeadAfter it declares the member dead, provided the record carries enough
// accusers (see needed). Both timeouts stretch by (1 + health) when this
// node doubts itself, and a node that hears nobody, or whose own ticks ran
// late, accuses no one.

// maxProbes bounds outstanding probes: one starts per Heartbeat and each
// lasts at most until its target is dead.
func (c *Core) maxProbes() int {
	return int((c.t.SuspectAfter+c.t.DeadAfter)/c.t.Heartbeat) + 2
}

// evidence returns the last sign of life from id.
func (c *Core) evidence(id ring.NodeID) time.Time {
	ev := c.lastFrame[id]
	if b := c.lastBytes[id.Addr]; !ev.IsZero() && b.After(ev) {
		ev = minTime(b, ev.Add(c.t.DeadAfter))
	}
	return ev
}

// silence is how long id has been silent while watched.
func (c *Core) silence(id ring.NodeID) time.Duration {
	base := c.evidence(id)
	if w := c.watchFrom[id]; w.After(base) {
		base = w
	}
	return c.now.Sub(base)
}

// needed is the number of distinct accusers required before id is declared
// dead: Confirmations, capped by the number of other live members that
// could observe it, and never below one. In a three-node cluster both
// survivors must agree; in a two-node cluster the survivor decides alone.
func (c *Core) needed(id ring.NodeID) int {
	// Possible observers: every live member (this node included) but id.
	observers := c.alive + c.leaving + c.suspects
	if c.liveRecord(id) {
		observers--
	}
	return max(1, min(c.cfg.Confirmations, observers))
}

func (c *Core) canAccuse() bool {
	return c.joined && !c.isolated && !c.now.Before(c.quietUntil)
}

func (c *Core) stretch() time.Duration { return time.Duration(1 + c.health) }

// detect issues suspicions and death verdicts for watched members.
func (c *Core) detect() {
	if !c.canAccuse() {
		return
	}
	suspectAfter := c.t.SuspectAfter * c.stretch()
	deadAfter := c.t.DeadAfter * c.stretch()
	watched := slices.Clone(c.active)
	for _, p := range c.probes {
		watched = append(watched, p.id)
	}
	for _, id := range watched {
		m, ok := c.table.Get(id)
		if !ok || !(live(m.Status) || m.Status == StatusSuspect) {
			continue
		}
		s := c.silence(id)
		if s < suspectAfter {
			continue
		}
		m = c.accuse(m, s)
		if s >= suspectAfter+deadAfter && m.Status == StatusSuspect && len(m.Accusers) >= c.needed(id) {
			rec := m.Clone()
			rec.Status = StatusDead
			c.counts.Deaths++
			c.log.Info("declaring member dead", "member", id.String(), "silence", s, "accusers", m.Accusers)
			c.applyLocal(rec)
		}
	}
	c.detectUnreachable(deadAfter)
}

// Unreachable reports that the transport's dial to the process id failed,
// at time at, after its connection broke without a goodbye: the port
// refuses, or nothing answers. That is evidence, as silence is, and
// counts as this node's accusation at once: the member becomes suspect
// with this node among its accusers. If nothing is heard from the process
// for DeadAfter after the failed dial (stretched like every timeout while
// this node doubts itself), and the record carries enough accusers, this
// node declares it dead; a member whose process is gone is so dead about
// DeadAfter after it went instead of SuspectAfter + DeadAfter. Like any
// suspicion it is refuted by the member itself, at a higher incarnation,
// and a single flaky dial cannot kill: death still needs Confirmations
// accusers. A node that doubts itself (see canAccuse) ignores the report.
func (c *Core) Unreachable(id ring.NodeID, at time.Time) {
	if c.removed || id == c.self.ID || !c.canAccuse() {
		return
	}
	m, ok := c.table.Get(id)
	if !ok || !(live(m.Status) || m.Status == StatusSuspect) || c.heardSince(id, at) {
		return
	}
	if _, ok := c.unreachable[id]; !ok {
		c.unreachable[id] = at
	}
	c.accuse(m, "dial failed")
	c.updateStanding()
	c.flush()
}

// heardSince reports whether anything came from id after at.
func (c *Core) heardSince(id ring.NodeID, at time.Time) bool {
	return c.lastFrame[id].After(at) || c.lastBytes[id.Addr].After(at)
}

// accuse adds this node to the accusers of m, making it suspect, unless
// the suspicion already carries enough accusers: further names would
// only spread more gossip. It returns the record as it now stands.
func (c *Core) accuse(m Member, why any) Member {
	if m.Status == StatusSuspect && (slices.Contains(m.Accusers, c.self.ID.Addr) || len(m.Accusers) >= c.needed(m.ID)) {
		return m
	}
	rec := m.Clone()
	rec.Status = StatusSuspect
	rec.Accusers = append(rec.Accusers, c.self.ID.Addr)
	c.counts.Suspicions++
	c.log.Info("suspecting member", "member", m.ID.String(), "evidence", why)
	c.applyLocal(rec)
	c.demoteSuspect(m.ID)
	m, _ = c.table.Get(m.ID)
	return m
}

// detectUnreachable declares dead the members a dial failed to reach
// (Unreachable) that stayed silent for DeadAfter since, once their
// records carry enough accusers. A member heard from again, or refuted
// (no longer suspect), is forgotten here; silence may accuse it again.
func (c *Core) detectUnreachable(deadAfter time.Duration) {
	if len(c.unreachable) == 0 {
		return
	}
	// In NodeID order: the verdicts' order is the core's output.
	for _, id := range slices.SortedFunc(maps.Keys(c.unreachable), ring.NodeID.Compare) {
		at := c.unreachable[id]
		m, ok := c.table.Get(id)
		if !ok || m.Status != StatusSuspect || c.heardSince(id, at) {
			delete(c.unreachable, id)
			continue
		}
		if c.now.Sub(at) >= deadAfter && len(m.Accusers) >= c.needed(id) {
			rec := m.Clone()
			rec.Status = StatusDead
			c.counts.Deaths++
			c.log.Info("declaring member dead", "member", id.String(), "unreachable_for", c.now.Sub(at), "accusers", m.Accusers)
			delete(c.unreachable, id)
			c.applyLocal(rec)
		}
	}
}

// demoteSuspect moves a neighbour this node suspects from the active view
// to the probes, where it is still watched (its silence keeps counting
// from the same start) while a replacement neighbour is found. Without
// this, a partition would leave each side's overlay fragmented until the
// far side is declared dead, and verdicts would spread slowly.
func (c *Core) demoteSuspect(id ring.NodeID) {
	if !c.inActive(id) {
		return
	}
	c.dropActive(id, false)
	if !slices.ContainsFunc(c.probes, func(p pending) bool { return p.id == id }) {
		c.probes = append(c.probes, pending{id: id, since: c.watchFrom[id]})
	}
}

// applyLocal merges a record this node produced about another member.
func (c *Core) applyLocal(rec Member) {
	for _, ch := range c.table.Apply(rec) {
		c.onChange(ch)
	}
}

// probe starts a probe of the least-recently-heard live member that is not
// a neighbour, and pings every outstanding probe. Without it, members whose
// neighbours all sit across a partition would be kept alive forever by the
// absence of verdicts.
func (c *Core) probe() {
	if len(c.probes) < c.maxProbes() {
		if id, ok := c.leastRecentlyHeard(); ok {
			c.probes = append(c.probes, pending{id: id, since: c.now})
			c.watchFrom[id] = c.now
		}
	}
	for _, p := range c.probes {
		c.send(p.id.Addr, Message{Type: MsgPing, To: p.id, Records: c.piggyback()})
	}
}

func (c *Core) leastRecentlyHeard() (ring.NodeID, bool) {
	n := c.table.Len()
	if n == 0 {
		return ring.NodeID{}, false
	}
	var best ring.NodeID
	var bestAt time.Time
	found := false
	start := c.rng.IntN(n)
	for i := range n {
		m := &c.table.recs[(start+i)%n]
		if !(live(m.Status) || m.Status == StatusSuspect) || m.ID == c.self.ID {
			continue
		}
		ev := c.lastFrame[m.ID]
		if found && !ev.Before(bestAt) {
			continue
		}
		if c.inActive(m.ID) || slices.ContainsFunc(c.probes, func(p pending) bool { return p.id == m.ID }) {
			continue
		}
		best, bestAt, found = m.ID, ev, true
		if ev.IsZero() {
			break // never heard: nothing is older
		}
	}
	return best, found
}

// noteLateTick accounts for this node's own loop running late (CPU
// starvation, a pause). While the loop did not run it could not hear, and
// what peers sent meanwhile is still queued behind this tick, so:
//
//   - every gap beyond twice the usual tick interval (at least
//     Heartbeat/4) is credited to the watched peers: their silence is
//     measured without the time this node was deaf;
//   - a gap beyond 2×Heartbeat also raises the health score (stretching
//     timeouts) and silences accusations for SuspectAfter.
func (c *Core) noteLateTick(now time.Time) {
	if c.lastTick.IsZero() {
		return
	}
	gap := now.Sub(c.lastTick)
	if allowed := max(2*c.usualGap, c.t.Heartbeat/4); gap > allowed {
		c.creditDeafTime(gap - allowed)
	}
	c.usualGap += (min(gap, c.t.Heartbeat) - c.usualGap) / 16
	if gap <= 2*c.t.Heartbeat {
		return
	}
	c.health = min(maxHealth, c.health+2)
	c.quietUntil = now.Add(c.t.SuspectAfter)
	c.setHealthy(false)
}

// creditDeafTime moves the start of every watched peer's silence, and of
// this node's own isolation, forward by d.
func (c *Core) creditDeafTime(d time.Duration) {
	credit := func(id ring.NodeID) {
		base := c.evidence(id)
		if w := c.watchFrom[id]; w.After(base) {
			base = w
		}
		c.watchFrom[id] = base.Add(d)
	}
	for _, id := range c.active {
		credit(id)
	}
	for _, p := range c.probes {
		credit(p.id)
	}
	c.deafBase = c.isolationBase().Add(d)
}

func (c *Core) isolationBase() time.Time {
	base := c.lastAny
	for _, t := range []time.Time{c.joinedAt, c.deafBase} {
		if t.After(base) {
			base = t
		}
	}
	return base
}

// updateHealth runs once per Heartbeat: the score falls while this node
// hears somebody and rises while it hears nobody.
func (c *Core) updateHealth() {
	if c.members <= 1 {
		c.health = 0
	} else if c.now.Sub(c.lastAny) <= 2*c.t.Heartbeat {
		c.health = max(0, c.health-1)
	} else {
		c.health = min(maxHealth, c.health+1)
	}
	c.updateIsolation()
}

// updateIsolation runs on every Tick: a node that has heard nobody for
// SuspectAfter (while there is somebody to hear) is isolated, accuses no
// one and counts only itself towards a majority. Checking it each tick,
// not each Heartbeat, keeps an isolated node's step-down prompt.
func (c *Core) updateIsolation() {
	c.isolated = c.members > 1 && c.now.Sub(c.isolationBase()) > c.t.SuspectAfter
	c.setHealthy(c.health == 0 && !c.isolated && !c.now.Before(c.quietUntil))
}

func (c *Core) setHealthy(h bool) {
	if h == c.healthy {
		return
	}
	c.healthy = h
	c.emit(Event{Kind: EventLocalHealth, Healthy: h})
	if h {
		c.log.Info("local health restored")
	} else {
		c.log.Info("doubting local observations", "health", c.health, "isolated", c.isolated)
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
