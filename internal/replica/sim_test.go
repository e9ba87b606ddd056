package replica

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"
	"github.com/troupe-go/troupe/internal/lincheck"
	"github.com/troupe-go/troupe/replication"
	"github.com/troupe-go/troupe/ring"
)

// recordKey is a record's place in what a simulated driver persisted.
type recordKey struct {
	key  Key
	slot Slot
}

// simNode is one node of the simulation: its core, what its driver
// persisted, and whether it is paused or receiving its ranges.
type simNode struct {
	id     ring.NodeID
	core   *Core
	stored map[recordKey]Record
	// replaced holds, per slot, the record the last one stored there
	// replaced: what a store that lost its last write still has.
	replaced map[recordKey]Record
	paused   bool
	// wiped is set for a node that lost its store (a new member
	// receiving its range); it counts again once it caught up.
	wiped bool
	// storedReceiving is what the driver persisted of the core's
	// receiving ranges (the store's receiving record): a restart
	// receives what it says, whatever the node was doing.
	storedReceiving []ring.Range
	// storedFloors is what the driver persisted of the core's floors.
	storedFloors []Floor
	// highest promised epoch seen per key, to check epochs never go back.
	seen map[Key]Epoch
	// tickets waiting at this node.
	ops map[Ticket]*simOp
	// abandoned holds tickets whose client stopped waiting.
	abandoned map[Ticket]bool
	// sets holds the replica set each key was acquired with.
	sets map[Key][]ring.NodeID
	// joint holds the previous set each key's acquisition named.
	joint map[Key][]ring.NodeID
}

// register names one linearizable register: a key's record of one kind.
type register struct {
	key  Key
	slot Slot
}

func (r register) String() string { return fmt.Sprintf("%v/%v", r.key.ID, r.slot) }

// A register operation and what its client learnt, as lincheck checks them.
type (
	regInput  = lincheck.Input[register]
	regOutput = lincheck.Output
)

type simOp struct {
	in   regInput
	out  regOutput
	call int64
}

// sim runs cores over a message bag the schedule draws from: any message
// may be delivered, duplicated, reordered or lost, and nodes crash, pause
// and are cut off from each other.
type sim struct {
	tb       fataler
	nodes    []*simNode
	replicas map[Key][]ring.NodeID
	level    replication.Level
	net      []Message
	cut      map[[2]string]bool
	now      int64
	history  []porcupine.Operation
	// busy counts the clients waiting for an answer: each of
	// maxClients clients has one operation at a time, which keeps the
	// histories small enough to check quickly.
	busy    int
	nextVal int
	// previous holds a key's replica set before a change of set, until
	// an acquisition that named it served (joint acquisitions only).
	previous map[Key][]ring.NodeID
	// plain makes acquisitions ignore previous: the unfenced change of
	// set that joint acquisitions fix.
	plain bool
	// wipedCounts makes a wiped node count at once, without catching up.
	wipedCounts bool
	// oneSource makes a catch-up copy from one source only, not a quorum.
	oneSource bool
	// volatileReceiving forgets the receiving ranges at a restart: a
	// wiped node restarts receiving only if its store is still empty,
	// as a driver that persisted no receiving record would.
	volatileReceiving bool
	// large makes the clients write values of about 2 KiB (see
	// largeValue) and every core send deltas from deltaMin bytes on.
	large    bool
	deltaMin int
	// lossy makes every crash of a simulation with large values (but one
	// while a node is receiving) lose records (see loseRecords).
	lossy bool
	// written holds the value of every record a client's write made, by
	// its epoch and version, so that every record a replica persists is
	// checked byte for byte against it (deltas included).
	written map[writtenKey][]byte
	// deltas and nacks count the delta accepts and nacks delivered.
	deltas, nacks int
	// sweeps makes owners collect their tombstones, every one at once,
	// at each tick and when the network heals.
	sweeps bool
	// noHorizon drops the horizons on their way (promises name none, an
	// accept of one is lost): what a collection without them would do.
	noHorizon bool
	// forgets counts the forgets delivered.
	forgets int
	// settling stops the sweeps at each tick while the network heals:
	// one sweep per node starts them.
	settling bool
	// trace, when set, is told what the schedule does (debugging).
	trace func(format string, args ...any)
	// lagging, when set, says whether an acquisition's caller is on a
	// view that shows none of the copiers: it names none, and a floor's
	// refusal makes it step down. lags has runSchedule set it.
	lagging func() bool
	lags    bool
	// departed lists the members the fences named departed from the
	// ring: acquisitions name them gone, but for those of a caller whose
	// view lags (lagging) or lags the departures alone (lagsLeaves).
	departed   []ring.NodeID
	lagsLeaves func() bool
	// floorDowns counts the acquisitions a floor made step down;
	// departureRefusals the prepares at or above a floor's term that it
	// refused for not naming its departures.
	floorDowns        int
	departureRefusals int
}

