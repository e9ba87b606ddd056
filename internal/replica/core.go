package replica

import (
	"bytes"
	"cmp"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/troupe-go/troupe/replication"
	"github.com/troupe-go/troupe/ring"
)

// Ticket names one Write or Read waiting for its level or its read barrier.
// Ready.Done and Ready.Failed list tickets.
type Ticket uint64

// Change says that this node's standing as a key's owner changed.
type Change struct {
	Key Key
	// Serving is true once the key is served (fenced, adopted, written
	// back); false when the node stepped down.
	Serving bool
	// Epoch is this node's epoch when Serving, otherwise the newer epoch a
	// replica reported (zero when the driver resigned the key itself).
	Epoch Epoch
	// Floor is set when a floor made the node step down: Epoch is the
	// floor, its Node the copier that fenced the key's range last,
	// Copiers the copiers of earlier fences (see AcquireOptions.Copiers),
	// and Departed the members whose departure the floor names (see
	// AcquireOptions.Gone).
	Floor    bool
	Copiers  []ring.NodeID
	Departed []ring.NodeID
}

// Ready is what the driver must do after a call, in field order: persist,
// send, then release and fail. Changes is informational.
type Ready struct {
	Persist  []Record
	Messages []Message
	Done     []Ticket
	Failed   []Ticket
	Changes  []Change
	// Floors, when not nil, is every floor of this replica after a
	// fence raised one: the driver persists them, like Persist, before
	// it sends Messages.
	Floors []Floor
}

// IsEmpty reports whether r asks nothing of the driver.
func (r Ready) IsEmpty() bool {
	return len(r.Persist) == 0 && len(r.Messages) == 0 && len(r.Done) == 0 && len(r.Failed) == 0 && len(r.Changes) == 0 && r.Floors == nil
}

// keyState is what the core holds for one key as a replica, together so
// that a message costs one map lookup (the maps are large; each lookup is
// a cache miss).
type keyState struct {
	promised Epoch
	// horizon voids every record of the key it covers (see Horizon);
	// zero when none was raised.
	horizon Horizon
	maxTerm uint64 // the highest term seen for the key
	// token is the key's ring token, kept for the scans of a range (a
	// fence) that would otherwise hash every key.
	token ring.Token
	// records holds one record per slot, in the order first stored. A
	// key has a handful of slots (its state and a few continuity
	// records), so a scan beats a map.
	records []Record
}

// find returns the index of the record in slot, or -1.
func (ks *keyState) find(slot Slot) int {
	for i := range ks.records {
		if ks.records[i].Kind == slot.Kind && ks.records[i].Name == slot.Name {
			return i
		}
	}
	return -1
}

// store keeps r unless the record held in its slot is as new; it
// reports whether r was kept.
func (ks *keyState) store(r Record) bool {
	i := ks.find(r.Slot())
	if i < 0 {
		ks.records = append(ks.records, r)
		return true
	}
	if r.newer(ks.records[i]) {
		ks.records[i] = r
		return true
	}
	return false
}

// Core is one node's replication state: the replica's promises and records
// for every key it holds, and the owner's progress for every key it
// acquired. It is not safe for concurrent use.
type Core struct {
	self ring.NodeID
	// receiving lists the ranges this replica is still receiving.
	receiving []ring.Range
	// floors are the range-level promises hand-off copies raised here.
	floors floors

	keys map[Key]*keyState
	// tokens lists the keys by token, for the scans of a range.
	tokens tokenIndex

	owned map[Key]*ownership
	// waiting lists the owned keys with something unanswered (promises,
	// accepts or a check round): all that Tick looks at.
	waiting map[Key]struct{}
	// ticks counts Tick calls; what was sent at tick t is sent again
	// from tick t+2 on, so a message is not repeated before it had a
	// whole tick period to be answered.
	ticks  uint64
	ticket Ticket
	local  []Message
	ready  Ready
	// deltaMin is the smallest value a write sends as a delta; zero
	// sends every value whole (see SetDeltaMin).
	deltaMin int
}

// Start says whether a new core counts toward quorums at once.
type Start uint8

const (
	// Counting: the node holds everything it acknowledged (a member that
	// bootstraps the cluster, or a restart from a store that survived).
	Counting Start = iota
	// Receiving: the node may lack what it acknowledged, or never was a
	// replica (a new or wiped member, a store that lost its last writes):
	// it receives the whole ring and does not count until CatchUp and
	// Received say it caught up.
	Receiving
)

// New returns the core of node self, counting toward quorums at once or
// receiving the whole ring as start says.
func New(self ring.NodeID, start Start) *Core {
	c := &Core{
		self:    self,
		keys:    make(map[Key]*keyState),
		owned:   make(map[Key]*ownership),
		waiting: make(map[Key]struct{}),
	}
	if start == Receiving {
		c.receiving = []ring.Range{{}}
	}
	return c
}

// Self returns the node this core runs on.
func (c *Core) Self() ring.NodeID { return c.self }

// SetDeltaMin makes writes of values of at least n bytes travel as
// deltas: to each replica that acknowledged the slot's previous record at
// this owner's epoch, a write goes as an edit of that record
// (MsgAcceptDelta) when the edit is smaller than half the value; to the
// others, and whenever it is sent again, it goes whole. n ≤ 0, the
// default, sends every write whole. It applies to writes made after it.
func (c *Core) SetDeltaMin(n int) { c.deltaMin = max(n, 0) }

// AddReceiving adds ranges to those this replica is still receiving from
// their previous replicas (a member that becomes a replica of a range at
// a hand-off; the whole ring is ring.Range{}). For a key in such a range
// its answers tell owners not to count it toward a quorum, since it may
// lack what a quorum holds; it still stores what it is sent. Adding never
// ends receiving a range: only Received (after a catch-up) and
// CountEverywhere do.
func (c *Core) AddReceiving(ranges ...ring.Range) {
	for _, g := range ranges {
		if g.Start == g.End {
			c.receiving = []ring.Range{{}}
			return
		}
	}
	if len(c.receiving) == 1 && c.receiving[0].Start == c.receiving[0].End {
		return
	}
	for _, g := range ranges {
		if !slices.Contains(c.receiving, g) {
			c.receiving = append(c.receiving, g)
		}
	}
}

// CountEverywhere makes this replica count for every key at once,
// whatever it was receiving: an operator's decision after a loss no
// catch-up can repair (a whole-cluster power loss without Sync), which
// accepts that acknowledged writes may be gone.
func (c *Core) CountEverywhere() { c.receiving = nil }

// Receiving returns the ranges this replica is still receiving.
func (c *Core) Receiving() []ring.Range { return slices.Clone(c.receiving) }

// Received says that this replica caught up on g: it counts for the keys
// of g from now on (the rest of what it receives is unchanged).
func (c *Core) Received(g ring.Range) { c.receiving = subtractRange(c.receiving, g) }

// CatchUp stores records another replica held (a catch-up's chunk): each
// record replaces the one held in its slot if it is newer, and a promise
// raises the one held if it is newer. What changed reaches Ready.Persist;
// the driver must persist it before it counts the chunk as received.
func (c *Core) CatchUp(recs ...Record) {
	for _, r := range recs {
		if r.Kind == KindPromise {
			ks := c.state(r.Key)
			raised := r.Epoch.Compare(ks.promised) > 0
			if raised {
				ks.promised = r.Epoch
			}
			var erased []Record
			if h, ok := HorizonOf(r); ok {
				erased = c.raiseHorizon(ks, r.Key, h)
				raised = raised || erased != nil
			}
			if raised {
				c.ready.Persist = append(c.ready.Persist, ks.promiseRecord(r.Key))
				c.ready.Persist = append(c.ready.Persist, erased...)
			}
			ks.maxTerm = max(ks.maxTerm, r.Epoch.Term)
			continue
		}
		if r.Kind > maxKind {
			continue
		}
		ks := c.state(r.Key)
		if !ks.horizon.Covers(r) && ks.store(r) {
			c.ready.Persist = append(c.ready.Persist, r)
		}
	}
}

