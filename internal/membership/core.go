package membership

import (
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/troupe-go/troupe/ring"
)

// Core is the deterministic membership state machine of one node. It has
// no goroutines, clock or sockets: the runtime feeds it time (Tick), the
// messages it receives (Step) and when bytes last arrived from a peer
// (Heard), and after each call drains Ready to learn what to send and
// report. Given the same config, seed and inputs it produces the same
// outputs.
//
// A Core is not safe for concurrent use; the runtime calls it from the one
// loop that owns placement, which is also what makes its periodic pings
// prove that loop is not wedged.
type Core struct {
	cfg Config
	t   Timings
	log *slog.Logger
	rng *rand.Rand

	self    Member
	table   *Table
	since   map[ring.NodeID]time.Time // when this node saw the record take its status
	removed bool
	counts  Counts

	now, started, lastTick time.Time
	nextHeartbeat          time.Time
	nextAntiEntropy        time.Time

	seeds      []string
	joined     bool
	seedsAsked bool // a join went to every seed at least once

	// Readiness and meeting (joining.go).
	gateReady  bool // HoldUntilReady was called
	readyAsked bool // MarkReady was called
	// founder: this node may take keys while it knows no other member
	// that does (see mayFound); waitLogged: it said once that it waits.
	founder, waitLogged bool
	lastKnownProbe      map[string]time.Time

	// Liveness evidence.
	lastFrame map[ring.NodeID]time.Time // last membership message from the process
	lastBytes map[string]time.Time      // last bytes of any kind from the address
	watchFrom map[ring.NodeID]time.Time // when this node started watching the process
	lastAny   time.Time                 // last evidence from anyone

	// Overlay.
	active    []ring.NodeID
	passive   []ring.NodeID
	pendingNb []pending

	// Failure detector.
	// unreachable holds, per process, when a dial to it failed after its
	// connection broke, while nothing was heard from it since (Unreachable).
	unreachable map[ring.NodeID]time.Time
	probes      []pending
	health      int
	quietUntil  time.Time
	usualGap    time.Duration // smoothed interval between ticks
	deafBase    time.Time     // isolation clock, moved forward by deaf time
	healthy     bool

	gossip *broadcasts
	seq    uint64

	// Standing.
	// Counts of the records by status: alive, leaving and suspect ones,
	// and the member set (every record not left).
	alive, leaving, suspects, members int
	isolated                          bool
	joinedAt                          time.Time
	owning                            bool
	lostSince                         time.Time
	majoritySince                     time.Time // when this node last started seeing a majority

	memberSetDirty bool
	changedAt      map[ring.NodeID]int // index into out.Changed
	out            Ready
}

type pending struct {
	id    ring.NodeID
	since time.Time
}

// maxHealth caps the local-health score; timeouts stretch by up to
// (1+maxHealth)×.
const maxHealth = 8

// NewCore returns the core of the process that advertises cfg.Advertise
// with process incarnation incarnation, starting at now. It validates cfg.
// If cfg.Seeds names other addresses, the core joins through them on its
// first Tick; otherwise it forms a cluster of its own.
func NewCore(cfg Config, incarnation uint64, now time.Time) (*Core, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	id := ring.NodeID{Addr: cfg.Advertise, Incarnation: incarnation}
	seed := cfg.RandSeed
	if seed == 0 {
		h := fnv.New64a()
		fmt.Fprint(h, id.String())
		seed = h.Sum64()
	}
	c := &Core{
		cfg:       cfg,
		t:         cfg.Timings,
		log:       cfg.Logger.With("node", id.String()),
		rng:       rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		table:     NewTable(),
		since:     make(map[ring.NodeID]time.Time),
		now:       now,
		started:   now,
		lastFrame: make(map[ring.NodeID]time.Time),
		lastBytes: make(map[string]time.Time),
		watchFrom: make(map[ring.NodeID]time.Time),
		changedAt: make(map[ring.NodeID]int),
		gossip:    newBroadcasts(),
		healthy:   true,

		lastKnownProbe: make(map[string]time.Time),
		unreachable:    make(map[ring.NodeID]time.Time),
	}
	c.self = Member{ID: id, Status: StatusAlive, ActorTypes: cfg.ActorTypes}
	normalize(&c.self)
	c.table.set(c.self.Clone())
	c.since[id] = now
	c.account(Member{}, c.self, true)
	for _, s := range cfg.Seeds {
		if s != cfg.Advertise && !slices.Contains(c.seeds, s) {
			c.seeds = append(c.seeds, s)
		}
	}
	c.joined = len(c.seeds) == 0
	c.founder = mayFound(cfg.Advertise, cfg.Seeds)
	if !c.founder && len(c.seeds) > 0 && !slices.Contains(cfg.Seeds, cfg.Advertise) {
		// Addresses compare as written: a list that names this member
		// by another spelling (a host name, say) makes no founder of it.
		c.log.Info("the seed list does not name this member's advertised address: it founds no cluster and waits for a member that takes keys",
			"advertise", cfg.Advertise, "seeds", cfg.Seeds)
	}
	if c.joined {
		c.log.Info("no seeds besides this node: starting a new cluster")
	}
	c.joinedAt = now
	c.owning = c.joined
	c.memberSetDirty = true
	// Desynchronise periodic work across nodes started together.
	c.nextHeartbeat = now
	c.usualGap = c.t.Heartbeat / 4
	c.nextAntiEntropy = now.Add(time.Duration(c.rng.Int64N(int64(c.t.AntiEntropy))))
	return c, nil
}