func (s *sim) tracef(format string, args ...any) {
	if s.trace != nil {
		s.trace("%4d "+format, append([]any{s.now}, args...)...)
	}
}

func recsString(rs []Record) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "[%v/%v t%d/%s v%d =%d]", r.Key.ID, r.Slot(), r.Epoch.Term, r.Epoch.Node.Addr, r.Version, decodeValue(r, true))
	}
	return b.String()
}

func msgString(m Message) string {
	return fmt.Sprintf("%s %s->%s key=%s ep=t%d/%s prom=t%d/%s floor=%v v=%d round=%d counted=%v range=%v recs=%s",
		m.Type, m.From.Addr, m.To.Addr, m.Key.ID, m.Epoch.Term, m.Epoch.Node.Addr, m.Promised.Term, m.Promised.Node.Addr, m.Floor, m.Version, m.Round, m.Counted, m.Range, recsString(m.Records))
}

// writtenKey names the record of one write.
type writtenKey struct {
	key     Key
	slot    Slot
	epoch   Epoch
	version uint64
}

// largeDeltaMin is the delta threshold of a simulation with large values.
const largeDeltaMin = 1024

// withLargeValues makes s's clients write large values and its cores send
// deltas.
func (s *sim) withLargeValues() {
	s.large = true
	s.deltaMin = largeDeltaMin
	for _, n := range s.nodes {
		n.core.SetDeltaMin(s.deltaMin)
	}
}

// encode returns the value a client writes for v: its uvarint, followed
// in a simulation with large values by a filler of about 2 KiB that
// carries v again at one of 16 places that v picks. Most values differ
// from the previous one in a few bytes (a delta), some also in length (a
// delta of another shape), and every seventh everywhere (sent whole).
// Two values differ where the next does not, so an edit applied to
// another base than its own gives a wrong value.
func (s *sim) encode(v int) []byte {
	b := encodeValue(v)
	if !s.large {
		return b
	}
	n := 2048
	if v%3 == 0 {
		n += 16
	}
	for i := range n {
		c := byte(i)
		if v%7 == 0 {
			c = byte(i*v + v>>3)
		}
		b = append(b, c)
	}
	binary.LittleEndian.PutUint64(b[16+64*(v%16):], uint64(v))
	return b
}

const maxClients = 5

func newSim(tb fataler, n int, level replication.Level, keys []Key) *sim {
	s := &sim{tb: tb, level: level, replicas: make(map[Key][]ring.NodeID), cut: make(map[[2]string]bool), previous: make(map[Key][]ring.NodeID), written: make(map[writtenKey][]byte)}
	for i := range n {
		id := ring.NodeID{Addr: fmt.Sprintf("n%d", i), Incarnation: 1}
		s.nodes = append(s.nodes, &simNode{id: id, core: New(id, Counting), stored: make(map[recordKey]Record), replaced: make(map[recordKey]Record), seen: make(map[Key]Epoch), ops: make(map[Ticket]*simOp), abandoned: make(map[Ticket]bool), sets: make(map[Key][]ring.NodeID), joint: make(map[Key][]ring.NodeID)})
	}
	for i, k := range keys {
		var set []ring.NodeID
		for j := range min(3, n) {
			set = append(set, s.nodes[(i+j)%n].id)
		}
		s.replicas[k] = set
	}
	return s
}

