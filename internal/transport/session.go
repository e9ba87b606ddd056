package transport

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/troupe-go/troupe/internal/transport/flow"
	"github.com/troupe-go/troupe/ring"
	"github.com/troupe-go/troupe/wire"
)

// sentFrame is a data or abort frame as written, kept until the peer
// credits it so it can be written again after a resume.
type sentFrame struct {
	abort   bool
	stream  StreamID
	env     uint64
	first   bool
	last    bool
	offset  int    // of the chunk within the envelope
	total   int    // envelope length, on a first chunk
	payload []byte // the chunk, uncompressed; a sub-slice of the caller's payload
	pos     int64  // stream position of the chunk's first byte
}

func (f *sentFrame) end() int64 { return f.pos + int64(len(f.payload)) }

// outFrame is a frame the writer will encode once the session lock is
// released.
type outFrame struct {
	typ    FrameType
	stream StreamID
	data   sentFrame // data and abort
	u1     uint64    // ping and pong: token
	cr     credit    // credit
	bye    goodbye
}

// awaitCredit is a fully written envelope whose receipt resolves when the
// peer's consumed count reaches end.
type awaitCredit struct {
	end     int64
	receipt *Receipt
}

// partialEnv is an envelope being received.
type partialEnv struct {
	buf      []byte
	total    int
	reserved int // bytes counted in session.reserved for buf
	alloc    int // capacity to allocate buf with
	// filler is the generation of the connection last given buf's spare
	// bytes to read a chunk into (chunkTargetLocked), until its read
	// ended; 0 when none.
	filler uint64
}

// delivery is a complete envelope waiting for its stream's handler.
type delivery struct {
	payload []byte
	held    flow.Held
	epoch   uint64
}

// session is everything one node holds about another across connections:
// queued and unacknowledged data, receive counts and credit, path
// measures. All fields are guarded by mu; the connection goroutines, the
// deliverers and callers of Send serialise on it.
type session struct {
	t    *Transport
	key  string
	addr string // advertised address; empty for a client
	// client is the identity a client's session was made for (key is
	// made from it); zero for a peer's session.
	client ring.NodeID
	// holdWaits: the session waits for a hold's release to write (see
	// Transport.Hold); under t.holds.mu.
	holdWaits bool

	mu    sync.Mutex
	ready [NumStreams]*sync.Cond // signals each stream's deliverer
	id    ring.NodeID            // peer identity of the session; zero before the first handshake
	epoch uint64                 // bumps when the session starts afresh

	sched       *flow.Scheduler
	queued      queuedTable // envelopes in the scheduler, not yet fully written
	queuedBytes int         // sum of the sizes in queued
	queuedLarge int         // envelopes in queued larger than inlineMax
	await       [NumStreams]fifo[awaitCredit]
	resend      [NumStreams]fifo[sentFrame] // written and not yet credited, by position
	replay      []sentFrame                 // to write again first, after a resume
	resent      int64                       // chunk bytes rewritten after resumes, for measurement
	recv        [NumStreams]flow.RecvCredit
	partial     [NumStreams]map[uint64]*partialEnv
	started     [NumStreams]int64 // highest envelope id started by the peer, -1 if none
	reserved    int               // bytes reserved up front for partial envelopes
	inbox       [NumStreams][]delivery
	busy        [NumStreams]bool // a handler of the stream is running (deliverer or reader)
	small       []byte           // the slab small one-frame envelopes are copied into (applyWholeLocked)
	// traffic counts the frames and bytes written and read on this
	// session's connections, for Transport.Stats; folded is what it was
	// when the session was removed, the transport's foldSeq-th removal.
	traffic traffic
	folded  traffic
	foldSeq uint64

	// Set by the reader around handleLocked: a complete envelope of a
	// stream whose handler is idle and inbox empty is taken for the
	// reader to deliver itself (took) instead of being queued.
	mayTake bool
	// mayTakeLarge widens mayTake to the replication stream, for an
	// envelope of several frames or one read in place (readDataDirect).
	mayTakeLarge bool
	took         bool
	taken        delivery
	takenSt      StreamID

	smallAt    time.Time   // when a small envelope's frame, or a bypass stream's, was last taken to write
	credits    []outFrame  // grants due, for the writer
	wakeAt     time.Time   // when the sleeping writer's timer fires; zero if it has none
	grantT     *time.Timer // wakes the writer when a grant falls due (grantDue)
	grantAt    time.Time   // when grantT fires, if grantArmed
	grantArms  int         // times grantT was armed (tests count them)
	grantArmed bool
	pongs      []uint64
	pingWant   bool
	// A receipt somebody waits on (Receipt.Done) whose credit the peer's
	// regular grants may not bring: see waitedOn.
	ackWant bool
	ackEnd  [NumStreams]int64 // per stream, the end of the furthest such receipt written
	ackPing bool              // write an ack ping now
	// Per stream: the peer pinged while envelopes of the stream were
	// still waiting for their handler; grant once they are consumed.
	ackAsked  [NumStreams]bool
	pingToken uint64
	pingSent  time.Time

	conn      *liveConn // the active connection, nil while none
	gen       uint64    // bumps whenever the active connection changes: fences old ones
	upAt      time.Time // when the active connection was established
	downAt    time.Time // when the session last lost its connection
	lastHeard time.Time

	dialing    bool
	dialDone   chan struct{} // closed when the in-flight dial ends
	dialCancel func()
	redial     chan struct{} // a Send asks the dial loop to cut its backoff short; capacity 1
	wantSince  time.Time     // when the session, holding no peer, first wanted a connection; zero if it does not
	removed    bool          // taken out of the transport: given up on
	accepting  int           // accepted connections on their way to the session
	room       chan struct{} // closed when the send queue shrinks; nil if nobody waits
	activating *hsConn       // connection in its resume exchange
	closing    bool
	grace      *time.Timer // for a client: gives up on it after the resume grace
	up         bool        // a peer-up event was reported and no peer-down since
	suspected  bool        // a suspect event was reported since the last peer-up
}

