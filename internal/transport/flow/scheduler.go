package flow

import (
	"fmt"
	"time"
)

// StreamID names a logical stream of a connection, as the wire frames do.
type StreamID uint32

// DefaultMaxFrame is the default data frame payload in bytes (16 KiB): small
// enough that a small envelope waits at most one frame time (2.6 ms at
// 50 Mbit/s) behind a large one.
const DefaultMaxFrame = 16 << 10

// DefaultFrameTime is the default [Config.FrameTime]: a quarter of a
// millisecond, a tenth of what a 16 KiB frame takes at 50 Mbit/s.
const DefaultFrameTime = 250 * time.Microsecond

// slowFrameTime is how long sending MaxFrame at the sustained rate takes
// on a path the scheduler treats as slow (below 131 Mbit/s with 16 KiB
// frames).
const slowFrameTime = time.Millisecond

// StreamConfig describes one stream to a [Scheduler].
type StreamConfig struct {
	// ID is the stream's wire id; ids must be distinct.
	ID StreamID
	// Class is the scheduling class. Default [ClassData].
	Class Class
	// Window is the peer's initial receive window for the stream in bytes,
	// from the handshake. Default [DefaultWindow].
	Window int64
	// MaxWindow is the largest window the peer may grow the stream's to, in
	// bytes; it bounds the stream's resend buffer. Default
	// [DefaultMaxWindow] (or Window if larger).
	MaxWindow int64
}

// Config configures a [Scheduler]. The zero value of every field means its
// default; Streams must name at least one stream.
type Config struct {
	// MaxFrame is the largest data frame payload in bytes, at most the frame
	// limit agreed at the handshake. An envelope of at most MaxFrame bytes
	// is small: it goes ahead of the frames of larger ones. Default
	// [DefaultMaxFrame].
	MaxFrame int
	// LargeFrame, at least MaxFrame, is the largest payload of a frame of a
	// large envelope. Such frames grow beyond MaxFrame to what the pacing
	// rate sends in FrameTime: a small envelope then still waits at most
	// about FrameTime behind one, while a fast path is written and read in
	// fewer, larger pieces (16 KiB frames cost a system call and a wake-up
	// each on a path that carries gigabytes per second). Default MaxFrame:
	// frames never grow.
	LargeFrame int
	// FrameTime is the sending time, at the pacing rate, that bounds a
	// grown frame; see LargeFrame. Default [DefaultFrameTime].
	FrameTime time.Duration
	// PacerBurst is the least size of the pacer's bucket, in bytes. Default
	// 2 × MaxFrame.
	PacerBurst int64
	// PacerBurstTime is how much sending time at the pacing rate the
	// pacer's bucket holds at least; it sets the bucket size at high rates.
	// Default [DefaultBurstTime].
	PacerBurstTime time.Duration
	// Estimator configures the path estimator the scheduler paces by.
	Estimator EstimatorConfig
	// Streams lists the streams, in priority order within a class.
	Streams []StreamConfig
}

func (c Config) withDefaults() Config {
	if c.MaxFrame == 0 {
		c.MaxFrame = DefaultMaxFrame
	}
	if c.PacerBurst == 0 {
		c.PacerBurst = 2 * int64(c.MaxFrame)
	}
	c.LargeFrame = max(c.LargeFrame, c.MaxFrame)
	if c.FrameTime == 0 {
		c.FrameTime = DefaultFrameTime
	}
	streams := make([]StreamConfig, len(c.Streams))
	for i, s := range c.Streams {
		if s.Window == 0 {
			s.Window = DefaultWindow
		}
		if s.MaxWindow == 0 {
			s.MaxWindow = max(DefaultMaxWindow, s.Window)
		}
		streams[i] = s
	}
	c.Streams = streams
	return c
}