func (s *sim) node(id ring.NodeID) *simNode {
	for _, n := range s.nodes {
		if n.id == id {
			return n
		}
	}
	return nil
}

// apply carries out a node's Ready in the order the driver contract
// requires and checks that promises never go back.
func (s *sim) apply(n *simNode) {
	rd := n.core.Ready()
	for _, ch := range rd.Changes {
		if ch.Floor {
			s.floorDowns++
		}
	}
	if s.trace != nil {
		for _, ch := range rd.Changes {
			s.tracef("  %s change %v serving=%v epoch=t%d/%s", n.id.Addr, ch.Key.ID, ch.Serving, ch.Epoch.Term, ch.Epoch.Node.Addr)
		}
		for _, t := range rd.Done {
			if op := n.ops[t]; op != nil {
				s.tracef("  %s done ticket %d %v", n.id.Addr, t, lincheck.Model[register]().DescribeOperation(op.in, op.out))
			}
		}
		for _, t := range rd.Failed {
			if op := n.ops[t]; op != nil {
				s.tracef("  %s failed ticket %d %v", n.id.Addr, t, lincheck.Model[register]().DescribeOperation(op.in, op.out))
			}
		}
		if rd.Floors != nil {
			s.tracef("  %s floors %v", n.id.Addr, rd.Floors)
		}
		for _, r := range rd.Persist {
			s.tracef("  %s persist %s", n.id.Addr, recsString([]Record{r}))
		}
	}
	for _, r := range rd.Persist {
		if want, ok := s.written[writtenKey{r.Key, r.Slot(), r.Epoch, r.Version}]; ok && !r.Tombstone && !r.Erases() && !bytes.Equal(r.Value, want) {
			s.tb.Fatalf("%s persisted %v version %d at %v as %d bytes that differ from the %d written", n.id, r.Slot(), r.Version, r.Epoch, len(r.Value), len(want))
		}
		rk := recordKey{r.Key, r.Slot()}
		if r.Erases() {
			if old, ok := n.stored[rk]; ok {
				n.replaced[rk] = old
			}
			delete(n.stored, rk)
			continue
		}
		if r.Kind == KindPromise && s.noHorizon {
			r.Value = nil
		}
		if r.Kind == KindPromise {
			if r.Epoch.Compare(n.stored[rk].Epoch) < 0 {
				s.tb.Fatalf("%s persisted promise %v below its stored %v for %v", n.id, r.Epoch, n.stored[rk].Epoch, r.Key)
			}
		}
		if old, ok := n.stored[rk]; ok && r.Kind != KindPromise {
			n.replaced[rk] = old
		}
		n.stored[rk] = r
	}
	if rd.Floors != nil {
		n.storedFloors = rd.Floors
	}
	s.net = append(s.net, rd.Messages...)
	s.now++
	for _, t := range rd.Done {
		op := n.ops[t]
		delete(n.ops, t)
		if op == nil {
			if !n.abandoned[t] {
				s.tb.Fatalf("%s released unknown ticket %d", n.id, t)
			}
			continue
		}
		s.busy--
		s.history = append(s.history, porcupine.Operation{ClientId: len(s.history), Input: op.in, Call: op.call, Output: op.out, Return: s.now})
	}
	for _, t := range rd.Failed {
		s.fail(n, t)
	}
	for _, ch := range rd.Changes {
		if !ch.Serving {
			delete(n.sets, ch.Key)
			delete(n.joint, ch.Key)
			continue
		}
		// Once an acquisition that named the previous set served, a
		// quorum of the new set holds what the previous one acknowledged
		// and a quorum of the previous set is fenced: later acquisitions
		// name the new set alone.
		if prev, ok := n.joint[ch.Key]; ok && slices.Equal(prev, s.previous[ch.Key]) {
			delete(s.previous, ch.Key)
		}
	}
	for k, ks := range n.core.keys {
		e := ks.promised
		if !n.wiped && e.Compare(n.seen[k]) < 0 {
			s.tb.Fatalf("%s: promised epoch for %v went back from %v to %v", n.id, k, n.seen[k], e)
		}
		n.seen[k] = e
	}
}