// counts reports whether this replica's answers about the key of token
// t may count.
func (c *Core) counts(t ring.Token) bool {
	if len(c.receiving) == 0 {
		return true
	}
	return !slices.ContainsFunc(c.receiving, func(g ring.Range) bool { return g.Contains(t) })
}

// Restore loads records read from the store at start. It must be called
// before anything else. A record its key's horizon covers (a crash came
// between the horizon and its erasures) is not loaded: its erasure waits
// in Ready.Persist, for the driver's first batch.
func (c *Core) Restore(recs ...Record) {
	for _, r := range recs {
		if r.Kind != KindPromise {
			continue
		}
		ks := c.state(r.Key)
		if r.Epoch.Compare(ks.promised) > 0 {
			ks.promised = r.Epoch
		}
		if h, ok := HorizonOf(r); ok && h.After(ks.horizon) {
			ks.horizon = h
		}
	}
	for _, r := range recs {
		if r.Kind == KindPromise {
			continue
		}
		ks := c.state(r.Key)
		if ks.horizon.Covers(r) {
			c.ready.Persist = append(c.ready.Persist, Erasing(r))
			continue
		}
		ks.store(r)
	}
}

// promiseRecord is what the driver persists of ks's promise and horizon.
func (ks *keyState) promiseRecord(k Key) Record { return PromiseRecord(k, ks.promised, ks.horizon) }

// raiseHorizon raises k's horizon to h if h is newer, and drops the
// records it covers, void from then on (see Horizon). It returns
// the records that erase them from the store, to persist after the
// promise record that carries the horizon; nil when the horizon did not
// rise. A horizon that rose with nothing to drop returns an empty,
// non-nil slice.
func (c *Core) raiseHorizon(ks *keyState, k Key, h Horizon) []Record {
	if !h.After(ks.horizon) {
		return nil
	}
	ks.horizon = h
	erased := []Record{}
	ks.records = slices.DeleteFunc(ks.records, func(r Record) bool {
		if !h.Covers(r) {
			return false
		}
		r.Key = k
		erased = append(erased, Erasing(r))
		return true
	})
	return erased
}

// Promised returns the newest epoch this replica promised for k.
func (c *Core) Promised(k Key) Epoch {
	if ks := c.keys[k]; ks != nil {
		return ks.promised
	}
	return Epoch{}
}

// Stored returns the record in slot the replica holds for k.
func (c *Core) Stored(k Key, slot Slot) (Record, bool) {
	if ks := c.keys[k]; ks != nil {
		if i := ks.find(slot); i >= 0 {
			return ks.records[i], true
		}
	}
	return Record{}, false
}

// state returns what the core holds for k, creating it.
func (c *Core) state(k Key) *keyState {
	ks := c.keys[k]
	if ks == nil {
		ks = &keyState{token: k.Token()}
		c.keys[k] = ks
		c.tokens.add(ks)
	}
	return ks
}

// Ready returns what the driver must do and forgets it.
func (c *Core) Ready() Ready {
	r := c.ready
	c.ready = Ready{}
	return r
}

// Recycle hands back the slices of r, the Ready the core returned last,
// once the driver has copied out what it keeps: the next Ready is built
// in them instead of in slices grown afresh (a driver takes a Ready after
// every input). r must not be used afterwards. Recycling a Ready taken
// before the last one does nothing.
func (c *Core) Recycle(r Ready) {
	if !c.ready.IsEmpty() {
		return
	}
	c.ready.Persist = reuse(c.ready.Persist, r.Persist)
	c.ready.Messages = reuse(c.ready.Messages, r.Messages)
	c.ready.Done = reuse(c.ready.Done, r.Done)
	c.ready.Failed = reuse(c.ready.Failed, r.Failed)
	c.ready.Changes = reuse(c.ready.Changes, r.Changes)
}

// reuse returns old's room for the next Ready's entries, emptied (what
// they referred to can go), or cur if it has room already.
func reuse[T any](cur, old []T) []T {
	if cap(cur) >= cap(old) {
		return cur
	}
	clear(old)
	return old[:0]
}

func (c *Core) send(m Message) {
	m.From = c.self
	if m.To == c.self {
		c.local = append(c.local, m)
		return
	}
	c.ready.Messages = append(c.ready.Messages, m)
}

// drain delivers the messages this node sent itself. The owner's own
// replica answers at once; its records reach Ready.Persist before any
// release that counted them, so the driver's persist-first order covers
// them.
func (c *Core) drain() {
	// By index, not by reslicing from the front: the slice keeps its room
	// for the next call. A step may append to it.
	for i := 0; i < len(c.local); i++ {
		c.step(c.local[i])
	}
	clear(c.local)
	c.local = c.local[:0]
}

// Step handles a message received from another node (or a duplicate of
// one: every rule is idempotent).
func (c *Core) Step(m Message) {
	if m.To != c.self {
		return
	}
	c.step(m)
	c.drain()
}

func (c *Core) step(m Message) {
	switch m.Type {
	case MsgFence:
		c.fence(m)
		return
	case MsgFenced, MsgSyncRequest, MsgSyncChunk:
		// The driver's: they name no key.
		return
	}
	ks := c.state(m.Key)
	ks.maxTerm = max(ks.maxTerm, m.Epoch.Term)
	switch m.Type {
	case MsgPrepare, MsgAccept, MsgAcceptDelta, MsgCheck, MsgForget:
		c.replicaStep(ks, m)
	case MsgPromise, MsgAccepted, MsgAcceptNack, MsgChecked, MsgRefuse, MsgForgotten:
		if m.Type == MsgRefuse {
			ks.maxTerm = max(ks.maxTerm, m.Promised.Term)
		}
		if o := c.owned[m.Key]; o != nil && o.epoch == m.Epoch {
			c.ownerStep(o, m)
		}
	}
}

// replicaStep applies the replica's rules: refuse an epoch older than the
// promised one (or the floor of the key's range, see Floor) and name the
// newer; otherwise raise the promise to it (durably, before answering)
// and answer.
func (c *Core) replicaStep(ks *keyState, m Message) {
	if f, below := c.floorOf(ks, m.Epoch); below {
		c.send(Message{Type: MsgRefuse, To: m.From, Key: m.Key, Epoch: m.Epoch, Promised: f.epoch, Floor: true, Reads: f.copiers, Gone: f.departed})
		return
	}
	// A prepare passes a floor only if it lists its copiers and names its
	// departures gone: the owner's view shows the changes the copiers
	// fenced the range for. An owner on a view that lags it would
	// otherwise acquire above the floor over the previous set and have
	// writes acknowledged there that the copy, read after the fence,
	// never sees.
	if m.Type == MsgPrepare && len(c.floors) > 0 {
		if f := c.floors.find(ks.token); f.epoch.Term > 0 && !f.passedBy(m.Reads, m.Gone) {
			c.send(Message{Type: MsgRefuse, To: m.From, Key: m.Key, Epoch: m.Epoch, Promised: f.epoch, Floor: true, Reads: f.copiers, Gone: f.departed})
			return
		}
	}
	p := ks.promised
	// A prepare that names an epoch (Promised) is an owner's acquisition
	// again above a floor: it must not pass another node's epoch promised
	// after the one it names (see restart).
	since := m.Type == MsgPrepare && !m.Promised.IsZero() && p.Node != m.Epoch.Node && p.Compare(m.Promised) > 0
	if m.Epoch.Compare(p) < 0 || since {
		c.send(Message{Type: MsgRefuse, To: m.From, Key: m.Key, Epoch: m.Epoch, Promised: p})
		return
	}
	if m.Epoch.Compare(p) > 0 {
		ks.promised = m.Epoch
		c.ready.Persist = append(c.ready.Persist, ks.promiseRecord(m.Key))
	}
	reply := Message{To: m.From, Key: m.Key, Epoch: m.Epoch, Counted: c.counts(ks.token)}
	switch m.Type {
	case MsgPrepare:
		reply.Type = MsgPromise
		// A copy: the reply must not change when the records do.
		reply.Records = slices.Clone(ks.records)
		reply.Promised, reply.Version = ks.horizon.Epoch, ks.horizon.Version
	case MsgAccept:
		if len(m.Records) != 1 || m.Records[0].Epoch != m.Epoch || m.Records[0].Kind > maxKind {
			return
		}
		r := m.Records[0]
		r.Key = m.Key
		if r.Kind == KindPromise {
			// An owner's horizon, written back with its adopted records.
			h, ok := HorizonOf(r)
			if !ok {
				return
			}
			if erased := c.raiseHorizon(ks, m.Key, h); erased != nil {
				c.ready.Persist = append(c.ready.Persist, ks.promiseRecord(m.Key))
				c.ready.Persist = append(c.ready.Persist, erased...)
			}
			reply.Type = MsgAccepted
			reply.Version = r.Version
			break
		}
		// An older record of this epoch arriving late is covered by the
		// newer one held: the owner's writes replace the whole record.
		// One the horizon covers was collected (a late copy).
		if !ks.horizon.Covers(r) && ks.store(r) {
			c.ready.Persist = append(c.ready.Persist, r)
		}
		reply.Type = MsgAccepted
		reply.Version = r.Version
	case MsgAcceptDelta:
		if len(m.Records) != 1 {
			return
		}
		if r := m.Records[0]; r.Epoch == m.Epoch && ks.horizon.Covers(r) {
			// A late copy of a collected record: nothing to store.
			reply.Type = MsgAccepted
		} else if !c.acceptDelta(ks, m) {
			reply.Type = MsgAcceptNack
		} else {
			reply.Type = MsgAccepted
		}
		reply.Version = m.Records[0].Version
	case MsgCheck:
		reply.Type = MsgChecked
		reply.Round = m.Round
	case MsgForget:
		c.forget(ks, m)
		reply.Type = MsgForgotten
		reply.Version = m.Version
	}
	c.send(reply)
}