// ID returns this process's identity.
func (c *Core) ID() ring.NodeID { return c.self.ID }

// Self returns this node's own record.
func (c *Core) Self() Member { return c.self.Clone() }

// Member returns the record for id.
func (c *Core) Member(id ring.NodeID) (Member, bool) {
	m, ok := c.table.Get(id)
	return m.Clone(), ok
}

// Members returns every record, tombstones included, sorted by NodeID.
func (c *Core) Members() []Member { return c.table.Records() }

// Counts are what a core's failure detector did since it started, for
// metrics: each counts this node's own acts, not the verdicts it learned.
type Counts struct {
	// Suspicions counts the accusations this node made: a member it found
	// silent (or a dial to it failed) became suspect with this node among
	// its accusers.
	Suspicions uint64
	// Refutations counts the verdicts about this node (suspect, dead) it
	// refuted by raising its incarnation.
	Refutations uint64
	// Deaths counts the members this node declared dead.
	Deaths uint64
}

// Counts returns what the failure detector did so far.
func (c *Core) Counts() Counts { return c.counts }

// MemberSet returns the current target member set (every member not left),
// sorted by NodeID.
func (c *Core) MemberSet() []ring.NodeID {
	var ids []ring.NodeID
	c.table.each(func(m Member) {
		if m.Status.InMemberSet() {
			ids = append(ids, m.ID)
		}
	})
	slices.SortFunc(ids, ring.NodeID.Compare)
	return ids
}

// Owning reports whether this node may own non-pinned actors: it has
// joined, has not been removed, and has seen a majority of the member set
// alive at least once within the last DeadAfter/2.
func (c *Core) Owning() bool { return c.owning }

// Healthy reports whether this node trusts its own observations: it hears
// from somebody and its ticks arrive on time. An unhealthy node stretches
// its timeouts and accuses no one.
func (c *Core) Healthy() bool { return c.healthy }

// Joined reports whether the node has learned the table from a seed (or
// needs none).
func (c *Core) Joined() bool { return c.joined }

// Removed reports whether this process was marked left.
func (c *Core) Removed() bool { return c.removed }

// Neighbours returns the active view, the members this node pings every
// Heartbeat and gossips to.
func (c *Core) Neighbours() []ring.NodeID { return slices.Clone(c.active) }

// Ready returns what the runtime must do and clears it.
func (c *Core) Ready() Ready {
	if c.memberSetDirty {
		c.out.MemberSet = c.MemberSet()
		if c.out.MemberSet == nil {
			c.out.MemberSet = []ring.NodeID{}
		}
		c.memberSetDirty = false
	}
	r := c.out
	c.out = Ready{}
	clear(c.changedAt)
	return r
}

// noteChanged records m for Ready.Changed, keeping one entry per record.
func (c *Core) noteChanged(m Member) {
	if i, ok := c.changedAt[m.ID]; ok {
		c.out.Changed[i] = m.Clone()
		return
	}
	c.changedAt[m.ID] = len(c.out.Changed)
	c.out.Changed = append(c.out.Changed, m.Clone())
}