// fail records an operation whose outcome is unknown: a write may have
// happened (it may linearize any time after its call), a read has no
// effect and is left out.
func (s *sim) fail(n *simNode, t Ticket) {
	op, ok := n.ops[t]
	delete(n.ops, t)
	if ok {
		s.busy--
	}
	if op == nil || op.in.Op == lincheck.Read || (op.in.Op == lincheck.CAS && !op.out.OK) {
		return
	}
	out := op.out
	out.Unknown = true
	s.history = append(s.history, porcupine.Operation{ClientId: len(s.history), Input: op.in, Call: op.call, Output: out, Return: lincheck.Pending})
}

func (s *sim) deliver(i int, keep bool) {
	m := s.net[i]
	if !keep {
		s.net = slices.Delete(s.net, i, i+1)
	}
	if s.cut[[2]string{m.From.Addr, m.To.Addr}] {
		return
	}
	if m.Type == MsgRefuse && m.Floor && len(m.Gone) > 0 && m.Promised.Compare(m.Epoch) <= 0 {
		s.departureRefusals++
	}
	to := s.node(m.To)
	if to == nil || to.paused {
		if !keep && to != nil && to.paused {
			// A paused process still has the message in its socket.
			s.net = append(s.net, m)
		}
		return
	}
	if s.noHorizon {
		switch {
		case m.Type == MsgPromise:
			m.Promised, m.Version = Epoch{}, 0
		case m.Type == MsgAccept && m.Records[0].Kind == KindPromise:
			// The owner's own promise named its horizon: the replica
			// is given one older than any epoch, which voids nothing.
			m.Records = []Record{m.Records[0]}
			m.Records[0].Value = PromiseRecord(m.Key, Epoch{}, Horizon{Epoch: Epoch{Node: ring.NodeID{Incarnation: 1}}}).Value
		}
	}
	switch m.Type {
	case MsgForget:
		s.forgets++
	case MsgAcceptDelta:
		s.deltas++
	case MsgAcceptNack:
		s.nacks++
	}
	s.tracef("deliver %s", msgString(m))
	to.core.Step(m)
	s.apply(to)
}

func (s *sim) tick(n *simNode) {
	n.core.Tick()
	s.apply(n)
	if s.sweeps && !s.settling {
		s.sweep(n)
	}
}

// sweep has n start collecting every tombstone of the keys it serves, on
// at most 8 keys in key order, as a driver's collector does a batch.
func (s *sim) sweep(n *simNode) {
	keys := slices.SortedFunc(maps.Keys(s.replicas), compareKeys)
	started := 0
	for _, k := range keys {
		if started < 8 && n.core.SweepKey(k, func(Record) bool { return true }) {
			started++
		}
	}
	if started > 0 {
		s.tracef("sweep %s: %d keys", n.id.Addr, started)
	}
	s.apply(n)
}

func (s *sim) acquire(n *simNode, k Key) {
	var opts AcquireOptions
	if !s.plain {
		opts.Previous = s.previous[k]
	}
	// The simulation's view is every node's, and shows every change it
	// makes: each member's floors, those of its earlier incarnations
	// included, are from changes the caller has seen; unless the caller
	// lags, and names none.
	if s.lagging == nil || !s.lagging() {
		for _, m := range s.nodes {
			for inc := uint64(1); inc <= m.id.Incarnation; inc++ {
				opts.Copiers = append(opts.Copiers, ring.NodeID{Addr: m.id.Addr, Incarnation: inc})
			}
		}
		if s.lagsLeaves == nil || !s.lagsLeaves() {
			opts.Gone = slices.Clone(s.departed)
		}
	}
	// Acquiring a key held as asked does nothing; one held otherwise
	// steps down first (as the driver does), so that the step-down is
	// applied before the new acquisition is recorded.
	if n.core.Holds(k, s.replicas[k], opts) {
		return
	}
	n.core.Resign(k)
	s.apply(n)
	n.sets[k] = slices.Clone(s.replicas[k])
	if opts.Previous != nil {
		n.joint[k] = slices.Clone(opts.Previous)
	}
	if err := n.core.AcquireWith(k, s.replicas[k], s.level, opts); err != nil {
		s.tb.Fatalf("acquire %v on %s: %v", k, n.id, err)
	}
	if o := n.core.owned[k]; o != nil {
		s.tracef("acquire %v on %s set=%v prev=%v epoch=t%d", k.ID, n.id.Addr, o.replicas, o.previous, o.epoch.Term)
	}
	s.apply(n)
}