// forget applies a MsgForget of an epoch the replica promised: the key
// held only tombstones, on every replica of the set, up to the forget's
// version, so its horizon rises there, which erases them and voids
// whatever older record a replica that missed a delete still has, or
// receives later from one (see Horizon).
func (c *Core) forget(ks *keyState, m Message) {
	if erased := c.raiseHorizon(ks, m.Key, Horizon{Epoch: m.Epoch, Version: m.Version}); erased != nil {
		c.ready.Persist = append(c.ready.Persist, ks.promiseRecord(m.Key))
		c.ready.Persist = append(c.ready.Persist, erased...)
	}
}

// acceptDelta applies the replica's rule for a delta accept of epoch
// m.Epoch (already promised): the record whose value the edit gives is
// stored, as a whole accept's would be, only if the replica holds exactly
// the base, the record of version m.Version at m.Epoch in its slot. It
// reports false when it holds another record (it lost the base, never had
// it, or holds a newer epoch's) or the edit does not apply, so that the
// owner sends the record whole; a record held that is as new as the
// delta's covers it, as for a whole accept.
func (c *Core) acceptDelta(ks *keyState, m Message) bool {
	r := m.Records[0]
	if r.Epoch != m.Epoch || r.Kind == KindPromise || r.Kind > maxKind || r.Tombstone || m.Version >= r.Version {
		return false
	}
	r.Key = m.Key
	i := ks.find(r.Slot())
	if i < 0 {
		return false
	}
	held := ks.records[i]
	if !r.newer(held) {
		return true
	}
	if held.Epoch != m.Epoch || held.Version != m.Version || held.Tombstone {
		return false
	}
	v, err := applyDelta(held.Value, m.Delta)
	if err != nil {
		return false
	}
	r.Value = v
	ks.records[i] = r
	c.ready.Persist = append(c.ready.Persist, r)
	return true
}

// phase is where an owner stands with a key.
type phase uint8

const (
	// preparing: waiting for promises from a quorum.
	preparing phase = iota
	// writingBack: the adopted records are being written at the new epoch.
	writingBack
	// serving: reads and writes are taken.
	serving
)

// proposal is one write in flight.
type proposal struct {
	// recs holds the record: an accept that carries it whole names
	// recs[:] as its Records (messages are only read) instead of a
	// slice of its own, one allocation less per write.
	recs [1]Record
	// acked lists the replicas that stored the record (a replica set is
	// a handful of members: a slice beats a map), in ackedRoom while a
	// set of up to three fits.
	acked     []ring.NodeID
	ackedRoom [3]ring.NodeID
	sentAt    uint64
	tries     uint8
}

type readWait struct {
	ticket  Ticket
	version uint64
}

// sweep is an owner's collection of its key's tombstones: each is
// written again (held lists the replicas that stored it), and once every
// replica of the set holds all of them, each replica is told to forget
// the key up to them (forgot lists those that did).
type sweep struct {
	recs []Record
	held [][]ring.NodeID
	// top is the version of the last tombstone written again: the
	// horizon's.
	top    uint64
	forget bool
	forgot []ring.NodeID
	sentAt uint64
	tries  uint8
	// resent counts the times it was sent again.
	resent uint8
}

// maxSweep is the most tombstones of a key one sweep collects, and
// maxSweepTries how often a sweep sends its writes or forgets again
// before it gives up (a replica down): the tombstones stay, for the next
// sweep.
const (
	maxSweep      = 32
	maxSweepTries = 6
)

type ownership struct {
	key      Key
	replicas []ring.NodeID
	quorum   int
	// previous is the key's previous replica set during a change of set
	// (nil otherwise): promises are needed from prevQuorum of it too:
	// n-q+1 of its n members, which meet every quorum q of it (so a write
	// the old set acknowledged is among them), and leave an old owner
	// fewer than q members to accept its writes (so it is fenced).
	previous   []ring.NodeID
	prevQuorum int
	// prepared is replicas and previous together: who is asked to promise.
	prepared []ring.NodeID
	// shows is prepared and AcquireOptions.Copiers together: the
	// members whose floors the prepares pass (see prepare).
	shows []ring.NodeID
	// gone lists the members the prepares name gone from the ring
	// (AcquireOptions.Gone, and a floor's departures the owner's set
	// shows it passed: see ownerStep).
	gone []ring.NodeID
	// caller is the view the caller chose the sets on
	// (AcquireOptions.View).
	caller View
	epoch  Epoch
	// since is the epoch of the caller's acquisition, the first of o:
	// an acquisition again above a floor, which the caller did not make,
	// must find no other node's epoch promised after it.
	since Epoch
	phase phase
	// restarts counts the times in a row a floor refused the epoch and
	// the key was acquired again above it.
	restarts int
	// refreshing is set while a served key is acquired again after a
	// floor refused its epoch (see refresh): seen holds the records the
	// owner served then, view what a handler sees (seen and the writes
	// made since), and floor the floor that refused it.
	refreshing bool
	seen, view map[Slot]Record
	floor      Epoch
	// seenAt is the epoch at which seen was served: the refused one;
	// seenCommitted the commit point at seenAt when it was refused.
	seenAt        Epoch
	seenCommitted uint64
	// served is set once the key was served: from then on it takes
	// writes and reads while it is acquired again after a floor.
	served bool
	// sweepGaveUp is set when o's last sweep gave up (a replica did not
	// answer it), cleared when another starts.
	sweepGaveUp bool

	promises map[ring.NodeID]Message
	// preparedAt and roundAt are the ticks at which the prepares and the
	// open check round were last sent; the tries count how often they were
	// sent again.
	preparedAt, roundAt      uint64
	prepareTries, roundTries uint8

	// current holds the newest record of each slot, committed or not.
	current map[Slot]Record
	version uint64
	// committed is the highest version such that it and every version
	// below it met the level.
	committed uint64
	// serveAt is the version of the last write-back: serving once
	// committed reaches it.
	serveAt  uint64
	inflight []*proposal
	writes   []readWait
	// bases holds, for each slot whose current record is at least
	// deltaMin bytes, the proposal that wrote it: the replicas it lists as
	// having acknowledged it hold it (or lost it, and say so), so the
	// slot's next write may go to them as a delta. Kept after the
	// proposal met its level, for the acknowledgements still to come.
	bases []*proposal
	// horizon is the newest horizon the promises named (see Horizon),
	// written back with the adopted records.
	horizon Horizon
	sweep   *sweep

	reads      []readWait
	round      uint64
	roundOpen  bool
	roundReads []Ticket
	roundAcked []ring.NodeID
}