// Validate reports the first field that makes no sense, wrapping
// [ErrInvalidConfig].
func (c Config) Validate() error {
	if c.MaxFrame < 0 {
		return fmt.Errorf("%w: Config.MaxFrame %d is negative", ErrInvalidConfig, c.MaxFrame)
	}
	if c.PacerBurst < 0 {
		return fmt.Errorf("%w: Config.PacerBurst %d is negative", ErrInvalidConfig, c.PacerBurst)
	}
	if c.LargeFrame < 0 || c.FrameTime < 0 {
		return fmt.Errorf("%w: Config.LargeFrame %d or FrameTime %v is negative", ErrInvalidConfig, c.LargeFrame, c.FrameTime)
	}
	if c.PacerBurstTime < 0 {
		return fmt.Errorf("%w: Config.PacerBurstTime %v is negative", ErrInvalidConfig, c.PacerBurstTime)
	}
	if len(c.Streams) == 0 {
		return fmt.Errorf("%w: Config.Streams is empty", ErrInvalidConfig)
	}
	for i, s := range c.Streams {
		if s.Class > ClassMembership {
			return fmt.Errorf("%w: Config.Streams[%d].Class %d is unknown", ErrInvalidConfig, i, s.Class)
		}
		if s.Window < 0 || s.MaxWindow < 0 {
			return fmt.Errorf("%w: Config.Streams[%d] has a negative window", ErrInvalidConfig, i)
		}
		for _, t := range c.Streams[:i] {
			if t.ID == s.ID {
				return fmt.Errorf("%w: Config.Streams[%d].ID %d is a duplicate", ErrInvalidConfig, i, s.ID)
			}
		}
	}
	return c.Estimator.Validate()
}

// FrameKind says what a [Frame] carries.
type FrameKind uint8

const (
	// FrameData carries a part of an envelope's payload.
	FrameData FrameKind = iota
	// FrameAbort tells the receiver to discard the partly received envelope
	// Envelope of Stream: it was cancelled after some of its frames went.
	// Receivers must ignore an abort for an envelope they do not hold, so
	// the session may resend aborts freely after a resume.
	FrameAbort
)

// Frame is the scheduler's decision: one frame to write now.
type Frame struct {
	Kind   FrameKind
	Stream StreamID
	// Envelope is the per-stream envelope id, assigned when the envelope's
	// first frame is written: ids increase in the order envelopes start.
	Envelope uint64
	// First and Last mark the envelope's first and last frames (both for an
	// envelope that fits one frame).
	First, Last bool
	// Offset and Len locate the payload within the envelope.
	Offset, Len int
	// Payload is the envelope's payload[Offset:Offset+Len], or nil for an
	// envelope enqueued by size.
	Payload []byte
	// StreamOffset is the stream byte offset of the payload's first byte:
	// the position the resend buffer and the receiver's count refer to.
	StreamOffset int64
	// Handle is the envelope's handle from Enqueue.
	Handle Handle
}

// Handle identifies an enqueued envelope, for [Scheduler.Cancel]. It goes
// stale once the envelope is fully written or dropped. The zero Handle is
// never valid.
type Handle struct {
	slot int32
	gen  uint32
}

// Slot returns the handle's slot: a small index, reused once the envelope
// is done, that a caller may index its own per-envelope records by.
func (h Handle) Slot() int { return int(h.slot) }

// CancelResult says what [Scheduler.Cancel] did.
type CancelResult uint8

const (
	// CancelUnknown: the handle was stale: the envelope was fully written,
	// or already cancelled.
	CancelUnknown CancelResult = iota
	// CancelDropped: no frame of the envelope was written; it is gone.
	CancelDropped
	// CancelAborted: some frames were written; the rest are dropped and the
	// scheduler will emit a [FrameAbort] for it.
	CancelAborted
)

// String returns the result's name.
func (r CancelResult) String() string {
	switch r {
	case CancelUnknown:
		return "unknown"
	case CancelDropped:
		return "dropped"
	case CancelAborted:
		return "aborted"
	}
	return "cancel-result(?)"
}

// String returns the kind's name.
func (k FrameKind) String() string {
	switch k {
	case FrameData:
		return "data"
	case FrameAbort:
		return "abort"
	}
	return "frame-kind(?)"
}

const none = -1

type envState uint8

const (
	envFree     envState = iota
	envWaiting           // behind an earlier envelope of its key
	envReady             // in its stream's small or large list
	envAborting          // in the abort list
)