func newSession(t *Transport, key, addr string) (*session, error) {
	s := &session{t: t, key: key, addr: addr, redial: make(chan struct{}, 1)}
	for i := range s.ready {
		s.ready[i] = sync.NewCond(&s.mu)
	}
	if err := s.resetLocked(); err != nil {
		return nil, err
	}
	return s, nil
}

// minCwnd is the congestion-window floor given to the flow estimator, and
// the grant size of our receivers: a sender held by its window floor must
// get a grant for what it has in flight, or it waits GrantDelay (2 ms) per
// window. The flow core's default grant size grows with the auto-tuned
// window (a sixteenth), which stalled bulk transfers on short paths at
// 14 MB/s; a fixed size keeps grants (the estimator's acknowledgements)
// frequent. On a short slow path the floor is what stands in the
// bottleneck's queue in front of a small envelope: 16 KiB is 2.6 ms at 50
// Mbit/s (32 KiB gave small asks a p99 of 8 to 11 ms beside 4 MiB
// messages in the lab, 16 KiB 6 to 7 ms; bulk and ask throughput on
// loopback did not move).
const minCwnd = 16 << 10

// grantSlack is how many consumed bytes our receivers let wait, with no
// envelope held, for the next grant without a timer (flow's
// RecvConfig.Slack): the grant rides along with the next data or pong, or
// goes once more is consumed. A request and reply exchange then arms no
// grant timer: each side's reply or next request carries the grant of
// what it consumed, and the timer was a Reset (a wake-up of another
// thread) and a firing per GrantDelay on the asker. The peer cannot stall
// on it: its credit stays within grantSlack of the window, and its
// in-flight bytes, summed over the NumStreams streams, within 8 KiB,
// half its congestion window floor (minCwnd), so it can always send, and
// what it sends brings the grant (flow's RecvCredit.Deadline argues it
// in full; its stall property test draws slack under the same rule). A
// sender waiting on a receipt asks for its grant (waitedOn).
const grantSlack = minCwnd / 8

// initialWindow is the window each stream starts with. Auto-tuning grows
// it towards the bandwidth-delay product, but never past the agreed
// window (Limits.Window), so the agreed window bounds what a peer may
// make us hold unread, as both sides promised at the handshake.
func initialWindow(lim wire.Limits) int64 {
	return min(flow.DefaultWindow, int64(lim.Window))
}

// resetLocked starts the session afresh: new scheduler, credit and
// counters.
func (s *session) resetLocked() error {
	lim := s.t.cfg.Limits
	cfg := flow.Config{
		MaxFrame:   smallFrame(lim),
		LargeFrame: chunkSize(lim),
		Estimator:  flow.EstimatorConfig{MinCwnd: minCwnd},
	}
	for id := range StreamID(NumStreams) {
		class := flow.ClassData
		switch id {
		case StreamControl:
			class = flow.ClassControl
		case StreamMembership:
			class = flow.ClassMembership
		}
		cfg.Streams = append(cfg.Streams, flow.StreamConfig{ID: flow.StreamID(id), Class: class, Window: initialWindow(lim), MaxWindow: int64(lim.Window)})
	}
	sched, err := flow.NewScheduler(cfg)
	if err != nil {
		return err
	}
	s.sched = sched
	for i := range s.recv {
		s.recv[i], err = flow.NewRecvCredit(flow.RecvConfig{Window: initialWindow(lim), MaxWindow: int64(lim.Window), GrantBytes: minCwnd, GrantDelay: s.t.tune.grantDelay, Slack: min(grantSlack, initialWindow(lim)/8)})
		if err != nil {
			return err
		}
		s.partial[i] = map[uint64]*partialEnv{}
		s.started[i] = -1
		s.reserved = 0
		s.resend[i].reset()
		s.await[i].reset()
	}
	s.replay = nil
	s.ackWant, s.ackEnd, s.ackPing, s.ackAsked = false, [NumStreams]int64{}, false, [NumStreams]bool{}
	s.epoch++
	return nil
}

// failAllLocked resolves every pending receipt with err and starts afresh.
func (s *session) failAllLocked(err error) {
	for _, q := range s.queued.bySlot {
		if q.r != nil {
			q.r.resolve(err)
		}
	}
	s.queued.clear()
	s.queuedBytes, s.queuedLarge = 0, 0
	s.freedLocked()
	for i := range s.await {
		for _, a := range s.await[i].items() {
			a.receipt.resolve(err)
		}
	}
	if rerr := s.resetLocked(); rerr != nil {
		s.t.log.Error("troupe: wire: reset session", "peer", s.id, "err", rerr)
	}
}

// kick wakes the writer of the active connection, if any.
func (s *session) kick() {
	if s.conn == nil {
		return
	}
	select {
	case s.conn.wake <- struct{}{}:
	default:
	}
}

// fullLocked reports whether an envelope of n bytes does not fit the send
// queue now.
func (s *session) fullLocked(n int) bool { return s.queuedBytes+n > s.t.cfg.SendQueue }

// roomLocked returns a channel closed when the send queue next shrinks.
func (s *session) roomLocked() <-chan struct{} {
	if s.room == nil {
		s.room = make(chan struct{})
	}
	return s.room
}

// freedLocked wakes senders waiting for room in the queue.
func (s *session) freedLocked() {
	if s.room != nil {
		close(s.room)
		s.room = nil
	}
}

// appendPendingLocked appends the receipts of every envelope queued or
// awaiting its credit.
func (s *session) appendPendingLocked(rs []*Receipt) []*Receipt {
	for _, q := range s.queued.bySlot {
		if q.r != nil {
			rs = append(rs, q.r)
		}
	}
	for i := range s.await {
		for _, a := range s.await[i].items() {
			rs = append(rs, a.receipt)
		}
	}
	return rs
}