// Acquire starts serving k on this node: it raises k's epoch on replicas
// (which must include this node) with a term above every term it has seen
// for k, adopts the newest records a quorum of level holds and writes them
// back at the new epoch. Ready.Changes reports when k is served, or that
// this node stepped down. Acquiring a key already held over the same set
// does nothing; one held over another set steps down (what waited on it
// fails) and is acquired again over replicas. A
// term above every term seen that would not fit gives ErrTermExhausted.
func (c *Core) Acquire(k Key, replicas []ring.NodeID, level replication.Level) error {
	return c.AcquireWith(k, replicas, level, AcquireOptions{})
}

// AcquireOptions are the optional parts of an acquisition.
type AcquireOptions struct {
	// Previous is the key's replica set before its set changed. When it
	// is set and differs from the current set, the acquisition needs
	// promises from a quorum of each set (a replica in both counts for
	// both) and adopts the newest records over all of them; it writes
	// back, and later writes go, to the current set only. A quorum of the
	// previous set then holds the new epoch, so an owner still writing
	// to that set is fenced, and whatever such an owner had acknowledged
	// is adopted.
	Previous []ring.NodeID
	// Copiers are members whose hand-offs the caller's view shows (they
	// entered its rings, or left them since). The prepares list them
	// with the members of the sets, and a replica refuses a prepare
	// under a floor whose copier it does not list, whatever its term: the
	// copier may have fenced the range for a change the caller's view
	// does not show yet, and acquiring above the floor over sets that
	// lack it would get writes acknowledged that its copy never saw. An
	// acquisition refused so steps down (Change.Floor, naming the
	// floor); the caller waits until its view shows the copier and
	// acquires again naming it.
	Copiers []ring.NodeID
	// Gone are members the caller's view shows gone from the key's ring
	// (they left, were removed, or a newer process replaced them). A
	// floor also names the members whose departure gave the range to its
	// copier, and a replica refuses a prepare that does not name them
	// all, whatever its term: a view that shows the copier (a member for
	// long) may still lag the leave or removal the copier fenced the
	// range for, and give the set from before it. Refused so, the
	// acquisition steps down (Change.Departed); the caller waits until
	// its view shows them gone and acquires again naming them.
	Gone []ring.NodeID
	// View, when set, is what the caller's view showed when it chose the
	// sets: a floor's copiers it shows entered, and departures it shows
	// gone, count as named in Copiers and Gone (the acquisition names
	// them when it acquires again above the floor), so that a floor
	// naming more changes than the caller names does not make it step
	// down. It must not change afterwards: a view that shows a change
	// later says nothing of sets chosen before it.
	View View
}

// View is what an acquisition's caller's view of membership showed: a
// member's entry into the rings, and its departure from them for good.
// A nil function shows nothing.
type View struct {
	Entered, Departed func(ring.NodeID) bool
}

// AcquireWith is Acquire with options: a joint acquisition when the
// replica set changed (AcquireOptions.Previous). A key already held is
// left as it is only if it is held over the same set and, when Previous
// names another set, by a joint acquisition from that set; otherwise the
// node steps down (Ready.Changes reports it, with a zero epoch) and
// acquires k again as asked, since an ownership of the previous set alone
// does not fence an owner of the new one.
func (c *Core) AcquireWith(k Key, replicas []ring.NodeID, level replication.Level, opts AcquireOptions) error {
	if !slices.Contains(replicas, c.self) {
		return ErrNotReplica
	}
	if err := level.Validate(); err != nil {
		return err
	}
	set := sortedSet(replicas)
	prev := sortedSet(opts.Previous)
	if slices.Equal(prev, set) {
		prev = nil
	}
	if o := c.owned[k]; o != nil {
		if o.covers(set, prev) {
			return nil
		}
		// Held over another set, or without the previous set this
		// acquisition names: that ownership fences neither the new set's
		// nor the previous set's quorums as asked, so it steps down and
		// the key is acquired again as asked.
		c.stepDown(o, Epoch{})
	}
	ks := c.state(k)
	// The own replica's floor would refuse a term at or below it.
	seen := max(ks.maxTerm, ks.promised.Term, c.floorTerm(ks))
	if seen == math.MaxUint64 {
		return ErrTermExhausted
	}
	term := seen + 1
	ks.maxTerm = term
	o := &ownership{
		key:      k,
		replicas: set,
		quorum:   level.Quorum(len(set)),
		prepared: set,
		epoch:    Epoch{Term: term, Node: c.self},
		since:    Epoch{Term: term, Node: c.self},
		promises: make(map[ring.NodeID]Message),
		current:  make(map[Slot]Record),
	}
	if len(prev) > 0 {
		o.previous = prev
		o.prevQuorum = len(prev) - level.Quorum(len(prev)) + 1
		o.prepared = sortedSet(append(slices.Clone(set), prev...))
	}
	o.shows = sortedSet(append(slices.Clone(o.prepared), opts.Copiers...))
	if len(opts.Gone) > 0 {
		o.gone = sortedSet(opts.Gone)
	}
	o.caller = opts.View
	c.owned[k] = o
	o.preparedAt = c.ticks
	c.waiting[k] = struct{}{}
	for _, r := range o.prepared {
		c.send(o.prepare(r))
	}
	c.drain()
	return nil
}

// maxRestarts is how often an acquisition refused by floors starts again
// before it steps down.
const maxRestarts = 3

// refresh prepares a served key refused by a floor to be acquired again
// without failing what waits on it. What the owner served, its writes in
// flight included, is set aside; the writes and reads made meanwhile
// wait. If the new acquisition adopts exactly those records and none
// written by another owner (see unchanged), its write-back is every
// waiting write's commit and the reads are confirmed by a check round at
// the new epoch: each waiting operation is then linearized at that
// commit, within its call. If it adopts anything else, everything waiting
// fails and the owner steps down.
func (o *ownership) refresh(floor Epoch) {
	o.refreshing = true
	o.floor = floor
	o.seenAt, o.seenCommitted = o.epoch, o.committed
	o.seen = maps.Clone(o.current)
	o.view = maps.Clone(o.current)
	o.reads = append(o.reads, readWaitsOf(o.roundReads)...)
	o.roundReads, o.roundOpen = nil, false
}

func readWaitsOf(ts []Ticket) []readWait {
	out := make([]readWait, len(ts))
	for i, t := range ts {
		out[i] = readWait{ticket: t}
	}
	return out
}