// Heard records that bytes of any kind arrived from the peer at addr at
// time at. The runtime feeds it from Transport.LastHeard. Bytes keep a peer
// alive only up to DeadAfter past its last membership message, so a node
// whose transport still streams but whose placement loop is wedged is
// still suspected.
func (c *Core) Heard(addr string, at time.Time) {
	if at.After(c.lastBytes[addr]) {
		c.lastBytes[addr] = at
	}
	if at.After(c.lastAny) {
		c.lastAny = at
	}
}

// StartLeave announces an orderly departure: the record becomes leaving at
// a new incarnation. The runtime then hands over what this node owns and
// calls CompleteLeave.
func (c *Core) StartLeave() error {
	if c.removed {
		return ErrRemoved
	}
	if c.self.Status == StatusLeaving {
		return nil
	}
	c.updateSelf(StatusLeaving)
	c.flush()
	return nil
}

// CompleteLeave marks this node left and pushes that to its neighbours and
// a few other members. Afterwards the core is inert: the runtime sends the
// last Ready and stops.
func (c *Core) CompleteLeave() error {
	if c.removed {
		return ErrRemoved
	}
	c.updateSelf(StatusLeft)
	rec := []Member{c.self.Clone()}
	targets := slices.Clone(c.active)
	for range 3 {
		if id, ok := c.randomMember(func(m Member) bool {
			return live(m.Status) && m.ID != c.self.ID && !slices.Contains(targets, m.ID)
		}); ok {
			targets = append(targets, id)
		}
	}
	for _, id := range targets {
		c.send(id.Addr, Message{Type: MsgGossip, To: id, Records: rec})
	}
	c.markRemoved()
	return nil
}

// updateSelf raises the membership incarnation and sets status.
func (c *Core) updateSelf(st Status) {
	prev := c.self.Status
	c.self.Incarnation++
	c.self.Status = st
	normalize(&c.self)
	c.table.set(c.self.Clone())
	c.account(Member{ID: c.self.ID, Status: prev}, c.self, false)
	c.since[c.self.ID] = c.now
	c.memberSetDirty = c.memberSetDirty || st == StatusLeft
	c.noteChanged(c.self)
	c.enqueue(c.self)
	c.emit(Event{Kind: EventMemberUpdated, Member: c.self.Clone(), Prev: prev})
}

func (c *Core) markRemoved() {
	if c.removed {
		return
	}
	c.removed = true
	c.setOwning(false)
	c.emit(Event{Kind: EventRemoved, Member: c.self.Clone()})
	c.log.Info("removed from the cluster", "record", c.self.String())
}

// Tick advances the core's time to now and runs whatever periodic work is
// due: pings and probes each Heartbeat, anti-entropy, suspicion and death
// verdicts, majority standing, removal of dead members and collection of
// tombstones. Call it at least every Heartbeat; more often sharpens
// detection. A time earlier than the last is ignored.
func (c *Core) Tick(now time.Time) {
	if c.removed || now.Before(c.now) || (now.Equal(c.lastTick) && !c.lastTick.IsZero()) {
		return
	}
	c.noteLateTick(now)
	c.now = now
	c.lastTick = now
	if !now.Before(c.nextHeartbeat) {
		c.nextHeartbeat = now.Add(c.t.Heartbeat)
		c.heartbeatRound()
	}
	if c.joined && !now.Before(c.nextAntiEntropy) {
		c.nextAntiEntropy = now.Add(c.t.AntiEntropy)
		c.antiEntropy()
	}
	if c.joined {
		c.updateIsolation()
	}
	c.detect()
	c.updateStanding()
	c.maybeReady()
	c.flush()
}

