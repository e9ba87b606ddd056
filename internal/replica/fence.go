package replica

import (
	"math"
	"slices"

	"github.com/troupe-go/troupe/ring"
)

// Fencing a range at a hand-off's sources.
//
// A new replica x that copies a range from its previous replica set P
// first fences the range at the sources it copies from: each raises the
// range's floor (see Floor) to a term G above every term it promised for
// a key of the range, so an owner of P acquired before the fence gets no
// further write acknowledged by it. The fenced sources are n-q+1 of P, so
// they meet the quorum every such owner acquired from: one of them
// reported a term at or above the owner's, and G is above it. Every
// quorum of P contains a fenced source, so such an owner is refused from
// then on, and what it had acknowledged before was on a quorum of P,
// which the copy, read after the fence, meets.

// fence answers a fence of m.Range at m.Epoch.Term: it reports the
// highest term promised, or held in a record, for a key of the range, or
// of a floor of another copier over a token of it, before the fence,
// then raises the range's floor to that term and the copier, m.From,
// keeping the copiers of earlier fences and adding the departures the
// fence names (see Floor; persisted before the answer leaves:
// Ready.Floors). A replica still
// receiving part of the range raises nothing and answers not counted:
// what it holds does not stand for a quorum; unless the driver marked the
// fence Cycle (the replica waits for the range on the copier alone), when
// it fences and answers so (see Message.Cycle).
//
// Another copier's floor counts because a floor names its copier: an
// earlier hand-off's floor above the fence's term would stay where the
// fence raised nothing, naming a copier that an owner of the previous
// set may hold in its set, and such an owner acquires again above it
// instead of stepping down (see Floor). The copier's next round is above
// it. Its own floors (a fence sent again, an earlier round) name it
// already.
func (c *Core) fence(m Message) {
	high := c.floors.highest(m.Range, m.From)
	c.tokens.each(m.Range, func(ks *keyState) {
		high = max(high, ks.promised.Term)
		for _, r := range ks.records {
			high = max(high, r.Epoch.Term)
		}
	})
	counted := !slices.ContainsFunc(c.receiving, func(g ring.Range) bool { return Overlap(g, m.Range) })
	cycle := !counted && m.Cycle
	if counted || cycle {
		var changed bool
		if c.floors, changed = c.floors.raise(m.Range, Epoch{Term: m.Epoch.Term, Node: m.From}, nil, m.Gone); changed {
			c.ready.Floors = c.floors.list()
		}
	}
	c.send(Message{Type: MsgFenced, To: m.From, Range: m.Range, Round: m.Round, Epoch: Epoch{Term: m.Epoch.Term}, Promised: Epoch{Term: high}, Counted: counted, Cycle: cycle})
}

// Fencer is a copier's side of fencing a range at its sources, rounds of
// MsgFence and their answers, without goroutines or clocks: the driver
// sends Messages, steps the answers in, and sends Messages again when a
// round changes or nothing came back for a while.
//
// A source that waits for the range on this copier alone (Cycle) counts
// as fenced: what it holds is all the copy will ever get from it.
//
// A round fences every source at one term G. A source that reports a
// term at or above G may have promised an owner that G does not fence, so
// a new round fences every source again at the highest term reported plus
// one. The range is fenced once quorum sources answered the current round
// counted with terms below its G: Fenced names them, and only they may
// count toward the copy's quorum, each once its copy, read after its
// fence, is done.
type Fencer struct {
	self    ring.NodeID
	id      uint64
	rng     ring.Range
	sources []ring.NodeID
	quorum  int
	// term is the current round's G.
	term uint64
	// fenced and receiving list the sources that answered the current
	// round: counted with a term below G, or not counted.
	fenced    []ring.NodeID
	receiving []ring.NodeID
	rounds    int
	exhausted bool
	// departed are the members whose departure from the ring the copy is
	// for (see Floor.Departed).
	departed []ring.NodeID
}