// unchanged reports whether adopted, the newest records a refresh's
// quorum holds, show that no other owner served since the refused epoch
// seenAt: every record is of seenAt or older, and each holds the value the
// owner set aside (seen) or, where what it set aside was past its commit
// point at seenAt, an earlier record of its own (of an epoch of this
// ownership: since or later, its node), or none.
//
// Equal values alone do not say it: another owner may have acquired,
// written and been acknowledged in between (a floor's refusal does not
// name it), leaving the values the owner holds but having served others
// that came after what waits here (a read of a value overwritten since,
// an increment computed from a stale value). Any owner that served after
// seenAt did so at a newer epoch and wrote back every slot at it on a
// quorum first; a replica replaces a record only by a newer one and
// keeps tombstones, so the refresh's quorum, which meets that one,
// adopts a record newer than seenAt. An owner that served a key with no
// records and wrote nothing left none, but changed nothing either: what
// waits here is linearized after it.
//
// Earlier records of its own are what a floor leaves behind: a copier
// fences the sources it reads, which may include the owner's own
// replica, so the writes in flight when it rose can be refused
// everywhere, and the quorum holds the last record committed (or one in
// flight that a replica took before its fence); a second floor during
// the write-back of an earlier refresh leaves the records of the epoch
// before it. The epochs of this ownership are its alone, and what was
// past the commit point was acknowledged to no one, so writing seen back
// at the new epoch commits it in order. A record set aside that was
// committed must be in the quorum as it was: a quorum that lacks it does
// not meet the one that acknowledged it, and the owner steps down.
func (o *ownership) unchanged(adopted map[Slot]Record) bool {
	uncommitted := func(s Record) bool {
		return s.Epoch.Compare(o.seenAt) == 0 && s.Version > o.seenCommitted
	}
	for slot, r := range adopted {
		if r.Epoch.Compare(o.seenAt) > 0 {
			return false
		}
		s, ok := o.seen[slot]
		if !ok {
			if r.Tombstone && r.Epoch.Compare(o.seenAt) <= 0 {
				// A tombstone the owner collected: the same as none.
				continue
			}
			return false
		}
		if s.Tombstone == r.Tombstone && bytes.Equal(s.Value, r.Value) {
			continue
		}
		own := r.Epoch.Node == o.since.Node && r.Epoch.Compare(o.since) >= 0
		if !own || !uncommitted(s) || (r.Epoch.Compare(o.seenAt) == 0 && r.Version >= s.Version) {
			return false
		}
	}
	for slot, s := range o.seen {
		if _, ok := adopted[slot]; !ok && !uncommitted(s) {
			return false
		}
	}
	return true
}

// restart acquires o's key again, over the same sets, at a term above
// every term seen (the floor that refused it included), forgetting the
// promises and write-back of the refused epoch; nothing was served at
// it. It reports false when no such term fits.
//
// The caller chose the sets at o.since; since then another node may have
// acquired the key, jointly over a set it moved to, and had writes
// acknowledged there that o's sets need not hold, at an epoch the new
// one may pass by its term or, at an equal term, by its node. So the
// prepares name o.since (see prepare), and a replica that promised
// another node's epoch newer than that refuses: any quorum of o's sets
// meets the members of them that such an acquisition promised, and o
// steps down.
func (c *Core) restart(o *ownership) bool {
	ks := c.state(o.key)
	seen := max(ks.maxTerm, ks.promised.Term, c.floorTerm(ks))
	if seen == math.MaxUint64 {
		return false
	}
	ks.maxTerm = seen + 1
	o.restarts++
	o.epoch = Epoch{Term: seen + 1, Node: c.self}
	o.phase = preparing
	o.promises = make(map[ring.NodeID]Message)
	o.current = make(map[Slot]Record)
	o.version, o.committed, o.serveAt = 0, 0, 0
	o.inflight = nil
	o.sweep = nil
	o.preparedAt, o.prepareTries = c.ticks, 0
	c.waiting[o.key] = struct{}{}
	for _, r := range o.prepared {
		c.send(o.prepare(r))
	}
	return true
}

// prepare returns o's prepare to replica r. It lists the members whose
// floors it passes (Reads): its sets and the copiers its caller's view
// shows; a replica refuses it under a floor of any other copier,
// whatever its term. Once o acquires again above a floor, it names
// o.since: the replica refuses it if it promised another node's epoch
// after that one.
func (o *ownership) prepare(r ring.NodeID) Message {
	m := Message{Type: MsgPrepare, To: r, Key: o.key, Epoch: o.epoch, Reads: o.shows, Gone: o.gone}
	if o.restarts > 0 {
		m.Promised = o.since
	}
	return m
}

// passes reports whether o acquired on a view that shows the changes a
// floor of copier x, earlier copiers copiers and departures departed was
// raised for: its caller's view showed the earlier copiers (named in
// AcquireOptions.Copiers, held in its sets, or shown by
// AcquireOptions.View), and its set holds x and none of departed, or it
// has not served yet and its caller's view showed x and every one of
// departed gone (AcquireOptions.Gone, or View). Such an owner acquires
// again above the floor (see learn).
func (o *ownership) passes(x ring.NodeID, copiers, departed []ring.NodeID) bool {
	shown := func(y ring.NodeID) bool { return copierShown(y, departed, o.entered, o.departed) }
	if !slices.ContainsFunc(copiers, func(y ring.NodeID) bool { return !shown(y) }) {
		if slices.Contains(o.replicas, x) && !slices.ContainsFunc(departed, func(d ring.NodeID) bool { return slices.Contains(o.replicas, d) }) {
			return true
		}
		return !o.served && shown(x) && !slices.ContainsFunc(departed, func(d ring.NodeID) bool { return !o.departed(d) })
	}
	return false
}

// entered reports whether o's caller's view showed y's entry into the
// rings: named, held in o's sets, or shown by the view it chose them on.
func (o *ownership) entered(y ring.NodeID) bool {
	return slices.Contains(o.shows, y) || (o.caller.Entered != nil && o.caller.Entered(y))
}

// departed reports whether o's caller's view showed d gone for good.
func (o *ownership) departed(d ring.NodeID) bool {
	return slices.Contains(o.gone, d) || (o.caller.Departed != nil && o.caller.Departed(d))
}

// learn has o's prepares list x and copiers (but those named gone) and
// name departed gone, which passes found its caller's view showed, and
// reports whether that added anything.
func (o *ownership) learn(x ring.NodeID, copiers, departed []ring.NodeID) bool {
	var named []ring.NodeID
	for _, y := range append([]ring.NodeID{x}, copiers...) {
		if o.entered(y) {
			named = append(named, y)
		}
	}
	added := !subset(named, o.shows) || !subset(departed, o.gone)
	if added {
		o.shows = sortedSet(append(slices.Clone(o.shows), named...))
		o.gone = sortedSet(append(slices.Clone(o.gone), departed...))
	}
	return added
}

// subset reports whether every member of a is in b.
func subset(a, b []ring.NodeID) bool {
	for _, id := range a {
		if !slices.Contains(b, id) {
			return false
		}
	}
	return true
}

// covers reports whether o, held over its replica set (and previous set),
// is what an acquisition over set after a change from prev (nil: no
// change) asks for: the same set, and a joint acquisition from prev when
// one is asked. A joint ownership also covers a plain acquisition of its
// set.
func (o *ownership) covers(set, prev []ring.NodeID) bool {
	return slices.Equal(o.replicas, set) && (prev == nil || slices.Equal(o.previous, prev))
}

// Holds reports whether k is held here (being acquired or served) as an
// AcquireWith of replicas and opts would hold it, so that such a call
// would do nothing.
func (c *Core) Holds(k Key, replicas []ring.NodeID, opts AcquireOptions) bool {
	o := c.owned[k]
	if o == nil {
		return false
	}
	set, prev := sortedSet(replicas), sortedSet(opts.Previous)
	if slices.Equal(prev, set) {
		prev = nil
	}
	return o.covers(set, prev)
}

// Resign stops serving k on this node without waiting: what was in flight
// fails (its outcome unknown).
func (c *Core) Resign(k Key) {
	if o := c.owned[k]; o != nil {
		c.stepDown(o, Epoch{})
	}
}

// Serving reports whether k is served here.
func (c *Core) Serving(k Key) bool {
	o := c.owned[k]
	return o != nil && o.phase == serving
}

// InFlight returns how many of k's writes (write-backs included) have not
// met their level, on a key owned here.
func (c *Core) InFlight(k Key) int {
	if o := c.owned[k]; o != nil {
		return len(o.inflight)
	}
	return 0
}

// Current returns the owner's newest record in slot for k, which may not
// have met its level yet: what a handler sees as its state.
func (c *Core) Current(k Key, slot Slot) (Record, bool) {
	o := c.owned[k]
	if o == nil || !o.served {
		return Record{}, false
	}
	if o.refreshing {
		r, ok := o.view[slot]
		return r, ok
	}
	r, ok := o.current[slot]
	return r, ok
}