// Step processes one message received from the network, at the time of
// the last Tick.
func (c *Core) Step(m Message) {
	if c.removed || m.From.Addr == "" || m.From == c.self.ID {
		return
	}
	if !m.To.IsZero() && m.To != c.self.ID {
		// Meant for another lifetime of this address. If for an earlier
		// one, tell the sender who lives here now: the address rule then
		// retires the old process in its table, and a node holding only
		// stale identities finds its way back into the cluster.
		if m.To.Addr == c.self.ID.Addr && m.To.Incarnation < c.self.ID.Incarnation && m.Type != MsgGossip {
			c.send(m.From.Addr, Message{Type: MsgGossip, To: m.From, Records: []Member{c.self.Clone()}})
		}
		return
	}
	if rec, ok := c.table.Get(m.From); ok && rec.Status == StatusLeft {
		// A removed process still talking: tell it, so it stops and its
		// runtime restarts it with a new incarnation. Never answer a gossip
		// message, so two removed records cannot ping-pong.
		if m.Type != MsgGossip {
			c.send(m.From.Addr, Message{Type: MsgGossip, To: m.From, Records: []Member{rec.Clone()}})
		}
		return
	}
	if m.Type == MsgJoin && c.joined && !c.owning {
		// A node without a majority admits no one: otherwise joiners
		// could grow a minority's member set into a majority of its own.
		// The joiner keeps asking its other seeds. A node that never
		// joined admits, so that nodes seeding each other can bootstrap.
		return
	}
	c.lastFrame[m.From] = c.now
	if c.now.After(c.lastAny) {
		c.lastAny = c.now
	}
	c.probes = slices.DeleteFunc(c.probes, func(p pending) bool { return p.id == m.From })
	for _, r := range m.Records {
		c.apply(r)
		if c.removed {
			return
		}
	}
	switch m.Type {
	case MsgJoin:
		c.send(m.From.Addr, Message{Type: MsgJoinReply, To: m.From, Records: c.fullTable()})
	case MsgJoinReply:
		c.markJoined()
	case MsgPing:
		c.send(m.From.Addr, Message{Type: MsgAck, To: m.From, Records: c.piggyback()})
		if m.Neighbour {
			c.peerCallsUsNeighbour(m.From)
		}
	case MsgSync:
		c.send(m.From.Addr, Message{Type: MsgSyncReply, To: m.From, Records: c.fullTable()})
		c.markJoined()
	case MsgSyncReply:
		c.markJoined()
	case MsgNeighbour:
		c.onNeighbourRequest(m.From, m.Priority)
	case MsgNeighbourReply:
		c.onNeighbourReply(m.From, m.Accept)
	case MsgDisconnect:
		c.dropActive(m.From, true)
	}
	c.updateStanding()
	c.maybeReady()
	c.flush()
}

func (c *Core) markJoined() {
	if !c.joined {
		c.joined = true
		c.joinedAt = c.now
		c.emit(Event{Kind: EventJoined, Member: c.self.Clone()})
		c.log.Info("joined", "members", c.members)
	}
}

// apply merges one received record, answering for itself when the record
// is about this process.
func (c *Core) apply(r Member) {
	if r.ID == c.self.ID {
		c.applySelf(r)
		return
	}
	if r.ID.Addr == c.self.ID.Addr && r.ID.Incarnation > c.self.ID.Incarnation {
		// A newer process took this address: this one is history.
		c.retireSelf(c.self.Incarnation)
		for _, ch := range c.table.Apply(r) {
			c.onChange(ch)
		}
		return
	}
	for _, ch := range c.table.Apply(r) {
		c.onChange(ch)
	}
}

// retireSelf records that this process was removed by others: its own
// record becomes left and the core goes inert.
func (c *Core) retireSelf(inc uint64) {
	prev := c.self
	c.self.Incarnation = max(c.self.Incarnation, inc)
	c.self.Status = StatusLeft
	normalize(&c.self)
	c.table.set(c.self.Clone())
	c.account(prev, c.self, false)
	c.memberSetDirty = true
	c.noteChanged(c.self)
	c.markRemoved()
}

// applySelf refutes any verdict about this process by raising its
// incarnation above the verdict's, so the verdict loses everywhere. Only a
// left verdict is final.
func (c *Core) applySelf(r Member) {
	switch {
	case r.Status == StatusLeft:
		c.retireSelf(r.Incarnation)
	case r.Incarnation > c.self.Incarnation ||
		(r.Incarnation == c.self.Incarnation && (r.Status == StatusSuspect || r.Status == StatusDead)):
		c.self.Incarnation = r.Incarnation
		c.updateSelf(c.self.Status)
		c.emit(Event{Kind: EventRefuted, Member: c.self.Clone()})
		c.counts.Refutations++
		c.log.Info("refuted a verdict about this node", "verdict", r.String(), "now", c.self.String())
	}
}