// enqueueLocked queues an envelope; the caller wakes the writer (or
// writes inline).
func (s *session) enqueueLocked(stream StreamID, key uint64, payload []byte, r *Receipt, o order) (flow.Handle, error) {
	if s.fullLocked(len(payload)) {
		return flow.Handle{}, fmt.Errorf("%w: %d bytes queued for %s", wire.ErrQueueFull, s.queuedBytes, s.key)
	}
	var h flow.Handle
	var err error
	if o.follow {
		h, err = s.sched.EnqueueAfter(flow.StreamID(stream), key, o.after, payload)
	} else {
		h, err = s.sched.Enqueue(flow.StreamID(stream), key, payload)
	}
	if err != nil {
		return h, err
	}
	s.queued.put(h, r)
	r.s = s
	r.size = len(payload)
	s.queuedBytes += len(payload)
	if r.size > inlineMax {
		s.queuedLarge++
	}
	r.handle, r.epoch, r.queued = h, s.epoch, true
	return h, nil
}

// unqueueLocked takes receipt r, of handle h, out of the queued map.
func (s *session) unqueueLocked(h flow.Handle, r *Receipt) {
	s.queued.remove(h)
	s.queuedBytes -= r.size
	if r.size > inlineMax {
		s.queuedLarge--
	}
	s.freedLocked()
	r.queued = false
}

// creditHeldLocked reports whether an envelope of n bytes just queued on
// the stream surely cannot be written before the peer grants credit: the
// stream lacks the credit for its first frame and for a frame cut short
// (see flow's fits). Waking the writer, or writing inline, would then
// find nothing to write; a sender streaming small envelopes into a full
// window paid that for every envelope. The grant wakes the writer
// (applyCreditLocked), and the peer grants as it consumes what holds the
// window, so waiting cannot stall.
func (s *session) creditHeldLocked(st StreamID, n int) bool {
	cr := s.sched.Credit(flow.StreamID(st))
	avail := cr.Available()
	return int64(min(n, smallFrame(s.t.cfg.Limits))) > avail && (avail <= 0 || avail < cr.Window()/8)
}

// cancelLocked drops what of an envelope was not yet written.
func (s *session) cancelLocked(r *Receipt, err error) {
	if !r.queued || r.epoch != s.epoch {
		return
	}
	if s.queued.get(r.handle) != r {
		return
	}
	if s.sched.Cancel(r.handle) != flow.CancelUnknown {
		s.unqueueLocked(r.handle, r)
		r.resolve(err)
		s.kick()
	}
}

// nextFramesLocked collects the frames to write now, up to about budget
// bytes, and how long to wait before asking again if none (0: until
// woken). Grants not yet due ride along with data (piggybackLocked).
func (s *session) nextFramesLocked(now time.Time, out []outFrame, budget int) ([]outFrame, time.Duration) {
	out, wait, data := s.collectFramesLocked(now, out, budget)
	if data && !s.closing {
		out = s.piggybackLocked(now, out)
	}
	return out, wait
}

// collectFramesLocked is nextFramesLocked without the grants that ride
// along; data reports whether it collected data or abort frames.
func (s *session) collectFramesLocked(now time.Time, out []outFrame, budget int) (_ []outFrame, wait time.Duration, data bool) {
	if s.closing {
		return append(out, outFrame{typ: FrameGoodbye, bye: goodbye{Code: goodbyeClose}}), 0, false
	}
	carry := len(s.pongs) > 0 // grants ride along with pongs too
	for _, tok := range s.pongs {
		out = append(out, outFrame{typ: FramePong, u1: tok})
	}
	s.pongs = s.pongs[:0]
	if s.pingWant {
		s.pingWant = false
		s.pingToken++
		s.pingSent = now
		out = append(out, outFrame{typ: FramePing, u1: s.pingToken})
	}
	if s.ackPing {
		s.ackPing = false
		out = append(out, ackPingFrame)
	}
	out = append(out, s.credits...)
	s.credits = s.credits[:0]
	rtt := s.sched.Estimator().MinRTT()
	for i := range s.recv {
		if g, ok := s.recv[i].Grant(now, rtt); ok {
			out = append(out, creditFrame(StreamID(i), g))
		} else if d := s.recv[i].Deadline(); !d.IsZero() {
			if w := max(d.Sub(now), time.Microsecond); wait == 0 || w < wait {
				wait = w
			}
		}
	}
	size := 0
	mark := len(out) // data and aborts come after
	for len(s.replay) > 0 && size < budget {
		f := s.replay[0]
		typ := FrameData
		if f.abort {
			typ = FrameAbort
		} else if len(f.payload) > 0 {
			w, err := s.sched.Resend(flow.StreamID(f.stream), f.pos, len(f.payload), now)
			if err != nil {
				s.t.log.Error("troupe: wire: resend", "peer", s.id, "err", err)
			} else if w > 0 {
				// Paced: nothing new goes before the rest of the replay.
				if wait == 0 || w < wait {
					wait = w
				}
				return out, wait, carry || len(out) > mark
			}
			s.resent += int64(len(f.payload))
		}
		s.replay = s.replay[1:]
		out = append(out, outFrame{typ: typ, stream: f.stream, data: f})
		size += len(f.payload) + HeaderSize
	}
	if len(s.replay) > 0 {
		return out, wait, carry || len(out) > mark
	}
	for size < budget {
		f, w, ok := s.sched.Next(now)
		if !ok {
			if w > 0 && (wait == 0 || w < wait) {
				wait = w
			}
			break
		}
		st := StreamID(f.Stream)
		if f.First && f.Last || st == StreamControl || st == StreamMembership {
			s.smallAt = now // keeps the kernel's queue shallow (notSentLowatLocked)
		}
		sf := sentFrame{stream: st, env: f.Envelope, first: f.First, last: f.Last, offset: f.Offset, payload: f.Payload, pos: f.StreamOffset}
		if f.Kind == flow.FrameAbort {
			sf = sentFrame{abort: true, stream: st, env: f.Envelope, pos: f.StreamOffset}
			out = append(out, outFrame{typ: FrameAbort, stream: st, data: sf})
			s.resend[st].push(sf)
			continue
		}
		r := s.queued.get(f.Handle)
		if f.First && r != nil {
			sf.total = r.size
		}
		if f.Last && r != nil {
			s.unqueueLocked(f.Handle, r)
			r.written, r.st, r.end = true, st, sf.end()
			if r.waited {
				s.noteWaitedLocked(r)
			}
			s.await[st].push(awaitCredit{end: sf.end(), receipt: r})
		}
		s.resend[st].push(sf)
		out = append(out, outFrame{typ: FrameData, stream: st, data: sf})
		size += len(sf.payload) + HeaderSize
	}
	if len(out) > mark && s.ackDueLocked() {
		out = append(out, ackPingFrame)
	}
	return out, wait, carry || len(out) > mark
}