// changeSet moves k's replica set as a joining member would: a member
// outside the set takes the first place and the last member leaves the
// set while it lives on (and may still serve k), or, a third of the time,
// stays in it. One change at a time
// per key, as placement moves keys one member per step.
func (s *sim) changeSet(k Key, pick func(int) int) {
	set := s.replicas[k]
	if _, changing := s.previous[k]; changing {
		return
	}
	var outside []ring.NodeID
	for _, n := range s.nodes {
		if !slices.Contains(set, n.id) {
			outside = append(outside, n.id)
		}
	}
	if len(outside) == 0 {
		return
	}
	s.previous[k] = slices.Clone(set)
	joined := outside[pick(len(outside))]
	var departed []ring.NodeID
	if pick(3) == 0 {
		// The set grows, as a new cluster's sets do.
		s.replicas[k] = append([]ring.NodeID{joined}, set...)
	} else {
		s.replicas[k] = append([]ring.NodeID{joined}, set[:len(set)-1]...)
		// With lagging views, the member that left the set is taken as
		// departed from the ring (a leave or a removal, though it lives
		// on here): the fence names it, and only acquisitions naming it
		// gone pass. (Only then: the other schedules stay as they were.)
		if s.lags {
			departed = set[len(set)-1:]
		}
	}
	s.tracef("changeSet %v from %v to %v", k.ID, set, s.replicas[k])
	// Half the time the member that joined the set fences the key's
	// range, as a hand-off's copy does: owners of the previous set below
	// the floor step down, owners of the new one acquire again above it.
	if n := s.node(joined); n != nil && !n.paused && pick(2) == 0 {
		s.fence(n, k, pick, departed)
	}
}

// crash restarts n from what it persisted: everything in memory is lost,
// and what waited there has an unknown outcome.
func (s *sim) crash(n *simNode) {
	s.tracef("crash %s", n.id)
	tickets := make([]Ticket, 0, len(n.ops))
	for t := range n.ops {
		tickets = append(tickets, t)
	}
	slices.Sort(tickets)
	for _, t := range tickets {
		s.fail(n, t)
	}
	n.core = New(n.id, Counting)
	n.core.SetDeltaMin(s.deltaMin)
	n.core.AddReceiving(n.storedReceiving...)
	if s.volatileReceiving && len(n.stored) > 0 {
		n.core.CountEverywhere()
	}
	n.sets = make(map[Key][]ring.NodeID)
	n.joint = make(map[Key][]ring.NodeID)
	n.abandoned = make(map[Ticket]bool)
	recs := make([]Record, 0, len(n.stored))
	for _, r := range n.stored {
		recs = append(recs, r)
	}
	n.core.Restore(recs...)
	n.core.RestoreFloors(n.storedFloors...)
	n.paused = false
}

// fence has n fence k's range at the key's replicas (and its previous
// set's, during a change) at a term above every term n knows for it, as
// a hand-off's copy does; the fences and their answers travel like any
// message. Owners below the floor acquire again above it.
func (s *sim) fence(n *simNode, k Key, pick func(int) int, departed []ring.NodeID) {
	set := slices.Clone(s.replicas[k])
	if prev, ok := s.previous[k]; ok {
		set = sortedSet(append(set, prev...))
	}
	t := k.Token()
	rng := ring.Range{Start: t - 1, End: t}
	term := n.core.HighestTerm(rng) + 1 + uint64(pick(3))
	s.tracef("fence %v by %s at t%d sources %v departed %v", k.ID, n.id.Addr, term, set, departed)
	for _, d := range departed {
		if !slices.Contains(s.departed, d) {
			s.departed = append(s.departed, d)
		}
	}
	for _, r := range set {
		s.net = append(s.net, Message{Type: MsgFence, From: n.id, To: r, Range: rng, Round: 1, Epoch: Epoch{Term: term}, Gone: departed})
	}
}