// envelope is a slot of the scheduler's slab; links are slot indices.
type envelope struct {
	gen       uint32
	state     envState
	large     bool
	stream    int32
	key       uint64
	payload   []byte
	size      int
	sent      int
	id        uint64
	prevKey   int32 // same-key FIFO, oldest first
	nextKey   int32
	prev      int32 // the list the state says
	next      int32
	freeNext  int32
	keyLinked bool
	// waits counts what holds a waiting envelope back: an earlier
	// envelope of its key, and the envelope of its after key it follows
	// (EnqueueAfter).
	waits uint8
	// deps heads the envelopes that follow this one from another key
	// (EnqueueAfter), linked by depNext; after is the one an envelope
	// follows, or none.
	deps, depNext, after int32
}

type list struct{ head, tail int32 }

// keyOf mixes a stream index into a key for the per-key FIFO map. A collision
// between two (stream, key) pairs, like one between two keys, only orders
// their envelopes more strictly; a 64-bit key hashes faster than a struct.
func keyOf(stream int32, key uint64) uint64 {
	return key ^ (uint64(stream)+1)*0x9e3779b97f4a7c15
}

type schedStream struct {
	cfg    StreamConfig
	credit SendCredit
	small  list
	large  list
	nextID uint64
}

// Scheduler decides the next frame to write on a connection. Control streams
// go first, then membership, both ahead of the pace and the congestion
// window; then data streams, paced and held by the congestion window, where
// envelopes that fit one frame go before frames of larger ones and large
// envelopes are split and interleave round robin. Every stream spends its own
// credit. Per (stream, key) an envelope starts only after the previous one is
// fully written, so messages to one key keep their order.
//
// The session keeps the Scheduler, its [Estimator] and its credits across
// connections, so queued envelopes, credit and path measures survive a
// resume. Control frames that are not stream data (credit, ping, goodbye) are
// the session's: it writes them before asking the scheduler.
//
// It is not safe for concurrent use; the session serialises calls. In steady
// state, once its slab and key map have grown to the working set, it does not
// allocate.
type Scheduler struct {
	cfg     Config
	streams []schedStream
	order   []int32 // stream indices in priority order: control, membership, data
	nData   int     // data streams are order[len(order)-nData:]
	slots   []envelope
	free    int32
	keys    map[uint64]int32 // newest envelope of each (stream, key), by keyOf
	aborts  list
	pending int
	// dataQueued is the unwritten bytes of envelopes on data streams.
	dataQueued int64

	smallCursor, largeCursor int

	est   *Estimator
	pacer Pacer
}

// NewScheduler returns a scheduler for the configured streams with a fresh
// estimator.
func NewScheduler(cfg Config) (*Scheduler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	est, err := NewEstimator(cfg.Estimator)
	if err != nil {
		return nil, err
	}
	s := &Scheduler{
		cfg:    cfg,
		free:   none,
		keys:   make(map[uint64]int32),
		aborts: list{none, none},
		est:    est,
		pacer:  NewPacer(cfg.PacerBurst, cfg.PacerBurstTime),
	}
	for _, sc := range cfg.Streams {
		s.streams = append(s.streams, schedStream{
			cfg:    sc,
			credit: NewSendCredit(sc.Window, sc.MaxWindow),
			small:  list{none, none},
			large:  list{none, none},
		})
	}
	for _, c := range [...]Class{ClassControl, ClassMembership, ClassData} {
		for i, st := range s.streams {
			if st.cfg.Class == c {
				s.order = append(s.order, int32(i))
				if c == ClassData {
					s.nData++
				}
			}
		}
	}
	return s, nil
}

// Estimator returns the scheduler's path estimator, to feed it ping RTTs and
// read its measures.
func (s *Scheduler) Estimator() *Estimator { return s.est }

// Pacer returns the scheduler's pacer. [Scheduler.Next] and
// [Scheduler.Resend] use it; a session needs it only to write frames of its
// own at the pace.
func (s *Scheduler) Pacer() *Pacer { return &s.pacer }