// ackPingFrame asks the peer for a pong, which carries its pending grants
// (piggybackLocked): see waitedOn. Its token, 0, is never a keepalive
// ping's, so its pong is no RTT sample (it waited behind data).
var ackPingFrame = outFrame{typ: FramePing}

// waitedOn learns that somebody waits on receipt r (Done or Wait). The
// peer grants every GrantBytes consumed, or GrantDelay (2 ms) after it
// consumed less, and less than grantSlack only along with its next
// frames: a sender that waits on its last envelope would wait out the
// delay for every burst it sends, or for the peer's next frames. Once the
// envelope is written with less than GrantBytes after it and nothing more
// is queued, a ping goes after it; the peer answers with its pending
// grants at once. Senders that never wait on receipts (the router) never
// cause one.
func (s *session) waitedOn(r *Receipt) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.epoch != s.epoch || r.waited {
		return
	}
	r.waited = true
	if !r.written {
		return // noted when its last frame is written
	}
	s.noteWaitedLocked(r)
	if !s.ackDueLocked() {
		return
	}
	s.ackPing = true
	if c := s.conn; c != nil && c.raw != nil && !c.writing {
		c.writeInlineLocked(inlineBudget)
	} else {
		s.kick()
	}
}

// noteWaitedLocked records written receipt r as waited on.
func (s *session) noteWaitedLocked(r *Receipt) {
	if r.end > s.ackEnd[r.st] {
		s.ackEnd[r.st], s.ackWant = r.end, true
	}
}

// ackDueLocked reports whether an ack ping should follow what was just
// written: a receipt waited on lies within GrantBytes of the end of its
// stream's written bytes, uncredited, and nothing more is queued (what
// is queued will be written, and then asked for). It forgets the
// receipts waited on once it has decided.
func (s *session) ackDueLocked() bool {
	if !s.ackWant || s.queued.n > 0 {
		return false
	}
	due := false
	for i, end := range s.ackEnd {
		if end == 0 {
			continue
		}
		cr := s.sched.Credit(flow.StreamID(i))
		if end > cr.Consumed() && cr.Sent()-end < minCwnd {
			due = true
		}
		s.ackEnd[i] = 0
	}
	s.ackWant = false
	return due
}

// piggybackLocked adds to frames about to be written the grants not yet
// due: a grant rides along for a few bytes, where on its own it would
// cost the writer a wake-up and a write when due. Request and reply
// traffic then returns credit without a credit frame of its own.
func (s *session) piggybackLocked(now time.Time, out []outFrame) []outFrame {
	rtt := s.sched.Estimator().MinRTT()
	for i := range s.recv {
		if g, ok := s.recv[i].GrantEarly(now, rtt); ok {
			out = append(out, creditFrame(StreamID(i), g))
		}
	}
	return out
}

// applyCreditLocked applies a credit frame: more credit, trimmed resend
// buffer, resolved receipts.
func (s *session) applyCreditLocked(st StreamID, c credit, now time.Time) error {
	if err := s.sched.ApplyGrant(flow.StreamID(st), flow.Grant{Consumed: int64(c.Consumed), Window: int64(c.Window), Received: int64(c.Received)}, now); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformedFrame, err)
	}
	consumed := int64(c.Consumed)
	rs := s.resend[st].items()
	i := 0
	for i < len(rs) && (rs[i].end() < consumed || (!rs[i].abort && rs[i].end() == consumed)) {
		i++
	}
	s.resend[st].drop(i)
	as := s.await[st].items()
	j := 0
	for j < len(as) && as[j].end <= consumed {
		as[j].receipt.resolve(nil)
		as[j].receipt.recycle(s.t)
		j++
	}
	s.await[st].drop(j)
	if s.queued.n > 0 || len(s.replay) > 0 {
		// The credit may let us go on. With only small envelopes queued
		// and the writer's turn free, the goroutine that read the credit
		// writes what it frees itself: the writer's wake-up was a hop in
		// every credit round trip of a sender held by its window. Large
		// envelopes go through the writer, which writes their chunks
		// without copying them.
		// Under a hold (Transport.Hold) the release writes it.
		if c := s.conn; c != nil && c.raw != nil && !c.writing && s.queuedLarge == 0 && len(s.replay) == 0 && !s.closing {
			if !s.t.deferWriteLocked(s) {
				c.writeInlineLocked(creditBudget)
			}
		} else if !s.t.deferWriteLocked(s) {
			s.kick()
		}
	}
	return nil
}

// newPartialLocked allocates a buffer for an envelope of total bytes.
// Whole envelopes are reserved up front while the session's reservations
// stay within reserveBudget; beyond it the buffer starts at a window and
// grows with what actually arrives, so a peer announcing large envelopes
// cannot make us reserve memory it never sends. It reserves nothing yet:
// applyDataLocked does, when the first chunk is applied.
func (s *session) newPartialLocked(total int) *partialEnv {
	p := s.planPartialLocked(total)
	p.buf = p.newBuf(s.t.bufs, 0)
	return p
}