// Write replaces k's record in slot with value (or a tombstone) on a
// served key. The ticket is done once the write and every earlier one met
// the level; what follows the write must wait for it. The core keeps
// value: the caller must not change it afterwards.
func (c *Core) Write(k Key, slot Slot, value []byte, tombstone bool) (Ticket, error) {
	if slot.Kind == KindPromise || slot.Kind > maxKind {
		return 0, ErrInvalidKind
	}
	o := c.owned[k]
	if o == nil || !o.served {
		return 0, ErrNotServing
	}
	if o.refreshing {
		// Written back with the rest once the key is acquired again.
		o.view[slot] = Record{Key: k, Kind: slot.Kind, Name: slot.Name, Tombstone: tombstone, Value: value}
		t := c.nextTicket()
		o.writes = append(o.writes, readWait{ticket: t})
		return t, nil
	}
	c.propose(o, Record{Key: k, Kind: slot.Kind, Name: slot.Name, Tombstone: tombstone, Value: value})
	t := c.nextTicket()
	o.writes = append(o.writes, readWait{ticket: t, version: o.version})
	c.drain()
	return t, nil
}

// Read returns the owner's records of k (every slot it holds) as a handler
// would see them and a ticket that is done once what they reflect met its
// level and a quorum confirmed, after that, that this node still holds the
// epoch. Reads wait together: one check round serves all that were waiting
// when it started.
func (c *Core) Read(k Key) (map[Slot]Record, Ticket, error) {
	o := c.owned[k]
	if o == nil || !o.served {
		return nil, 0, ErrNotServing
	}
	cur := o.current
	if o.refreshing {
		cur = o.view
	}
	view := make(map[Slot]Record, len(cur))
	for slot, r := range cur {
		view[slot] = r
	}
	t := c.nextTicket()
	o.reads = append(o.reads, readWait{ticket: t, version: o.version})
	c.maybeCheck(o)
	c.drain()
	return view, t, nil
}

// Tick sends again what has not been answered for a whole tick period
// (it was sent before the previous Tick): prepares, writes and the open
// check round, to the replicas that have not answered them; a message
// sent again waits twice as long before its next resend, up to
// maxResendTicks. Only keys with something unanswered are visited.
func (c *Core) Tick() {
	c.ticks++
	// Sent again after 2 ticks, then after twice as long each time up
	// to maxResendTicks: the transport is reliable and in order, so a
	// message goes unanswered for long only when a peer restarted or was
	// declared dead, or when it is large and slow to cross, which a fixed
	// period would send again and again while it still crosses.
	late := func(at uint64, tries uint8) bool {
		return c.ticks-at >= min(uint64(2)<<tries, maxResendTicks)
	}
	due := func(at *uint64, tries *uint8) bool {
		if !late(*at, *tries) {
			return false
		}
		*at = c.ticks
		if uint64(2)<<*tries < maxResendTicks {
			*tries++
		}
		return true
	}
	// Only the keys with something to send again are sorted (map order
	// must not reach the output): under load most keys waiting have
	// writes in flight for less than a tick.
	var keys []Key
	for k := range c.waiting {
		o := c.owned[k]
		if o == nil || (o.phase != preparing && len(o.inflight) == 0 && !o.roundOpen && o.sweep == nil) {
			delete(c.waiting, k)
			continue
		}
		if (o.sweep != nil && late(o.sweep.sentAt, o.sweep.tries)) ||
			(o.phase == preparing && late(o.preparedAt, o.prepareTries)) ||
			(o.roundOpen && late(o.roundAt, o.roundTries)) ||
			slices.ContainsFunc(o.inflight, func(p *proposal) bool { return late(p.sentAt, p.tries) }) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, compareKeys)
	for _, k := range keys {
		o := c.owned[k]
		if sw := o.sweep; sw != nil && due(&sw.sentAt, &sw.tries) {
			c.resweep(o, sw)
		}
		if o.phase == preparing && due(&o.preparedAt, &o.prepareTries) {
			for _, r := range o.prepared {
				if _, ok := o.promises[r]; !ok {
					c.send(o.prepare(r))
				}
			}
		}
		for _, p := range o.inflight {
			if !due(&p.sentAt, &p.tries) {
				continue
			}
			for _, r := range o.replicas {
				if !slices.Contains(p.acked, r) {
					c.send(Message{Type: MsgAccept, To: r, Key: k, Epoch: o.epoch, Records: p.recs[:]})
				}
			}
		}
		if o.roundOpen && due(&o.roundAt, &o.roundTries) {
			for _, r := range o.replicas {
				if !slices.Contains(o.roundAcked, r) {
					c.send(Message{Type: MsgCheck, To: r, Key: k, Epoch: o.epoch, Round: o.round})
				}
			}
		}
		c.drain()
	}
}

// resweep sends o's sweep again to the replicas that have not answered
// it: the tombstones they have not stored (once their writes met the
// level; until then they are sent again as writes), or the forget. After
// maxSweepTries it gives up: what was forgotten stays forgotten, the rest
// waits for the next sweep.
func (c *Core) resweep(o *ownership, sw *sweep) {
	if sw.resent >= maxSweepTries {
		o.sweep = nil
		o.sweepGaveUp = true
		return
	}
	sw.resent++
	if sw.forget {
		c.sendForgets(o, sw)
		return
	}
	for i, rec := range sw.recs {
		if rec.Version > o.committed {
			continue
		}
		for _, r := range o.replicas {
			if !slices.Contains(sw.held[i], r) {
				c.send(Message{Type: MsgAccept, To: r, Key: o.key, Epoch: o.epoch, Records: []Record{rec}})
			}
		}
	}
}

// maxResendTicks is the longest wait, in ticks, before an unanswered
// message is sent again (see Tick).
const maxResendTicks = 32

func compareKeys(a, b Key) int {
	return cmp.Or(strings.Compare(a.Type, b.Type), strings.Compare(a.ID, b.ID))
}

func (c *Core) nextTicket() Ticket {
	c.ticket++
	return c.ticket
}

func (c *Core) broadcast(o *ownership, m Message) {
	for _, r := range o.replicas {
		m.To = r
		c.send(m)
	}
}

// propose gives r the next version at o's epoch and sends it: whole, or
// as a delta to the replicas that acknowledged the slot's current record
// (see SetDeltaMin).
func (c *Core) propose(o *ownership, r Record) {
	o.version++
	r.Key = o.key
	r.Epoch = o.epoch
	r.Version = o.version
	p := &proposal{recs: [1]Record{r}, sentAt: c.ticks}
	p.acked = p.ackedRoom[:0]
	o.inflight = append(o.inflight, p)
	c.waiting[o.key] = struct{}{}
	if r.Kind == KindPromise {
		// A horizon is no record a handler sees.
		c.broadcast(o, Message{Type: MsgAccept, Key: o.key, Epoch: o.epoch, Records: p.recs[:]})
		return
	}
	o.current[r.Slot()] = r
	base := o.setBase(p, c.deltaMin)
	full := Message{Type: MsgAccept, Key: o.key, Epoch: o.epoch, Records: p.recs[:]}
	if base == nil || !slices.ContainsFunc(base.acked, func(id ring.NodeID) bool { return id != c.self }) {
		c.broadcast(o, full)
		return
	}
	edit, ok := appendDelta(nil, base.recs[0].Value, r.Value, len(r.Value)/2)
	if !ok {
		c.broadcast(o, full)
		return
	}
	head := r
	head.Value = nil
	delta := Message{Type: MsgAcceptDelta, Key: o.key, Epoch: o.epoch, Version: base.recs[0].Version, Records: []Record{head}, Delta: edit}
	for _, to := range o.replicas {
		// The owner's own replica takes the record whole: it crosses no
		// network.
		m := full
		if to != c.self && slices.Contains(base.acked, to) {
			m = delta
		}
		m.To = to
		c.send(m)
	}
}