// onChange reacts to one table change: account, gossip, report, and drop
// dead processes from the overlay and detector.
func (c *Core) onChange(ch Change) {
	c.account(ch.Prev, ch.Cur, ch.IsNew)
	c.noteChanged(ch.Cur)
	c.enqueue(ch.Cur)
	if ch.IsNew || ch.Prev.Status != ch.Cur.Status || ch.Prev.Joining != ch.Cur.Joining {
		// A member done joining is an event too: placement takes it in
		// at once rather than at the next periodic refresh.
		c.since[ch.Cur.ID] = c.now
		c.memberSetDirty = c.memberSetDirty || ch.IsNew || ch.Cur.Status == StatusLeft
		c.emit(Event{Kind: EventMemberUpdated, Member: ch.Cur.Clone(), Prev: ch.Prev.Status, New: ch.IsNew})
		c.log.Debug("member updated", "record", ch.Cur.String(), "prev", ch.Prev.Status.String())
	}
	if ch.Cur.Status == StatusDead || ch.Cur.Status == StatusLeft {
		c.forgetPeer(ch.Cur.ID)
	}
	if !c.joined && live(ch.Cur.Status) {
		c.markJoined()
	}
}

// account keeps the counts majority standing needs.
func (c *Core) account(prev, cur Member, isNew bool) {
	if !isNew {
		c.count(prev.Status, -1)
	}
	c.count(cur.Status, 1)
}

func (c *Core) count(s Status, d int) {
	if s.InMemberSet() {
		c.members += d
	}
	switch s {
	case StatusAlive:
		c.alive += d
	case StatusLeaving:
		c.leaving += d
	case StatusSuspect:
		c.suspects += d
	}
}

func (c *Core) forgetPeer(id ring.NodeID) {
	c.dropActive(id, false)
	c.passive = slices.DeleteFunc(c.passive, func(o ring.NodeID) bool { return o == id })
	c.probes = slices.DeleteFunc(c.probes, func(p pending) bool { return p.id == id })
	c.pendingNb = slices.DeleteFunc(c.pendingNb, func(p pending) bool { return p.id == id })
	delete(c.watchFrom, id)
	delete(c.unreachable, id)
}

func (c *Core) enqueue(m Member) {
	c.seq++
	c.gossip.queue(m, c.seq)
}

func (c *Core) emit(e Event) {
	e.At = c.now
	c.out.Events = append(c.out.Events, e)
}

func (c *Core) send(addr string, m Message) {
	m.From = c.self.ID
	c.out.Messages = append(c.out.Messages, Envelope{To: addr, Msg: m})
}

// fullTable is every record including this node's own, for joins and
// anti-entropy.
func (c *Core) fullTable() []Member { return c.table.snapshot() }

// piggyback takes the next batch of gossip for one message.
func (c *Core) piggyback() []Member {
	return c.gossip.pick(c.cfg.MaxPiggyback, retransmitLimit(c.cfg.RetransmitMult, c.members))
}

// flush pushes freshly learned records to the neighbours at once, unless
// gossip is lazy.
func (c *Core) flush() {
	if c.removed || c.cfg.LazyGossip || !c.gossip.fresh {
		return
	}
	c.gossip.fresh = false
	for _, id := range c.gossipTargets() {
		recs := c.piggyback()
		if len(recs) == 0 {
			return
		}
		c.send(id.Addr, Message{Type: MsgGossip, To: id, Records: recs})
	}
}

// gossipTargets are the active neighbours plus one random member of the
// passive view (which keeps gossip crossing between parts of an overlay
// that a partition or churn has fragmented), or, before the overlay has
// formed, up to ActiveView random live members.
func (c *Core) gossipTargets() []ring.NodeID {
	if len(c.active) > 0 {
		out := slices.Clone(c.active)
		if len(c.passive) > 0 {
			out = append(out, c.passive[c.rng.IntN(len(c.passive))])
		}
		return out
	}
	var out []ring.NodeID
	for range c.cfg.ActiveView {
		id, ok := c.randomMember(func(m Member) bool {
			return m.ID != c.self.ID && live(m.Status) && !slices.Contains(out, m.ID)
		})
		if !ok {
			break
		}
		out = append(out, id)
	}
	return out
}

// randomMember returns a member satisfying ok, scanning from a random
// position so that ties do not always fall on the same member.
func (c *Core) randomMember(ok func(Member) bool) (ring.NodeID, bool) {
	n := c.table.Len()
	if n == 0 {
		return ring.NodeID{}, false
	}
	start := c.rng.IntN(n)
	for i := range n {
		m := c.table.at((start + i) % n)
		if ok(m) {
			return m.ID, true
		}
	}
	return ring.NodeID{}, false
}