// wipe turns n into a new member with an empty store that must not count
// until it received its ranges. Like any new process it has a new
// incarnation, which takes the old one's place in the replica sets.
func (s *sim) wipe(n *simNode) {
	old := n.id
	n.id.Incarnation++
	s.tracef("wipe %s", old)
	for _, sets := range []map[Key][]ring.NodeID{s.replicas, s.previous} {
		for _, set := range sets {
			if i := slices.Index(set, old); i >= 0 {
				set[i] = n.id
			}
		}
	}
	n.stored = make(map[recordKey]Record)
	n.replaced = make(map[recordKey]Record)
	n.storedFloors = nil
	n.wiped = true
	// The driver records the whole ring as receiving before its first
	// answer, so that a restart before the catch-up still receives.
	n.storedReceiving = []ring.Range{{}}
	if s.wipedCounts {
		n.storedReceiving = nil
	}
	n.seen = make(map[Key]Epoch)
	s.crash(n)
}

// loseRecords restarts n from a store that lost the last write of most
// of its slots (not its promises: it keeps its identity, and the epochs
// it may have used as an owner are above what it promised), leaving the
// record that write replaced or nothing, as a driver restarts after an
// unclean stop: receiving the whole ring until it caught up. Owners
// that saw it acknowledge a record it lost may send it a delta of that
// record, which it must refuse (a nack), whether it holds nothing or an
// older version.
func (s *sim) loseRecords(n *simNode, pick func(int) int) {
	lost := slices.SortedFunc(maps.Keys(n.stored), func(a, b recordKey) int {
		return cmp.Or(compareKeys(a.key, b.key), cmp.Compare(a.slot.Kind, b.slot.Kind), strings.Compare(a.slot.Name, b.slot.Name))
	})
	for _, rk := range lost {
		if rk.slot.Kind == KindPromise || pick(4) == 0 {
			continue
		}
		if old, ok := n.replaced[rk]; ok && pick(2) == 0 {
			n.stored[rk] = old
		} else {
			delete(n.stored, rk)
		}
		delete(n.replaced, rk)
	}
	n.wiped = true
	n.storedReceiving = []ring.Range{{}}
	s.crash(n)
}

// catchUp copies to a wiped node, for each key it is a replica of, the
// records of a quorum (at the run's level) of the key's other replicas,
// chosen by pick, as the driver's CatchUp does from its sources: each
// record is kept if newer than what the node holds (it has been storing
// the accepts it was sent since it restarted). Then the node counts.
// The sources must not be wiped themselves.
func (s *sim) catchUp(n *simNode, pick func(int) int) bool {
	for _, o := range s.nodes {
		if o != n && o.wiped {
			return false
		}
	}
	keys := slices.SortedFunc(maps.Keys(s.replicas), compareKeys)
	for _, k := range keys {
		set := slices.Clone(s.replicas[k])
		if prev, ok := s.previous[k]; ok {
			set = sortedSet(append(set, prev...))
		}
		if !slices.Contains(set, n.id) {
			continue
		}
		others := slices.DeleteFunc(set, func(id ring.NodeID) bool { return id == n.id })
		q := s.level.Quorum(len(others))
		if _, changing := s.previous[k]; changing {
			// Each set's quorum must meet the sources: take them all.
			q = len(others)
		}
		if s.oneSource {
			q = 1
		}
		for range q {
			i := pick(len(others))
			src := s.node(others[i])
			others = slices.Delete(others, i, i+1)
			var recs []Record
			for rk, r := range src.stored {
				if rk.key == k {
					recs = append(recs, r)
				}
			}
			slices.SortFunc(recs, func(a, b Record) int {
				return cmp.Or(cmp.Compare(a.Kind, b.Kind), strings.Compare(a.Name, b.Name))
			})
			n.core.CatchUp(recs...)
			s.apply(n)
		}
	}
	n.core.Received(ring.Range{})
	// Recorded once the chunks are persisted (apply above).
	n.storedReceiving = n.core.Receiving()
	n.wiped = false
	return true
}