// planPartialLocked is newPartialLocked without the allocation, which
// the reader makes after releasing the lock: zeroing a large buffer takes
// milliseconds that the writer and the deliverers need not wait.
func (s *session) planPartialLocked(total int) *partialEnv {
	p := &partialEnv{total: total, alloc: min(total, int(initialWindow(s.t.cfg.Limits)))}
	if budget := 4 * s.t.cfg.Limits.MaxMessage; s.reserved+total <= budget {
		p.reserved, p.alloc = total, total
	}
	return p
}

// newBuf returns an empty buffer for a planned envelope, with room for at
// least n bytes: from the pool when the whole envelope is reserved (its
// buffer then never grows, so it keeps its class size until released).
func (p *partialEnv) newBuf(pool *bufPool, n int) []byte {
	if p.alloc == p.total && pool.pooled(p.total) {
		return pool.get(p.total)
	}
	return make([]byte, 0, max(p.alloc, n))
}

// chunkTargetLocked returns where the n-byte chunk of data frame d goes:
// its envelope and the bytes of the envelope's buffer after what it
// holds. For a first chunk the envelope is new, not yet registered, and
// without a buffer: the caller allocates it (allocChunk) after releasing
// the lock. It changes nothing the session counts, so a frame that never
// arrives whole leaves no trace. It returns nil for a chunk that does not
// fit an envelope; applyDataLocked then reports why.
//
// gen is the reading connection's generation. A connection that a resume
// superseded may still be reading a chunk into the spare bytes it was
// given, outside the lock, and the resumed one is sent that chunk again:
// the envelope then moves to a buffer of its own, with what it holds,
// and the old buffer is left to the old reader, which writes into
// nothing anyone reads (its frame is then fenced off).
func (s *session) chunkTargetLocked(h Header, d dataFrame, n int, gen uint64) (*partialEnv, []byte) {
	st := h.Stream
	if h.Flags&FlagFirst != 0 {
		if int64(d.Envelope) <= s.started[st] || s.partial[st][d.Envelope] != nil || n > int(d.Total) {
			return nil, nil
		}
		p := s.planPartialLocked(int(d.Total))
		p.filler = gen
		return p, nil
	}
	p := s.partial[st][d.Envelope]
	if p == nil || int(d.Offset) != len(p.buf) || len(p.buf)+n > p.total {
		return nil, nil
	}
	if p.filler != 0 && p.filler != gen {
		p.buf = append(p.newBuf(s.t.bufs, len(p.buf)+n), p.buf...)
	}
	p.filler = gen
	// Growing keeps the content; it changes nothing counted.
	p.buf = slices.Grow(p.buf, n)
	return p, p.buf[len(p.buf) : len(p.buf)+n]
}

// filledLocked ends the read into p's spare bytes that the connection of
// generation gen was given (see chunkTargetLocked).
func (p *partialEnv) filledLocked(gen uint64) {
	if p != nil && p.filler == gen {
		p.filler = 0
	}
}

// allocChunk allocates the buffer of a planned envelope and returns its
// first n bytes, for its first chunk.
func (p *partialEnv) allocChunk(pool *bufPool, n int) []byte {
	p.buf = p.newBuf(pool, n)
	return p.buf[:n]
}

// checkDataLocked reports why an n-byte chunk of data frame d does not
// fit its envelope, before anything of it is counted: a malformed frame
// breaks the connection, and the session resumes with the stream's credit
// as it was. It returns the partial envelope a later chunk belongs to (nil
// for a first chunk: its id is above started, which the caller checked,
// so it is in no partial map) and the envelope's whole size, which the
// stream's credit needs of a last chunk.
func (s *session) checkDataLocked(h Header, d dataFrame, n int) (*partialEnv, int64, error) {
	var p *partialEnv
	have, total := 0, int(d.Total)
	if h.Flags&FlagFirst == 0 {
		if p = s.partial[h.Stream][d.Envelope]; p == nil {
			return nil, 0, frameErr(ErrMalformedFrame, h, "chunk of unknown envelope %d", d.Envelope)
		}
		have, total = len(p.buf), p.total
	}
	switch {
	case int(d.Offset) != have || have+n > total:
		return nil, 0, frameErr(ErrMalformedFrame, h, "chunk at %d+%d, envelope has %d of %d", d.Offset, n, have, total)
	case h.Flags&FlagLast != 0 && have+n != total:
		return nil, 0, frameErr(ErrMalformedFrame, h, "last chunk leaves envelope at %d of %d", have+n, total)
	}
	return p, int64(total), nil
}

// applyDataLocked records a received data frame (chunk already
// decompressed). pre, if not nil, is the envelope chunkTargetLocked
// returned for it, and chunk may already lie in its buffer.
func (s *session) applyDataLocked(h Header, d dataFrame, chunk []byte, now time.Time, pre *partialEnv) error {
	st := h.Stream
	last := h.Flags&FlagLast != 0
	if h.Flags&FlagFirst != 0 && int64(d.Envelope) <= s.started[st] {
		// After a resume the peer rewrites an empty envelope that sat
		// exactly at the position we reported: it may have arrived.
		if len(chunk) == 0 {
			return nil
		}
		return frameErr(ErrMalformedFrame, h, "envelope %d started again", d.Envelope)
	}
	p, size, err := s.checkDataLocked(h, d, len(chunk))
	if err != nil {
		return err
	}
	held, err := s.recv[st].Arrive(int64(len(chunk)), last, size, now)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrCreditOverrun, err)
	}
	if !last {
		s.arrivedLocked(st, now)
	}
	if h.Flags&FlagFirst != 0 && last && pre == nil {
		err := s.applyWholeLocked(h, d, chunk, held)
		s.queuedHeldLocked(st, now)
		return err
	}
	parts := s.partial[st]
	if h.Flags&FlagFirst != 0 {
		p = pre
		if p == nil || p.total != int(d.Total) || p.buf == nil {
			p = s.newPartialLocked(int(d.Total))
		}
		s.reserved += p.reserved
		parts[d.Envelope] = p
		s.started[st] = int64(d.Envelope)
	}
	if n := len(p.buf); len(chunk) > 0 && cap(p.buf)-n >= len(chunk) && &p.buf[n : n+1][0] == &chunk[0] {
		// Read in place by readDataDirect.
		p.buf = p.buf[:n+len(chunk)]
	} else {
		// Grow with what arrives rather than trusting the announced
		// total.
		p.buf = append(p.buf, chunk...)
	}
	if last {
		delete(parts, d.Envelope)
		s.reserved -= p.reserved
		s.deliverLocked(st, delivery{payload: p.buf, held: held, epoch: s.epoch})
		s.queuedHeldLocked(st, now)
	}
	return nil
}