// Departing names the members whose departure from the ring (a leave,
// a removal, a process replaced by a newer one at its address) gave the
// range to this copier: the fences raise floors that refuse a prepare
// that does not name them gone (see Floor). It returns f.
func (f *Fencer) Departing(members []ring.NodeID) *Fencer {
	f.departed = sortedSet(members)
	return f
}

// NewFencer returns the fencing of rng at sources (quorum of them must be
// fenced) by node self, which knows no term above known for a key of rng.
// id names the fencing in its messages (Round), for the driver to route
// the answers.
func NewFencer(self ring.NodeID, id uint64, rng ring.Range, sources []ring.NodeID, quorum int, known uint64) *Fencer {
	f := &Fencer{self: self, id: id, rng: rng, sources: sortedSet(sources), quorum: quorum, rounds: 1}
	if known == math.MaxUint64 {
		f.exhausted = true
	}
	f.term = known + 1
	return f
}

// Term returns the term G of the current round.
func (f *Fencer) Term() uint64 { return f.term }

// Rounds returns how many rounds the fencing took so far.
func (f *Fencer) Rounds() int { return f.rounds }

// Messages returns the current round's fences to the sources that have
// not answered it.
func (f *Fencer) Messages() []Message {
	if f.exhausted {
		return nil
	}
	var out []Message
	for _, s := range f.sources {
		if slices.Contains(f.fenced, s) || slices.Contains(f.receiving, s) {
			continue
		}
		m := Message{Type: MsgFence, From: f.self, To: s, Range: f.rng, Round: f.id, Epoch: Epoch{Term: f.term, Node: f.self}, Gone: f.departed}
		if f.quorum == len(f.sources) {
			m.Reads = f.sources // the copy reads them all (see Message.Reads)
		}
		out = append(out, m)
	}
	return out
}

// Step takes a source's answer. An answer to another fencing, to an
// earlier round, or from a node that is not a source is ignored. It
// reports whether the answer started a new round (send Messages).
func (f *Fencer) Step(m Message) (newRound bool) {
	if m.Type != MsgFenced || m.Round != f.id || m.Epoch.Term != f.term || f.exhausted ||
		!slices.Contains(f.sources, m.From) || slices.Contains(f.fenced, m.From) || slices.Contains(f.receiving, m.From) {
		return false
	}
	switch {
	case !m.Counted && !m.Cycle:
		f.receiving = append(f.receiving, m.From)
	case m.Promised.Term >= f.term:
		if m.Promised.Term == math.MaxUint64 {
			f.exhausted = true
			return false
		}
		f.term = m.Promised.Term + 1
		f.fenced, f.receiving = f.fenced[:0], f.receiving[:0]
		f.rounds++
		return true
	default:
		f.fenced = append(f.fenced, m.From)
	}
	return false
}

// Fenced returns the fenced sources once quorum of them answered the
// current round counted with terms below its G; ok is false until then.
func (f *Fencer) Fenced() (sources []ring.NodeID, ok bool) {
	if len(f.fenced) < f.quorum {
		return nil, false
	}
	return slices.Clone(f.fenced), true
}

// Receiving returns the sources that answered the current round that
// they still receive part of the range. When more than len(sources) -
// quorum do, the fencing cannot complete in this round.
func (f *Fencer) Receiving() []ring.NodeID { return slices.Clone(f.receiving) }

// Blocked reports whether the fencing cannot complete: too many sources
// still receive the range, or a source reported the largest term (no G
// is above it; ErrTermExhausted).
func (f *Fencer) Blocked() bool {
	return f.exhausted || len(f.sources)-len(f.receiving) < f.quorum
}

// Exhausted reports whether a source reported the largest term.
func (f *Fencer) Exhausted() bool { return f.exhausted }

// HighestTerm returns the highest term this node knows for a key of rng:
// seen in a message, promised, or in a record it holds. A fencing of rng
// starts above it.
func (c *Core) HighestTerm(rng ring.Range) uint64 {
	var high uint64
	c.tokens.each(rng, func(ks *keyState) {
		high = max(high, ks.maxTerm, ks.promised.Term)
		for _, r := range ks.records {
			high = max(high, r.Epoch.Term)
		}
	})
	return high
}