func encodeValue(v int) []byte { return binary.AppendUvarint(nil, uint64(v)) }

func decodeValue(r Record, ok bool) int {
	if !ok || r.Tombstone {
		return 0
	}
	v, _ := binary.Uvarint(r.Value)
	return int(v)
}

// clientOp runs one register operation at n, which must serve the key.
func (s *sim) clientOp(n *simNode, reg register, kind lincheck.Op, casOld int) {
	if s.busy < maxClients {
		s.issue(n, reg, kind, casOld)
	}
}

// issue runs one register operation at n, whether or not a client is
// free, if n serves the key.
func (s *sim) issue(n *simNode, reg register, kind lincheck.Op, casOld int) {
	// An owner acquiring again after a floor refused it takes requests.
	if !takes(n, reg.key) {
		return
	}
	s.busy++
	op := &simOp{in: regInput{Key: reg, Op: kind}, call: s.now}
	var t Ticket
	var err error
	switch kind {
	case lincheck.Read:
		var view map[Slot]Record
		view, t, err = n.core.Read(reg.key)
		r, ok := view[reg.slot]
		op.out.Value = decodeValue(r, ok)
	case lincheck.Write:
		s.nextVal++
		op.in.New = s.nextVal
		if s.nextVal%5 == 0 || (s.sweeps && s.nextVal%5 == 2) {
			op.in.New = 0 // a delete leaves a tombstone
		}
		t, err = n.core.Write(reg.key, reg.slot, s.encode(op.in.New), op.in.New == 0)
	case lincheck.CAS:
		s.nextVal++
		op.in.Old, op.in.New = casOld, s.nextVal
		cur, ok := n.core.Current(reg.key, reg.slot)
		if decodeValue(cur, ok) == casOld {
			op.out.OK = true
			t, err = n.core.Write(reg.key, reg.slot, s.encode(op.in.New), false)
		} else {
			_, t, err = n.core.Read(reg.key)
		}
	}
	if err != nil {
		s.tb.Fatalf("%v at serving %s: %v", kind, n.id, err)
	}
	if r, ok := n.core.Current(reg.key, reg.slot); ok && kind != lincheck.Read {
		s.written[writtenKey{reg.key, reg.slot, r.Epoch, r.Version}] = r.Value
	}
	n.ops[t] = op
	s.tracef("issue %s ticket %d %v", n.id.Addr, t, lincheck.Model[register]().DescribeOperation(op.in, op.out))
	s.apply(n)
}

// settle heals everything and delivers until nothing is left in flight.
// Membership removes replaced incarnations: owners whose replica set
// named one give the key up, as a placement change makes them.
func (s *sim) settle() {
	s.cut = make(map[[2]string]bool)
	for _, n := range s.nodes {
		n.paused = false
	}
	for _, n := range s.nodes {
		if n.wiped {
			s.catchUp(n, func(n int) int { return 0 })
		}
	}
	for _, n := range s.nodes {
		for _, k := range slices.SortedFunc(maps.Keys(n.sets), compareKeys) {
			prev, joint := n.joint[k]
			if set := n.sets[k]; !slices.Equal(set, s.replicas[k]) || (joint && !slices.Equal(prev, s.previous[k])) {
				n.core.Resign(k)
				s.apply(n)
			}
		}
	}
	if s.sweeps {
		for _, n := range s.nodes {
			s.sweep(n)
		}
		s.settling = true
		defer func() { s.settling = false }()
	}
	// Ticks go on while a core waits for an answer: a lost message is
	// sent again only after its resend period, which doubles up to
	// maxResendTicks, so an empty network does not mean all is answered.
	for range 4 * maxResendTicks {
		for len(s.net) > 0 {
			s.deliver(0, false)
		}
		for _, n := range s.nodes {
			s.tick(n)
		}
		if len(s.net) > 0 {
			continue
		}
		waiting := false
		for _, n := range s.nodes {
			waiting = waiting || len(n.core.waiting) > 0
		}
		if !waiting {
			return
		}
	}
	if len(s.net) > 0 {
		s.tb.Fatalf("messages still in flight after healing: %+v", s.net)
	}
}