// Credit returns the send credit of a stream, or nil if it is unknown.
func (s *Scheduler) Credit(id StreamID) *SendCredit {
	if i := s.index(id); i >= 0 {
		return &s.streams[i].credit
	}
	return nil
}

// Pending returns the number of envelopes queued or being written, and of
// aborts not yet emitted.
func (s *Scheduler) Pending() int { return s.pending }

func (s *Scheduler) index(id StreamID) int {
	for i := range s.streams {
		if s.streams[i].cfg.ID == id {
			return i
		}
	}
	return none
}

// Enqueue queues an envelope with its payload for stream, in the FIFO of key
// on that stream. key is any stable hash of the destination key: a collision
// only orders two keys' envelopes more strictly. The scheduler keeps payload
// until the envelope's last frame is written; frames carry sub-slices of it.
func (s *Scheduler) Enqueue(stream StreamID, key uint64, payload []byte) (Handle, error) {
	return s.enqueue(stream, key, payload, len(payload), false, 0)
}

// EnqueueAfter is Enqueue for an envelope that also starts only once the
// envelopes queued so far under key after, on the same stream, are fully
// written or dropped; envelopes queued under after later do not wait for
// it. A sender moves a large envelope off a shared key with it: what
// follows on that key goes ahead of the large one's frames, and the large
// one still arrives after what preceded it there.
func (s *Scheduler) EnqueueAfter(stream StreamID, key, after uint64, payload []byte) (Handle, error) {
	return s.enqueue(stream, key, payload, len(payload), true, after)
}

// EnqueueSize is Enqueue for a caller that keeps the payload itself: frames
// carry offsets and a nil Payload.
func (s *Scheduler) EnqueueSize(stream StreamID, key uint64, size int) (Handle, error) {
	if size < 0 {
		return Handle{}, fmt.Errorf("%w: negative envelope size %d", ErrInvalidConfig, size)
	}
	return s.enqueue(stream, key, nil, size, false, 0)
}

func (s *Scheduler) enqueue(stream StreamID, key uint64, payload []byte, size int, follow bool, after uint64) (Handle, error) {
	si := s.index(stream)
	if si < 0 {
		return Handle{}, fmt.Errorf("%w: %d", ErrUnknownStream, stream)
	}
	slot := s.alloc()
	e := &s.slots[slot]
	e.stream, e.key, e.payload, e.size, e.sent = int32(si), key, payload, size, 0
	e.large = size > s.cfg.MaxFrame
	e.prevKey, e.nextKey, e.prev, e.next = none, none, none, none
	e.keyLinked = true
	e.waits, e.deps, e.depNext, e.after = 0, none, none, none
	s.pending++
	if s.streams[si].cfg.Class == ClassData {
		s.dataQueued += int64(size)
	}
	k := keyOf(int32(si), key)
	if ak := keyOf(int32(si), after); follow && ak != k {
		if tail, ok := s.keys[ak]; ok {
			s.follow(slot, tail)
		}
	}
	if tail, ok := s.keys[k]; ok {
		s.slots[tail].nextKey = slot
		e.prevKey = tail
		e.waits++
	}
	if e.waits > 0 {
		e.state = envWaiting
	} else {
		s.makeReady(slot)
	}
	s.keys[k] = slot
	return Handle{slot: slot, gen: e.gen}, nil
}

func (s *Scheduler) alloc() int32 {
	if s.free != none {
		slot := s.free
		s.free = s.slots[slot].freeNext
		return slot
	}
	// Generations start at 1 so that the zero Handle is never valid.
	s.slots = append(s.slots, envelope{gen: 1})
	return int32(len(s.slots) - 1)
}

func (s *Scheduler) release(slot int32) {
	e := &s.slots[slot]
	e.gen++
	e.state = envFree
	e.payload = nil
	e.freeNext = s.free
	s.free = slot
	s.pending--
}

func (s *Scheduler) listOf(e *envelope) *list {
	if e.state == envAborting {
		return &s.aborts
	}
	st := &s.streams[e.stream]
	if e.large {
		return &st.large
	}
	return &st.small
}