// heartbeatRound is the work done once per Heartbeat.
func (c *Core) heartbeatRound() {
	if !c.joined || !c.seedsAsked {
		// Every seed hears from a new process at least once, even when
		// another member reached it first, so clusters that formed apart
		// around different seeds merge.
		c.seedsAsked = true
		for _, s := range c.seeds {
			c.send(s, Message{Type: MsgJoin, Records: []Member{c.self.Clone()}})
		}
		if !c.joined {
			return
		}
	}
	c.maintainOverlay()
	for _, id := range c.active {
		c.send(id.Addr, Message{Type: MsgPing, To: id, Neighbour: true, Records: c.piggyback()})
	}
	c.probe()
	c.reconnect()
	c.probeKnown()
	c.updateHealth()
	c.removeDeadAndCollect()
}

// reconnect pings one random dead (not yet removed) member, telling it its
// record, so that when a partition heals the two sides find each other
// again and the wrongly declared refute. In large clusters only a few nodes
// try each Heartbeat, so a really dead address sees about ten pings per
// Heartbeat in all.
func (c *Core) reconnect() {
	if c.members > 10 && c.rng.IntN(c.members) >= 10 {
		return
	}
	id, ok := c.randomMember(func(m Member) bool { return m.Status == StatusDead && m.ID != c.self.ID })
	if !ok {
		return
	}
	rec, _ := c.table.Get(id)
	c.send(id.Addr, Message{Type: MsgPing, To: id, Records: append([]Member{rec.Clone()}, c.piggyback()...)})
}

// antiEntropy exchanges full tables with one random live member.
func (c *Core) antiEntropy() {
	id, ok := c.randomMember(func(m Member) bool {
		return m.ID != c.self.ID && (live(m.Status) || m.Status == StatusSuspect)
	})
	if !ok {
		return
	}
	c.send(id.Addr, Message{Type: MsgSync, To: id, Records: c.fullTable()})
}

// mayRemove reports whether a member dead since deadSince may be removed:
// this node must have seen a majority for RemoveAfter since the later of
// the verdict and the moment it regained its majority, and its neighbours
// must all have been heard from just now. Counting only time
// with a majority lets members refute after a partition heals, instead of
// being removed the instant the healed side first sees a majority.
func (c *Core) mayRemove(deadSince time.Time) bool {
	if !c.hasMajority() || c.majoritySince.IsZero() || !c.neighboursFresh() {
		return false
	}
	from := deadSince
	if c.majoritySince.After(from) {
		from = c.majoritySince
	}
	return c.now.Sub(from) >= c.t.RemoveAfter
}

// neighboursFresh reports whether every active neighbour was heard within
// two heartbeats. A majority seen through a view that is going stale (a
// partition that began less than SuspectAfter ago) must not remove
// anyone: the removal could not reach the far side, which may then hold a
// majority of the old member set while this side holds one of the new.
func (c *Core) neighboursFresh() bool {
	for _, id := range c.active {
		if c.now.Sub(c.evidence(id)) > 2*c.t.Heartbeat {
			return false
		}
	}
	return true
}

// removeDeadAndCollect marks members dead or leaving for RemoveAfter as
// left, on a node that sees a majority only, and forgets tombstones older
// than TombstoneTTL.
func (c *Core) removeDeadAndCollect() {
	if c.members == c.alive+c.suspects && c.table.Len() == c.members {
		return // nothing dead, leaving or left
	}
	var forget []ring.NodeID
	var remove []Member
	c.table.each(func(m Member) {
		if m.ID == c.self.ID || (m.Status != StatusDead && m.Status != StatusLeaving && m.Status != StatusLeft) {
			return
		}
		age := c.now.Sub(c.since[m.ID])
		switch {
		case (m.Status == StatusDead || m.Status == StatusLeaving) && c.mayRemove(c.since[m.ID]):
			// A member leaving for RemoveAfter never finished its
			// handover (its Leave failed and the process lingers): it
			// ends as left rather than leaving forever.
			remove = append(remove, m)
		case m.Status == StatusLeft && age >= c.t.TombstoneTTL:
			forget = append(forget, m.ID)
		}
	})
	for _, m := range remove {
		m = m.Clone()
		m.Status = StatusLeft
		for _, ch := range c.table.Apply(m) {
			c.onChange(ch)
		}
	}
	for _, id := range forget {
		m, _ := c.table.Get(id)
		c.table.Remove(id)
		delete(c.since, id)
		delete(c.lastFrame, id)
		c.emit(Event{Kind: EventMemberForgotten, Member: m})
	}
}