// finalReads acquires each register's key on its first replica and reads
// it, so that the history ends with what survived.
func (s *sim) finalReads(regs []register) {
	for _, reg := range regs {
		n := s.node(s.replicas[reg.key][0])
		for range 5 {
			if n.core.Serving(reg.key) {
				break
			}
			s.acquire(n, reg.key)
			s.settle()
		}
		if !n.core.Serving(reg.key) {
			o := n.core.owned[reg.key]
			if o != nil {
				s.tb.Fatalf("%s could not serve %v on a healed network: set %v previous %v promises %v phase %v inflight %d", n.id, reg.key, o.replicas, o.previous, len(o.promises), o.phase, len(o.inflight))
			}
			s.tb.Fatalf("%s could not serve %v on a healed network", n.id, reg.key)
		}
		before := len(n.ops)
		s.clientOp(n, reg, lincheck.Read, 0)
		s.settle()
		if len(n.ops) > before {
			s.tb.Fatalf("final read of %v on %s not answered on a healed network", reg, n.id)
		}
	}
}

// fataler is what the simulation needs of testing.T or rapid.T.
type fataler interface {
	Fatalf(format string, args ...any)
}

// abandon ends the run: whatever still waits has an unknown outcome.
func (s *sim) abandon() {
	for _, n := range s.nodes {
		tickets := make([]Ticket, 0, len(n.ops))
		for t := range n.ops {
			tickets = append(tickets, t)
		}
		slices.Sort(tickets)
		for _, t := range tickets {
			s.fail(n, t)
		}
	}
}

// anyWiped reports whether a node is receiving its ranges. The simulation
// replaces one member at a time, as placement moves keys one member per
// step.
func (s *sim) anyWiped() bool {
	for _, n := range s.nodes {
		if n.wiped {
			return true
		}
	}
	return false
}

// takeOver pauses a node serving k, lets another replica acquire k and
// write while up to deliveries messages are delivered, then resumes the
// paused owner and has it read or write at once, before the messages
// that would tell it about the new owner arrive.
func (s *sim) takeOver(k Key, pick func(int) int, deliveries int) {
	i := slices.IndexFunc(s.nodes, func(n *simNode) bool { return !n.paused && n.core.Serving(k) })
	if i < 0 {
		return
	}
	// The pause is the fault here: links are healed first.
	s.cut = make(map[[2]string]bool)
	a := s.nodes[i]
	a.paused = true
	s.tracef("takeOver %v: paused %s", k.ID, a.id.Addr)
	var others []*simNode
	for _, id := range s.replicas[k] {
		if n := s.node(id); n != nil && n != a && !n.paused {
			others = append(others, n)
		}
	}
	if len(others) > 0 {
		b := others[pick(len(others))]
		// A refused acquisition has learnt the newer term: try again.
		for range 3 {
			if b.core.Serving(k) {
				break
			}
			s.acquire(b, k)
			s.deliverSome(pick, deliveries)
		}
		s.issue(b, register{k, Slot{Kind: KindState}}, lincheck.Write, 0)
		s.deliverSome(pick, deliveries)
	}
	a.paused = false
	s.tracef("takeOver %v: resumed %s", k.ID, a.id.Addr)
	s.issue(a, register{k, Slot{Kind: KindState}}, lincheck.Op(pick(2)), 0)
}

// deliverSome delivers up to n random messages, skipping those for
// paused nodes.
func (s *sim) deliverSome(pick func(int) int, n int) {
	for range n {
		var live []int
		for i, m := range s.net {
			if to := s.node(m.To); to != nil && !to.paused {
				live = append(live, i)
			}
		}
		if len(live) == 0 {
			return
		}
		s.deliver(live[pick(len(live))], false)
	}
}

// expire gives up on operations that waited longer than timeout, as a
// client's deadline would: their outcome is unknown.
func (s *sim) expire(timeout int64) {
	for _, n := range s.nodes {
		var late []Ticket
		for t, op := range n.ops {
			if s.now-op.call > timeout {
				late = append(late, t)
			}
		}
		slices.Sort(late)
		for _, t := range late {
			n.abandoned[t] = true
			s.fail(n, t)
		}
	}
}