func (s *Scheduler) pushBack(l *list, slot int32) {
	e := &s.slots[slot]
	e.prev, e.next = l.tail, none
	if l.tail != none {
		s.slots[l.tail].next = slot
	} else {
		l.head = slot
	}
	l.tail = slot
}

func (s *Scheduler) unlink(l *list, slot int32) {
	e := &s.slots[slot]
	if e.prev != none {
		s.slots[e.prev].next = e.next
	} else {
		l.head = e.next
	}
	if e.next != none {
		s.slots[e.next].prev = e.prev
	} else {
		l.tail = e.prev
	}
	e.prev, e.next = none, none
}

func (s *Scheduler) makeReady(slot int32) {
	e := &s.slots[slot]
	e.state = envReady
	s.pushBack(s.listOf(e), slot)
}

// unkey removes the envelope at the head of its key FIFO and lets the next
// one of the key become ready.
func (s *Scheduler) unkey(slot int32) {
	e := &s.slots[slot]
	if !e.keyLinked {
		return
	}
	e.keyLinked = false
	if e.prevKey != none {
		s.slots[e.prevKey].nextKey = e.nextKey
	}
	if e.nextKey != none {
		s.slots[e.nextKey].prevKey = e.prevKey
	} else {
		k := keyOf(e.stream, e.key)
		if e.prevKey != none {
			s.keys[k] = e.prevKey
		} else {
			delete(s.keys, k)
		}
	}
	next := e.nextKey
	prev := e.prevKey
	e.prevKey, e.nextKey = none, none
	if e.after != none {
		s.unfollow(slot)
	}
	// Those that follow e follow what is still before it in its key; when
	// nothing is, they are free of it.
	for d := e.deps; d != none; {
		dn := s.slots[d].depNext
		s.slots[d].depNext, s.slots[d].after = none, none
		if prev != none {
			s.follow(d, prev)
			s.slots[d].waits-- // the same wait, moved
		} else {
			s.unblock(d)
		}
		d = dn
	}
	e.deps = none
	if prev == none && next != none {
		s.unblock(next)
	}
}

// follow makes the envelope at slot wait for the one at tail, of another
// key, to be done.
func (s *Scheduler) follow(slot, tail int32) {
	e := &s.slots[slot]
	e.after = tail
	e.depNext = s.slots[tail].deps
	s.slots[tail].deps = slot
	e.waits++
}

// unfollow takes the envelope at slot, dropped while it waited, off the
// list of the envelope it followed.
func (s *Scheduler) unfollow(slot int32) {
	e := &s.slots[slot]
	t := &s.slots[e.after]
	if t.deps == slot {
		t.deps = e.depNext
	} else {
		for d := t.deps; d != none; d = s.slots[d].depNext {
			if s.slots[d].depNext == slot {
				s.slots[d].depNext = e.depNext
				break
			}
		}
	}
	e.after, e.depNext = none, none
}

// unblock lifts one of the waits of the envelope at slot; it becomes
// ready when none is left.
func (s *Scheduler) unblock(slot int32) {
	e := &s.slots[slot]
	if e.waits--; e.waits == 0 && e.state == envWaiting {
		s.makeReady(slot)
	}
}

// Cancel drops what of an envelope was not yet written. If some frames were
// written, the scheduler emits a [FrameAbort] for it ahead of other frames.
func (s *Scheduler) Cancel(h Handle) CancelResult {
	if h.slot < 0 || int(h.slot) >= len(s.slots) {
		return CancelUnknown
	}
	e := &s.slots[h.slot]
	if e.gen != h.gen || e.state == envFree || e.state == envAborting {
		return CancelUnknown
	}
	if e.state == envReady {
		s.unlink(s.listOf(e), h.slot)
	}
	if s.streams[e.stream].cfg.Class == ClassData {
		s.dataQueued -= int64(e.size - e.sent)
	}
	s.unkey(h.slot)
	if e.sent == 0 {
		s.release(h.slot)
		return CancelDropped
	}
	e.state = envAborting
	e.payload = nil
	s.pushBack(&s.aborts, h.slot)
	return CancelAborted
}