// setBase makes p the base of its slot's next write if its value is at
// least deltaMin bytes (deltaMin > 0), and returns the base it replaces:
// the proposal of the slot's previous record, if that was a base and p is
// large enough to go as a delta.
func (o *ownership) setBase(p *proposal, deltaMin int) *proposal {
	slot := p.recs[0].Slot()
	i := slices.IndexFunc(o.bases, func(b *proposal) bool { return b.recs[0].Kind == slot.Kind && b.recs[0].Name == slot.Name })
	large := deltaMin > 0 && !p.recs[0].Tombstone && len(p.recs[0].Value) >= deltaMin
	switch {
	case i >= 0 && large:
		prev := o.bases[i]
		o.bases[i] = p
		return prev
	case i >= 0:
		o.bases = slices.Delete(o.bases, i, i+1)
	case large:
		o.bases = append(o.bases, p)
	}
	return nil
}

// proposal returns the proposal of version v still in flight or still a
// slot's base, or nil.
func (o *ownership) proposal(v uint64) *proposal {
	for _, p := range o.inflight {
		if p.recs[0].Version == v {
			return p
		}
	}
	for _, p := range o.bases {
		if p.recs[0].Version == v {
			return p
		}
	}
	return nil
}

func (c *Core) ownerStep(o *ownership, m Message) {
	// Only promises and refusals come from the previous set: writes and
	// checks go to the current one.
	from := o.replicas
	if m.Type == MsgPromise || m.Type == MsgRefuse {
		from = o.prepared
	}
	if !slices.Contains(from, m.From) {
		return
	}
	// A replica still receiving its range may lack what a quorum must
	// hold: its answers are not counted, nor remembered, so that what it
	// was sent is sent again once it counts. A nack counts nothing.
	if !m.Counted && m.Type != MsgRefuse && m.Type != MsgAcceptNack {
		return
	}
	switch m.Type {
	case MsgRefuse:
		if m.Floor && m.Promised.Compare(o.epoch) <= 0 {
			// A floor at or below o's epoch refused its prepare for not
			// listing its copiers or not naming its departures (see
			// replicaStep): o's caller did not name them. If o's set or
			// its caller's view shows them (see passes), o names them
			// and prepares again; otherwise it steps down.
			if o.restarts < maxRestarts && o.passes(m.Promised.Node, m.Reads, m.Gone) && o.learn(m.Promised.Node, m.Reads, m.Gone) {
				if c.restart(o) {
					return
				}
			}
			c.stepDownAt(o, m, true)
			return
		}
		if m.Promised.Compare(o.epoch) <= 0 {
			// Older than o's epoch, it refuses an acquisition again above
			// a floor: another node acquired since o's first (see
			// restart).
			if o.restarts > 0 && !m.Floor && m.Promised.Node != c.self && m.Promised.Compare(o.since) > 0 {
				c.stepDown(o, m.Promised)
			}
			return
		}
		// A floor names no newer owner but the copier that fenced the
		// key's range at a hand-off, and the departures it fenced it
		// for. An owner whose set holds the copier and none of them
		// acquired on a view that shows the change: it acquires again
		// above the floor, naming them, a few times in a row (a fencing
		// that keeps raising it is met by the caller's backoff instead),
		// keeping what waits on it if it served (see refresh). So does
		// an acquisition that has not served yet, and holds nothing a
		// client waits on, when the copier is in its previous set or
		// its caller's view shows it and the departures
		// (AcquireOptions.Copiers, Gone): the floor is from a change it
		// has seen (see passes). Otherwise the owner may be on a view
		// that lags the change, which the floor is there to stop: it
		// steps down, and its caller acquires again once its view shows
		// the copier and the departures.
		if m.Floor && o.restarts < maxRestarts && o.passes(m.Promised.Node, m.Reads, m.Gone) {
			o.learn(m.Promised.Node, m.Reads, m.Gone)
			// Refused again before it adopted, it keeps what it set aside.
			if !o.refreshing && o.served {
				o.refresh(m.Promised)
			}
			if c.restart(o) {
				return
			}
		}
		c.stepDownAt(o, m, m.Floor)
	case MsgPromise:
		if o.phase != preparing || o.promises[m.From].Type != 0 {
			return
		}
		o.promises[m.From] = m
		if o.promisedQuorum() {
			c.adopt(o)
		}
	case MsgAccepted:
		if p := o.proposal(m.Version); p != nil && !slices.Contains(p.acked, m.From) {
			p.acked = append(p.acked, m.From)
		}
		if sw := o.sweep; sw != nil && !sw.forget {
			for i, r := range sw.recs {
				if r.Version == m.Version && !slices.Contains(sw.held[i], m.From) {
					sw.held[i] = append(sw.held[i], m.From)
				}
			}
		}
		c.advance(o)
		c.maybeForget(o)
	case MsgForgotten:
		sw := o.sweep
		if sw == nil || !sw.forget || m.Version != sw.top || slices.Contains(sw.forgot, m.From) {
			return
		}
		sw.forgot = append(sw.forgot, m.From)
		if len(sw.forgot) < len(o.replicas) {
			c.sendForgets(o, sw)
			return
		}
		// Every replica erased them: so does the owner's view, but for
		// what a write put there since.
		maps.DeleteFunc(o.current, func(_ Slot, r Record) bool { return r.Version <= sw.top })
		o.sweep = nil
	case MsgAcceptNack:
		// The replica lacks the delta's base: the record goes whole at
		// once, unless the replica acknowledged it meanwhile (a nack of a
		// duplicate) or it is neither in flight nor a base any more.
		if p := o.proposal(m.Version); p != nil && !slices.Contains(p.acked, m.From) {
			c.send(Message{Type: MsgAccept, To: m.From, Key: o.key, Epoch: o.epoch, Records: p.recs[:]})
		}
	case MsgChecked:
		if !o.roundOpen || m.Round != o.round {
			return
		}
		if !slices.Contains(o.roundAcked, m.From) {
			o.roundAcked = append(o.roundAcked, m.From)
		}
		if len(o.roundAcked) >= o.quorum {
			c.ready.Done = append(c.ready.Done, o.roundReads...)
			o.roundOpen = false
			o.roundReads = nil
			c.maybeCheck(o)
		}
	}
}

// SweepKey starts collecting k if it is served here, holds nothing but
// tombstones, each of which expired says is old enough, and is not
// sweeping already; it reports whether a sweep started. Each tombstone is
// written again at the owner's epoch, and once every replica of the
// key's set (not only a quorum) stored all of them and counts, each
// replica is told to forget the key up to the last of them (MsgForget):
// it raises the key's horizon there, which erases them (see Horizon).
// A key with a live record keeps its tombstones. Every replica means the
// set the key is served over: during a change of set, a member only of
// the previous one may still hold an older record, which the horizon
// voids when a later owner adopts from it, as it does a former member's.
// A replica that does not answer keeps what it holds, which a later
// sweep collects.
func (c *Core) SweepKey(k Key, expired func(Record) bool) bool {
	o := c.owned[k]
	if o == nil || !o.collectable(expired) {
		return false
	}
	c.startSweep(o)
	return true
}

// SweepGaveUp reports whether the last sweep of k, served here, gave up:
// a replica of its set did not answer it (down, cut off, or still
// receiving the key's range, so that its answers do not count).
func (c *Core) SweepGaveUp(k Key) bool {
	o := c.owned[k]
	return o != nil && o.sweepGaveUp
}

// Sweeping reports whether a sweep of k is under way here.
func (c *Core) Sweeping(k Key) bool {
	o := c.owned[k]
	return o != nil && o.sweep != nil
}

// Empty reports whether k is served here and holds no record: none was
// written, or a sweep collected them.
func (c *Core) Empty(k Key) bool {
	o := c.owned[k]
	return o != nil && o.phase == serving && len(o.current) == 0
}

func (c *Core) startSweep(o *ownership) {
	old := slices.SortedFunc(maps.Values(o.current), func(a, b Record) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), strings.Compare(a.Name, b.Name))
	})
	sw := &sweep{sentAt: c.ticks}
	for _, r := range old {
		c.propose(o, Record{Kind: r.Kind, Name: r.Name, Tombstone: true, Value: r.Value})
		sw.recs = append(sw.recs, o.current[r.Slot()])
		sw.held = append(sw.held, nil)
		sw.top = o.version
	}
	o.sweep = sw
	o.sweepGaveUp = false
	c.drain()
}