// queuedHeldLocked follows a complete envelope's delivery. One queued
// behind a running handler or other envelopes may stay held a while:
// once the bytes held and waiting for a grant reach the slack, the grant
// of what was received (the peer's acknowledgement, see grantSlack) gets
// its timer, even if the handler blocks. One the reader took, or that an
// idle deliverer takes next, is consumed at once, which looks at the
// grant (arming a timer per large envelope here cost bulk a wake-up
// each).
func (s *session) queuedHeldLocked(st StreamID, now time.Time) {
	if n := len(s.inbox[st]); n == 0 || n == 1 && !s.busy[st] {
		return
	}
	if r := &s.recv[st]; r.Received()-r.Granted().Received >= r.Slack() {
		s.grantLaterLocked(st, now)
	}
}

// Small one-frame envelopes share slabs of slabSize bytes (see
// applyWholeLocked).
const (
	slabMax  = 256
	slabSize = 4 << 10
)

// applyWholeLocked is applyDataLocked for an envelope in one frame (first
// and last), read through the frame buffer: it never becomes a partial
// envelope, which spares small envelopes an allocation and two map
// operations each. An id above started is never in the partial map.
func (s *session) applyWholeLocked(h Header, d dataFrame, chunk []byte, held flow.Held) error {
	st := h.Stream // checkDataLocked saw the chunk is the whole envelope
	s.started[st] = int64(d.Envelope)
	var buf []byte
	switch n := len(chunk); {
	case n <= slabMax:
		// Cut from a slab: an allocation per slab, not per envelope (a
		// request and its reply were one each on both sides). The
		// capacity ends with the envelope, so a handler's append
		// copies; a payload kept pins at most its slab.
		if cap(s.small)-len(s.small) < n {
			s.small = make([]byte, 0, slabSize)
		}
		at := len(s.small)
		s.small = append(s.small, chunk...)
		buf = s.small[at:len(s.small):len(s.small)]
	case s.t.bufs.pooled(n):
		buf = append(s.t.bufs.get(n), chunk...)
	default:
		buf = append(make([]byte, 0, n), chunk...)
	}
	s.deliverLocked(st, delivery{payload: buf, held: held, epoch: s.epoch})
	return nil
}

// deliverLocked hands a complete envelope to the reader (see mayTake) or
// queues it for the stream's deliverer.
func (s *session) deliverLocked(st StreamID, dv delivery) {
	if s.mayTake && !s.took && (inlineStream(st) || s.mayTakeLarge && st == StreamReplication) && !s.busy[st] && len(s.inbox[st]) == 0 {
		s.busy[st] = true
		s.took, s.taken, s.takenSt = true, dv, st
		return
	}
	s.inbox[st] = append(s.inbox[st], dv)
	s.ready[st].Signal()
}

// wakeDeliverersLocked wakes every stream's deliverer, to notice the
// session's removal or the transport's close. A delivery wakes only its
// own stream's (one cond for all woke the other three for nothing on
// every envelope).
func (s *session) wakeDeliverersLocked() {
	for _, c := range s.ready {
		c.Broadcast()
	}
}

// inlineStream reports whether the reader may deliver envelopes of the
// stream itself when its deliverer is idle: only the application stream,
// whose handler is short unless its own queue is full (the reader is then
// relieved, see liveConn.deliverInline). Large envelopes of the
// replication stream too (mayTakeLarge): for bulk the hand-off to the
// deliverer was a wake-up and a park per envelope. Membership and control
// keep their deliverers: their handlers may wait on the protocol.
func inlineStream(st StreamID) bool { return st == StreamApplication }

// deliver runs the handler of one stream until the transport closes.
func (s *session) deliver(st StreamID) {
	defer s.t.wg.Done()
	for {
		s.mu.Lock()
		for {
			if s.t.isClosed() {
				s.mu.Unlock()
				return
			}
			if len(s.inbox[st]) > 0 && !s.busy[st] {
				break
			}
			if s.removed && len(s.inbox[st]) == 0 {
				s.mu.Unlock()
				return
			}
			s.ready[st].Wait()
		}
		d := s.inbox[st][0]
		s.inbox[st] = s.inbox[st][1:]
		s.busy[st] = true
		from := s.id
		s.mu.Unlock()

		if h := s.t.handlers[st].Load(); h != nil && *h != nil {
			(*h).Receive(from, d.payload)
		} else {
			s.t.bufs.put(d.payload) // dropped: nobody holds it
		}

		s.mu.Lock()
		s.consumedLocked(st, d, time.Now(), true)
		s.mu.Unlock()
	}
}

// consumedLocked ends the handling of delivery d: its credit returns to
// the peer and the stream's handler is free again.
//
// Unless arm, a grant not yet due gets no timer: the caller is about to
// run work that may write a reply, which takes the grant along
// (piggybackLocked), and calls grantLaterLocked after it. Arming the
// timer before, it would fire for nothing about once per GrantDelay
// while requests come in, each time a wake-up of an idle thread.
func (s *session) consumedLocked(st StreamID, d delivery, now time.Time, arm bool) {
	s.busy[st] = false
	if d.epoch != s.epoch {
		return
	}
	if err := s.recv[st].Consume(d.held, now); err != nil {
		s.t.log.Error("troupe: wire: consume", "peer", s.id, "err", err)
	}
	rtt := s.sched.Estimator().MinRTT()
	var g flow.Grant
	var ok bool
	if s.ackAsked[st] && len(s.inbox[st]) == 0 {
		// The peer's ack ping came ahead of this envelope's handler:
		// its grant goes now.
		s.ackAsked[st] = false
		g, ok = s.recv[st].GrantEarly(now, rtt)
	} else {
		g, ok = s.recv[st].Grant(now, rtt)
	}
	if !ok {
		if arm {
			s.grantLaterLocked(st, now)
		}
		return
	}
	s.credits = append(s.credits, creditFrame(st, g))
	s.writeCreditsLocked()
}