// Next returns the frame to write now. If ok is false, wait > 0 is how long
// pacing holds the next data frame (call again then, or sooner on any
// event); wait == 0 means nothing can be written until something changes:
// an Enqueue, a grant, a Cancel, or credit lowering the in-flight bytes below
// the congestion window.
func (s *Scheduler) Next(now time.Time) (f Frame, wait time.Duration, ok bool) {
	if slot := s.aborts.head; slot != none {
		s.unlink(&s.aborts, slot)
		e := &s.slots[slot]
		f = Frame{Kind: FrameAbort, Stream: s.streams[e.stream].cfg.ID, Envelope: e.id,
			StreamOffset: s.streams[e.stream].credit.Sent(), Handle: Handle{slot, e.gen}}
		s.release(slot)
		return f, 0, true
	}
	if s.pending == 0 {
		// Nothing queued (the writer looks once more after the last
		// frame of every batch): what the search below would conclude.
		if s.nData > 0 && s.est.Inflight() < s.est.CWnd() {
			s.est.SetAppLimited()
		}
		return Frame{}, 0, false
	}
	bypass := len(s.order) - s.nData
	for _, si := range s.order[:bypass] {
		st := &s.streams[si]
		if slot, n := s.fitting(st, false); slot != none {
			return s.emit(&st.small, slot, n, now), 0, true
		}
		if slot, n := s.fitting(st, true); slot != none {
			return s.emit(&st.large, slot, n, now), 0, true
		}
	}
	if s.nData == 0 {
		return Frame{}, 0, false
	}
	if s.est.Inflight() >= s.est.CWnd() {
		return Frame{}, 0, false
	}
	data := s.order[bypass:]
	cursor := &s.smallCursor
	l, slot, n, c := s.pick(data, *cursor, false)
	if l == nil {
		cursor = &s.largeCursor
		l, slot, n, c = s.pick(data, *cursor, true)
	}
	if l == nil {
		// Idle or held by credit: what goes next measures the application
		// or the peer, not the path.
		s.est.SetAppLimited()
		return Frame{}, 0, false
	}
	s.pacer.SetRate(s.est.PacingRate(), now)
	if d := s.pacer.Delay(ClassData, n, now); d > 0 {
		return Frame{}, d, false
	}
	*cursor = (c + 1) % len(data) // the stream had its turn
	if s.limitedAfter(data, int64(n)) {
		s.est.SetAppLimited()
	}
	return s.emit(l, slot, n, now), 0, true
}

// limitedAfter reports whether, after writing n more bytes, what holds the
// sender back is the application (too little queued) or the peer (too
// little credit) rather than the congestion window: samples of such sends
// measure the application or the receiver, not the path.
func (s *Scheduler) limitedAfter(data []int32, n int64) bool {
	room := s.est.CWnd() - s.est.Inflight() - n
	if s.dataQueued-n < room {
		return true
	}
	var credit int64
	for _, si := range data {
		if st := &s.streams[si]; st.small.head != none || st.large.head != none {
			credit += st.credit.Available()
		}
	}
	return credit-n < room
}

// pick returns the list, among the data streams round robin from cursor,
// with an envelope that can be written, the envelope's slot, how many bytes of
// it, and the stream's position.
func (s *Scheduler) pick(data []int32, cursor int, large bool) (*list, int32, int, int) {
	for i := range data {
		c := (cursor + i) % len(data)
		st := &s.streams[data[c]]
		if slot, n := s.fitting(st, large); slot != none {
			if large {
				return &st.large, slot, n, c
			}
			return &st.small, slot, n, c
		}
	}
	return nil, none, 0, 0
}

// smallScan is how far down a stream's small queue the scheduler looks for
// an envelope that fits the credit when the head does not: the envelopes
// there belong to different keys, so any may go first.
const smallScan = 8

// fitting returns the envelope of the stream's small or large queue to write
// next and how many bytes of it, or none. Large envelopes take turns from
// the head; a small one further down may pass a head that does not fit.
func (s *Scheduler) fitting(st *schedStream, large bool) (int32, int) {
	if large {
		if slot := st.large.head; slot != none {
			if n, ok := s.fits(st, &s.slots[slot]); ok {
				return slot, n
			}
		}
		return none, 0
	}
	slot := st.small.head
	for range smallScan {
		if slot == none {
			break
		}
		if n, ok := s.fits(st, &s.slots[slot]); ok {
			return slot, n
		}
		slot = s.slots[slot].next
	}
	return none, 0
}