// collectable reports whether o may start a sweep: served, not
// sweeping, and every record it holds (at least one, at most
// maxSweep) a tombstone that met the level and that expired says is old
// enough.
func (o *ownership) collectable(expired func(Record) bool) bool {
	if o.phase != serving || o.refreshing || o.sweep != nil || len(o.current) == 0 || len(o.current) > maxSweep {
		return false
	}
	for _, r := range o.current {
		if !r.Tombstone || r.Version > o.committed || !expired(r) {
			return false
		}
	}
	return true
}

// maybeForget sends o's sweep's forgets once every replica of the set
// stored each of its tombstones, unless a write since gave the key a
// record the sweep did not write: the sweep then ends.
func (c *Core) maybeForget(o *ownership) {
	sw := o.sweep
	if sw == nil || sw.forget {
		return
	}
	for i := range sw.recs {
		if len(sw.held[i]) < len(o.replicas) {
			return
		}
	}
	for _, r := range o.current {
		if r.Version > sw.top {
			o.sweep = nil
			return
		}
	}
	sw.held = nil
	sw.forget = true
	sw.sentAt, sw.tries, sw.resent = c.ticks, 0, 0
	c.waiting[o.key] = struct{}{}
	c.sendForgets(o, sw)
}

// sendForgets sends o's sweep's forget to the replicas that have not
// answered it: the others first, the owner's own replica once they all
// did, so that a sweep that gives up leaves the tombstones in the owner's
// store too, where its member finds them again (see Collectable).
func (c *Core) sendForgets(o *ownership, sw *sweep) {
	others := 0
	for _, r := range o.replicas {
		if r != c.self && !slices.Contains(sw.forgot, r) {
			others++
			c.send(Message{Type: MsgForget, To: r, Key: o.key, Epoch: o.epoch, Version: sw.top})
		}
	}
	if others == 0 && !slices.Contains(sw.forgot, c.self) {
		c.send(Message{Type: MsgForget, To: c.self, Key: o.key, Epoch: o.epoch, Version: sw.top})
	}
}

// promisedQuorum reports whether a quorum of the replica set promised,
// and during a change of set a quorum of the previous set too.
func (o *ownership) promisedQuorum() bool {
	count := func(set []ring.NodeID) int {
		n := 0
		for _, r := range set {
			if _, ok := o.promises[r]; ok {
				n++
			}
		}
		return n
	}
	if count(o.replicas) < o.quorum {
		return false
	}
	return o.previous == nil || count(o.previous) >= o.prevQuorum
}

// sortedSet returns the distinct members of set, sorted.
func sortedSet(set []ring.NodeID) []ring.NodeID {
	s := slices.Clone(set)
	slices.SortFunc(s, ring.NodeID.Compare)
	return slices.Compact(s)
}

// adopt takes, per slot, the newest record the promises carry and writes
// each back at o's epoch, so that what a quorum may hold is held by a
// quorum at this epoch before anything is served.
func (c *Core) adopt(o *ownership) {
	newest := make(map[Slot]Record)
	// Sorted replicas make the adopted set independent of map order.
	for _, r := range o.prepared {
		m, ok := o.promises[r]
		if !ok {
			continue
		}
		if h := (Horizon{Epoch: m.Promised, Version: m.Version}); h.After(o.horizon) {
			o.horizon = h
		}
		for _, rec := range m.Records {
			if old, ok := newest[rec.Slot()]; !ok || rec.newer(old) {
				newest[rec.Slot()] = rec
			}
		}
	}
	// A record the horizon covers is void: a tombstone collected, or a
	// record one replaced that a replica missing the delete still has.
	maps.DeleteFunc(newest, func(_ Slot, r Record) bool { return o.horizon.Covers(r) })
	o.promises = nil
	if o.refreshing {
		// A horizon above seenAt is another owner's collection since:
		// what it wrote and collected shows nowhere else.
		if o.horizon.Epoch.Compare(o.seenAt) > 0 || !o.unchanged(newest) {
			// Another owner wrote since: what waited is lost to it.
			c.stepDown(o, o.floor)
			return
		}
		// The write-back carries the writes made while refreshing too.
		newest = o.view
	}
	o.phase = writingBack
	if !o.horizon.IsZero() {
		// A replica of the write-back's quorum that missed the horizon
		// would give a void record back to a later owner.
		c.propose(o, PromiseRecord(o.key, Epoch{}, o.horizon))
	}
	slots := slices.SortedFunc(maps.Keys(newest), func(a, b Slot) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), strings.Compare(a.Name, b.Name))
	})
	for _, slot := range slots {
		rec := newest[slot]
		c.propose(o, Record{Kind: slot.Kind, Name: slot.Name, Tombstone: rec.Tombstone, Value: rec.Value})
	}
	o.serveAt = o.version
	if o.refreshing {
		// Every waiting write and read is done with the write-back.
		for i := range o.writes {
			o.writes[i].version = o.serveAt
		}
		for i := range o.reads {
			o.reads[i].version = o.serveAt
		}
		o.refreshing, o.seen, o.view, o.seenAt = false, nil, nil, Epoch{}
	}
	c.advance(o)
}

// advance moves the commit point past every leading write that met the
// level, releases what waited for it, and starts serving once the
// write-back is committed.
func (c *Core) advance(o *ownership) {
	n := 0
	for _, p := range o.inflight {
		if len(p.acked) < o.quorum {
			break
		}
		o.committed = p.recs[0].Version
		n++
	}
	o.inflight = o.inflight[n:]
	// A later write met the level before an earlier one: it waits, since
	// releasing it would let its effects leave before the earlier's.
	w := 0
	for _, wr := range o.writes {
		if wr.version > o.committed {
			break
		}
		c.ready.Done = append(c.ready.Done, wr.ticket)
		w++
	}
	o.writes = o.writes[w:]
	if o.phase == writingBack && o.committed >= o.serveAt {
		o.phase = serving
		o.served = true
		o.restarts = 0
		c.ready.Changes = append(c.ready.Changes, Change{Key: o.key, Serving: true, Epoch: o.epoch})
	}
	c.maybeCheck(o)
}

// maybeCheck opens a check round for the reads whose view has met its
// level, unless one is open: a round confirms only the reads that were
// waiting before it started.
func (c *Core) maybeCheck(o *ownership) {
	if o.roundOpen || o.phase != serving {
		return
	}
	var batch []Ticket
	rest := o.reads[:0]
	for _, r := range o.reads {
		if r.version <= o.committed {
			batch = append(batch, r.ticket)
		} else {
			rest = append(rest, r)
		}
	}
	o.reads = rest
	if len(batch) == 0 {
		return
	}
	o.round++
	o.roundOpen = true
	o.roundAt, o.roundTries = c.ticks, 0
	c.waiting[o.key] = struct{}{}
	o.roundReads = batch
	o.roundAcked = o.roundAcked[:0]
	c.broadcast(o, Message{Type: MsgCheck, Key: o.key, Epoch: o.epoch, Round: o.round})
}

// stepDown forgets o: whatever waited fails, and a newer owner (named by
// newer, when known) is reported.
func (c *Core) stepDown(o *ownership, newer Epoch) {
	c.stepDownAt(o, Message{Promised: newer}, false)
}

// stepDownAt is stepDown, reporting newer as a floor when floor is set
// (Change.Floor).
func (c *Core) stepDownAt(o *ownership, refusal Message, floor bool) {
	for _, w := range o.writes {
		c.ready.Failed = append(c.ready.Failed, w.ticket)
	}
	for _, r := range o.reads {
		c.ready.Failed = append(c.ready.Failed, r.ticket)
	}
	c.ready.Failed = append(c.ready.Failed, o.roundReads...)
	delete(c.owned, o.key)
	delete(c.waiting, o.key)
	ch := Change{Key: o.key, Epoch: refusal.Promised, Floor: floor}
	if floor {
		ch.Copiers, ch.Departed = refusal.Reads, refusal.Gone
	}
	c.ready.Changes = append(c.ready.Changes, ch)
}