// writeCreditsLocked writes the grants just queued. With nothing else
// to write, the goroutine that made them due (the reader that consumed
// inline or found the socket drained, a stream's deliverer) writes them
// itself when the writer's turn is free, with one non-blocking system
// call: the writer's wake-up was a hop in every credit round trip of a
// sender held by its window. Otherwise the writer takes them.
func (s *session) writeCreditsLocked() {
	if c := s.conn; c != nil && c.raw != nil && !c.writing && !s.closing && s.queued.n == 0 && len(s.replay) == 0 {
		c.writeInlineLocked(inlineBudget)
		return
	}
	s.kick()
}

// pingedLocked notes a ping from the peer, which a sender waiting on a
// receipt sends after its envelope (ackPingFrame): the pong carries the
// grants of what was consumed by then, and streams with envelopes still
// waiting for their handler grant when those are consumed.
func (s *session) pingedLocked() {
	for i := range s.inbox {
		if s.busy[i] || len(s.inbox[i]) > 0 {
			s.ackAsked[i] = true
		}
	}
}

// pristineLocked reports whether nothing was received from the peer and
// the peer credited nothing: the session's resend buffers still start at
// position 0.
func (s *session) pristineLocked() bool {
	for i := range s.recv {
		if s.recv[i].Received() != 0 || s.sched.Credit(flow.StreamID(i)).Consumed() != 0 {
			return false
		}
	}
	return true
}

func creditFrame(st StreamID, g flow.Grant) outFrame {
	return outFrame{typ: FrameCredit, stream: st, cr: credit{Consumed: uint64(g.Consumed), Window: uint64(g.Window), Received: uint64(g.Received)}}
}

// arrivedLocked follows a chunk of an incomplete envelope, whose bytes
// were credited on arrival. Its grant waits until the reader drains the
// socket, or until a quarter of the window arrived: a large envelope's
// frames arrive back to back, and a grant per frame (per 32 KiB at
// first) cost the peer's reader and our writer a wake-up each, four to
// seven per MiB. A sender held by its congestion window stops sending,
// so the reader soon drains and grants; the grant timer covers a reader
// that stops reading.
func (s *session) arrivedLocked(st StreamID, now time.Time) {
	r := &s.recv[st]
	if c := s.conn; c != nil && c.raw != nil && r.Received()-r.Granted().Received < max(minCwnd, r.Window()/4) {
		c.drainGrant.Store(true)
		s.grantLaterLocked(st, now)
		return
	}
	s.grantLocked(st, now)
}

// grantLocked queues a credit frame for the stream if one is due and
// wakes the writer for it. A grant due later is left to the grant timer:
// most ride along with data before then (piggybackLocked), so waking the
// writer at once to arm its timer would cost a wake-up per envelope.
func (s *session) grantLocked(st StreamID, now time.Time) {
	if !s.grantDueLocked(st, now) {
		s.grantLaterLocked(st, now)
	}
}

// grantDueLocked queues stream st's grant and wakes the writer for it if
// it is due, and reports whether it was.
func (s *session) grantDueLocked(st StreamID, now time.Time) bool {
	g, ok := s.recv[st].Grant(now, s.sched.Estimator().MinRTT())
	if ok {
		s.credits = append(s.credits, creditFrame(st, g))
		s.kick()
	}
	return ok
}

// grantLaterLocked arms the grant timer for stream st's grant, if one is
// pending and not slack (see grantSlack: flow's Deadline is zero then).
// A zero now is read from the clock only if the timer is armed.
func (s *session) grantLaterLocked(st StreamID, now time.Time) {
	if d := s.recv[st].Deadline(); !d.IsZero() && (s.wakeAt.IsZero() || d.Before(s.wakeAt)) {
		if now.IsZero() {
			now = time.Now()
		}
		s.armGrantLocked(d, now)
	}
}

// armGrantLocked makes the grant timer fire by d.
func (s *session) armGrantLocked(d, now time.Time) {
	if s.grantArmed && !d.Before(s.grantAt) {
		return
	}
	s.grantArmed, s.grantAt = true, d
	s.grantArms++
	if s.grantT == nil {
		s.grantT = time.AfterFunc(d.Sub(now), s.grantDue)
	} else {
		s.grantT.Reset(d.Sub(now))
	}
}

// grantDue is the grant timer: it wakes the writer for the grants that
// fell due meanwhile, and waits again for those still to come.
func (s *session) grantDue() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.grantArmed = false
	if s.closing || s.t.isClosed() {
		return
	}
	now := time.Now()
	var next time.Time
	for i := range s.recv {
		d := s.recv[i].Deadline()
		if d.IsZero() {
			continue
		}
		if !d.After(now) {
			s.kick()
			return
		}
		if next.IsZero() || d.Before(next) {
			next = d
		}
	}
	if !next.IsZero() {
		s.armGrantLocked(next, now)
	}
}