// fits returns how many bytes of e's next frame the stream's credit allows.
// A frame is cut short by credit only if at least an eighth of the window is
// available, to avoid a trickle of tiny frames; the receiver grants credit
// when its peer may be blocked, so waiting cannot stall.
func (s *Scheduler) fits(st *schedStream, e *envelope) (int, bool) {
	limit := s.cfg.MaxFrame
	if e.large {
		limit = s.largeFrame()
		if st.cfg.Class == ClassData && s.slowPath() {
			// On a slow path a large envelope's frame fills the
			// congestion window, not past it: what stands in the
			// bottleneck's queue is what a small envelope waits behind,
			// and a whole frame more is 2.6 ms at 50 Mbit/s. A quarter
			// frame at least: frames are compressed one by one, and
			// each costs a grant.
			if room := s.est.CWnd() - s.est.Inflight(); room < int64(limit) {
				limit = int(max(room, int64(s.cfg.MaxFrame/4)))
			}
		}
	}
	want := min(e.size-e.sent, limit)
	avail := st.credit.Available()
	if int64(want) <= avail {
		return want, true
	}
	if avail > 0 && avail >= st.credit.Window()/8 {
		return int(avail), true
	}
	return 0, false
}

// slowPath reports whether sending MaxFrame at the path's sustained rate
// takes longer than slowFrameTime. Until a rate is measured it does not:
// cutting frames to the window before the window fits the path slows
// startup on fast paths.
func (s *Scheduler) slowPath() bool {
	r := s.est.SustainedRate()
	return r > 0 && float64(s.cfg.MaxFrame) > r*slowFrameTime.Seconds()
}

// LargeFrame returns the payload limit of a large envelope's next frame:
// what the path sends in FrameTime at its sustained rate, within MaxFrame
// and LargeFrame. The session also sizes the kernel's unsent queue by it.
func (s *Scheduler) LargeFrame() int { return s.largeFrame() }

// largeFrame returns the payload limit of a large envelope's next frame:
// what the path sends in FrameTime at its sustained rate (and at most the
// pacing rate), within MaxFrame and LargeFrame.
func (s *Scheduler) largeFrame() int {
	if s.cfg.LargeFrame <= s.cfg.MaxFrame {
		return s.cfg.MaxFrame
	}
	// The sustained rate, not the pacing rate: a bandwidth estimate a
	// burst inflated would make frames a slow link takes long to carry.
	n := min(s.est.PacingRate(), s.est.SustainedRate()) * s.cfg.FrameTime.Seconds()
	return int(max(float64(s.cfg.MaxFrame), min(n, float64(s.cfg.LargeFrame))))
}

func (s *Scheduler) emit(l *list, slot int32, n int, now time.Time) Frame {
	e := &s.slots[slot]
	st := &s.streams[e.stream]
	f := Frame{
		Kind:         FrameData,
		Stream:       st.cfg.ID,
		First:        e.sent == 0,
		Offset:       e.sent,
		Len:          n,
		StreamOffset: st.credit.Sent(),
		Handle:       Handle{slot, e.gen},
	}
	if f.First {
		e.id = st.nextID
		st.nextID++
	}
	f.Envelope = e.id
	if e.payload != nil {
		f.Payload = e.payload[e.sent : e.sent+n : e.sent+n]
	}
	_ = st.credit.Spend(int64(n)) // fits checked the credit
	e.sent += n
	if st.cfg.Class == ClassData {
		s.dataQueued -= int64(n)
	}
	s.est.OnSend(st.cfg.ID, st.credit.Sent(), n, now)
	s.pacer.Spend(n, now)
	if e.sent < e.size {
		if e.large {
			// Round robin: the next frame of this envelope waits its turn.
			s.unlink(l, slot)
			s.pushBack(l, slot)
		}
		return f
	}
	f.Last = true
	s.unlink(l, slot)
	s.unkey(slot)
	s.release(slot)
	return f
}