// notSentLowatLocked returns the TCP_NOTSENT_LOWAT the connection wants
// now, or a negative value to leave the socket alone: about one large
// frame, the FrameTime's worth at the sustained rate, and at least the
// configured floor. A fixed 16 KiB kept loopback's writer waking every
// 16 KiB (0.59x a plain copy against 0.71x with 256 KiB, alternate runs),
// while a slow link needs the floor to keep small envelopes from queueing
// behind bulk in the kernel; a frame time's worth is what a small
// envelope waits behind a frame anyway.
//
// While only large envelopes have been written for deepAfter, the
// kernel may hold deepTime's worth instead (see deepTime).
func (s *session) notSentLowatLocked(now time.Time) int {
	floor := s.t.cfg.NotSentLowat
	if floor < 0 {
		return floor
	}
	n := max(floor, s.sched.LargeFrame())
	if now.Sub(s.smallAt) >= deepAfter {
		e := s.sched.Estimator()
		deep := min(e.PacingRate(), e.SustainedRate()) * deepTime.Seconds()
		n = max(n, int(min(deep, maxDeep)))
	}
	return n
}

// A bulk transfer alone may keep a deeper unsent queue in the kernel:
// deepTime at the sustained rate, at most maxDeep. With one large
// frame's worth (250 µs) the writer woke and pushed every 230 KB or so
// (4.7 times per MiB on loopback, against 1.4 for a plain copy filling
// its socket buffer, whose data the receiver's acknowledgements then
// transmit). A small envelope then waits behind at most deepTime; the
// first one written also brings the queue back to a frame's worth, for
// deepAfter. A slow link's queue stays at the floor (16 KiB is 2.6 ms
// at 50 Mbit/s; deepTime's worth is less).
const (
	deepTime  = time.Millisecond
	deepAfter = 50 * time.Millisecond
	maxDeep   = 4 << 20
)

// writeBudget bounds the frames the writer takes for one system call: a
// lowat's worth, at least 256 KiB and at most 1 MiB, so a deep queue is
// filled with few calls while the writer still comes back to the
// scheduler every millisecond or so.
func writeBudget(lowat int) int { return min(max(lowat, 256<<10), 1<<20) }

// countsLocked snapshots the received byte counts, after the old
// connection has been fenced.
func (s *session) countsLocked() resumeCounts {
	var c resumeCounts
	for i := range s.recv {
		c[i] = uint64(s.recv[i].Received())
	}
	return c
}

// resumeLocked applies a resume exchange: either start afresh, or rewrite
// what the peer did not receive.
//
// It reports false when the peer's counts make a resume impossible (they
// lie outside what we sent and what it credited): the session has then
// failed what was pending and forgotten the peer, and the caller must drop
// the connection, so that the next handshake starts both sides afresh.
func (s *session) resumeLocked(peer ring.NodeID, fresh bool, theirs resumeCounts, now time.Time) bool {
	if fresh && s.id == peer && s.pristineLocked() {
		// Nothing was received from the peer and it credited nothing:
		// whatever it lost, resending everything from position 0 is
		// exact, so there is nothing to fail.
		fresh, theirs = false, resumeCounts{}
	}
	if !fresh {
		var replay []sentFrame
		for i := range s.resend {
			from, err := s.sched.ResumeStream(flow.StreamID(i), int64(theirs[i]))
			if err != nil {
				s.t.log.Warn("troupe: wire: resume impossible, starting afresh", "peer", peer, "err", err)
				s.dropLocked(fmt.Errorf("%w: resume impossible: %v", wire.ErrPeerDead, err))
				return false
			}
			for _, f := range s.resend[i].items() {
				// Frames without bytes (aborts, empty envelopes) at the
				// boundary may or may not have arrived; the receiver
				// ignores them twice.
				if f.pos >= from && (f.end() > from || len(f.payload) == 0) {
					replay = append(replay, f)
				}
			}
		}
		if !fresh {
			// Rewrite in the original order of positions per stream;
			// streams are independent so their interleaving is free.
			s.replay = replay
			s.sched.Resume(now)
			for i := range s.recv {
				s.recv[i].Resume()
			}
			if !s.id.IsZero() {
				s.t.resumes.Add(1)
			}
			s.id = peer
			return true
		}
	}
	switch {
	case s.id.IsZero():
		// First connection: nothing was written yet, queued envelopes
		// simply start.
		for i := range s.recv {
			s.recv[i].Resume()
		}
	case s.id != peer:
		s.failAllLocked(fmt.Errorf("%w: %v is now %v", wire.ErrPeerRestarted, s.id, peer))
		s.t.emit(PeerEvent{Peer: s.id, Up: false, Err: wire.ErrPeerRestarted})
		s.up = false
	default:
		s.t.log.Warn("troupe: wire: peer holds no session with us; failing what was pending", "peer", peer)
		s.failAllLocked(fmt.Errorf("%w: %v dropped the session", wire.ErrPeerDead, peer))
	}
	s.id = peer
	return true
}

// queuedTable holds the receipts of the envelopes in the scheduler by
// their handle's slot. The scheduler reuses slots, so the table is as long
// as the most envelopes ever queued at once, and each envelope costs an
// index where a map cost an insert, a lookup and a delete (about 400
// instructions per envelope, two envelopes per remote ask and side).
type queuedTable struct {
	bySlot []queuedEntry
	n      int // entries in use
}

type queuedEntry struct {
	h flow.Handle
	r *Receipt // nil: free
}

func (q *queuedTable) put(h flow.Handle, r *Receipt) {
	i := h.Slot()
	if i >= len(q.bySlot) {
		q.bySlot = append(q.bySlot, make([]queuedEntry, i+1-len(q.bySlot))...)
	}
	if q.bySlot[i].r == nil {
		q.n++
	}
	q.bySlot[i] = queuedEntry{h: h, r: r}
}

// get returns the receipt queued under h, or nil.
func (q *queuedTable) get(h flow.Handle) *Receipt {
	i := h.Slot()
	if i < 0 || i >= len(q.bySlot) || q.bySlot[i].h != h {
		return nil
	}
	return q.bySlot[i].r
}

func (q *queuedTable) remove(h flow.Handle) {
	i := h.Slot()
	if i < 0 || i >= len(q.bySlot) || q.bySlot[i].h != h || q.bySlot[i].r == nil {
		return
	}
	q.bySlot[i] = queuedEntry{}
	q.n--
}

func (q *queuedTable) clear() {
	clear(q.bySlot)
	q.n = 0
}