// ApplyGrant applies a grant from the peer for stream, at now: it adds credit
// (from Consumed) and feeds the estimator (from Received, or Consumed if the
// grant does not carry it). Stale grants are ignored; an impossible one fails
// with [ErrInvalidGrant] and changes nothing.
func (s *Scheduler) ApplyGrant(stream StreamID, g Grant, now time.Time) error {
	si := s.index(stream)
	if si < 0 {
		return fmt.Errorf("%w: %d", ErrUnknownStream, stream)
	}
	if _, err := s.streams[si].credit.Apply(g); err != nil {
		return fmt.Errorf("stream %d: %w", stream, err)
	}
	s.est.OnCredit(stream, g.acked(), now)
	return nil
}

// ResumeStream checks the byte count the peer received on stream, from the
// resume handshake, and returns the offset to resend from (see
// [SendCredit.Resume]).
func (s *Scheduler) ResumeStream(stream StreamID, peerReceived int64) (int64, error) {
	si := s.index(stream)
	if si < 0 {
		return 0, fmt.Errorf("%w: %d", ErrUnknownStream, stream)
	}
	from, err := s.streams[si].credit.Resume(peerReceived)
	if err != nil {
		return 0, fmt.Errorf("stream %d: %w", stream, err)
	}
	return from, nil
}

// Resend paces and records a frame that the session writes again after a
// resume, from its resend buffer: n payload bytes of stream at streamOffset.
// It returns how long pacing holds the frame; on 0 the frame must be written
// now, and it has been charged to the pacer and recorded by the estimator.
// Control and membership frames, and frames without payload (aborts), are
// never held. Resent bytes keep their stream offsets, so they take no credit.
// Write resent frames before any new frame from [Scheduler.Next].
func (s *Scheduler) Resend(stream StreamID, streamOffset int64, n int, now time.Time) (time.Duration, error) {
	si := s.index(stream)
	if si < 0 {
		return 0, fmt.Errorf("%w: %d", ErrUnknownStream, stream)
	}
	if n <= 0 {
		return 0, nil
	}
	class := s.streams[si].cfg.Class
	s.pacer.SetRate(s.est.PacingRate(), now)
	if d := s.pacer.Delay(class, n, now); d > 0 {
		return d, nil
	}
	s.pacer.Spend(n, now)
	s.est.OnSend(stream, streamOffset+int64(n), n, now)
	return 0, nil
}

// Resume prepares for a new connection: the estimator forgets what was in
// flight and keeps its measures, and the pacer starts with a full bucket.
// Queued envelopes stay queued; partly written ones continue where they
// stopped once the session has resent what the peer did not receive.
func (s *Scheduler) Resume(now time.Time) {
	s.est.Resume()
	s.pacer.Reset(now)
}

// Stats is a snapshot of a scheduler and its estimator, for metrics and
// debugging.
type Stats struct {
	// Pending is the number of envelopes queued or being written, and of
	// aborts not yet emitted.
	Pending int
	// QueuedDataBytes is the unwritten payload of envelopes on data streams.
	QueuedDataBytes int64
	// Bandwidth is the bandwidth estimate in bytes per second.
	Bandwidth float64
	// MinRTT is the path delay estimate.
	MinRTT time.Duration
	// PacingRate is the data pacing rate in bytes per second.
	PacingRate float64
	// CWnd and Inflight are the congestion window and the bytes in flight.
	CWnd, Inflight int64
	// Mode is the estimator's phase.
	Mode Mode
}

// Stats returns a snapshot of the scheduler's state.
func (s *Scheduler) Stats() Stats {
	return Stats{
		Pending:         s.pending,
		QueuedDataBytes: s.dataQueued,
		Bandwidth:       s.est.Bandwidth(),
		MinRTT:          s.est.MinRTT(),
		PacingRate:      s.est.PacingRate(),
		CWnd:            s.est.CWnd(),
		Inflight:        s.est.Inflight(),
		Mode:            s.est.Mode(),
	}
}
