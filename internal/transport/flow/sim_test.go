package flow

import (
	"container/heap"
	"time"
)

// sim is a deterministic simulated connection in virtual time: a Scheduler
// writes frames into a bottleneck link (a FIFO at rate bytes/s, then a
// one-way delay), a receiver with RecvCredit per stream consumes complete
// envelopes (at once, or at a limited rate) and sends grants back over the
// same delay, unlimited in rate. Nothing sleeps; events run in time order.
type sim struct {
	*world
	*simLink
	t      fataler
	s      *Scheduler
	recv   map[StreamID]*RecvCredit
	oneWay time.Duration // propagation delay each way
	// consumeRate, if positive, is how fast the receiving application
	// consumes, in bytes per second.
	consumeRate float64
	consumeFree time.Time

	wakeAt   time.Time // pending sender wake-up, zero if none
	grantAt  map[StreamID]time.Time
	onArrive func(f Frame, at time.Time)
	onWrite  func(f Frame)
	written  int64

	// epoch counts connections; what an old one still carries is dropped
	// (fenced) on arrival.
	epoch int
	// resend holds each stream's written frames until the peer credits
	// them, as the session's resend buffer does.
	resend map[StreamID][]Frame
	// timerGranularity, if positive, rounds the writer's pacing wake-ups
	// up to a multiple of it, as a coarse timer would.
	timerGranularity time.Duration
	resent           int     // frames written again after cuts
	replay           []Frame // frames to write again before any new one
}

// world is virtual time and its events, shared by the connections of a
// simulation.
type world struct {
	now    time.Time
	events eventHeap
	seq    int
	sims   []*sim
}

// simLink is a bottleneck: a FIFO drained at rate bytes per second.
type simLink struct {
	rate     float64
	linkFree time.Time // when the bottleneck finishes its queue
}

type simEvent struct {
	at  time.Time
	seq int
	run func()
}

type eventHeap []simEvent

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(simEvent)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

func newSim(t fataler, cfg Config, recv RecvConfig, rate float64, rtt time.Duration) *sim {
	t.Helper()
	return newSimOn(t, &world{now: t0}, &simLink{rate: rate}, cfg, recv, rtt)
}

// newSimOn adds a connection to a world, through a link it may share with
// others.
func newSimOn(t fataler, w *world, l *simLink, cfg Config, recv RecvConfig, rtt time.Duration) *sim {
	t.Helper()
	m := &sim{
		world: w, simLink: l,
		t: t, s: mustScheduler(t, cfg), recv: map[StreamID]*RecvCredit{},
		oneWay: rtt / 2, grantAt: map[StreamID]time.Time{},
		resend: map[StreamID][]Frame{},
	}
	w.sims = append(w.sims, m)
	for _, sc := range cfg.Streams {
		r := mustRecv(t, recv)
		m.recv[sc.ID] = &r
	}
	return m
}

func (m *world) at(when time.Time, run func()) {
	m.seq++
	heap.Push(&m.events, simEvent{at: when, seq: m.seq, run: run})
}

// runUntil processes events until virtual time end.
func (m *world) runUntil(end time.Time) {
	for _, c := range m.sims {
		c.pump()
	}
	for m.events.Len() > 0 {
		ev := m.events[0]
		if ev.at.After(end) {
			break
		}
		heap.Pop(&m.events)
		m.now = ev.at
		ev.run()
	}
	m.now = end
}

// pump writes what the resend buffer must write again, then every frame
// the scheduler allows now.
func (m *sim) pump() {
	for len(m.replay) > 0 {
		f := m.replay[0]
		wait, err := m.s.Resend(f.Stream, f.StreamOffset, f.Len, m.now)
		if err != nil {
			m.t.Fatalf("resend: %v", err)
		}
		if wait > 0 {
			m.wake(m.now.Add(wait))
			return
		}
		m.replay = m.replay[1:]
		m.transmit(f)
	}
	for {
		f, wait, ok := m.s.Next(m.now)
		if !ok {
			if wait > 0 {
				m.wake(m.now.Add(wait))
			}
			return
		}
		if m.onWrite != nil {
			m.onWrite(f)
		}
		m.written += int64(f.Len)
		m.resend[f.Stream] = append(m.resend[f.Stream], f)
		m.transmit(f)
	}
}

// transmit puts a frame on the link of the current connection.
func (m *sim) transmit(f Frame) {
	start := m.now
	if m.linkFree.After(start) {
		start = m.linkFree
	}
	m.linkFree = start.Add(time.Duration(float64(f.Len+frameOverhead) / m.rate * float64(time.Second)))
	epoch := m.epoch
	m.at(m.linkFree.Add(m.oneWay), func() {
		if epoch == m.epoch {
			m.arrive(f)
		}
	})
}

// cut breaks the connection: everything on the link is lost, and resume
// follows the package's recipe on a new connection at once.
func (m *sim) cut() {
	m.epoch++
	m.linkFree = m.now
	var replay []Frame
	for _, sc := range m.s.cfg.Streams {
		r := m.recv[sc.ID]
		r.Resume()
		from, err := m.s.ResumeStream(sc.ID, r.Received())
		if err != nil {
			m.t.Fatalf("resume of stream %d: %v", sc.ID, err)
		}
		for _, f := range m.resend[sc.ID] {
			// A frame without bytes at the boundary may or may not have
			// arrived; the receiver must take it twice.
			if f.StreamOffset >= from && (f.StreamOffset+int64(f.Len) > from || f.Len == 0) {
				replay = append(replay, f)
			}
		}
	}
	m.s.Resume(m.now)
	m.resent += len(replay)
	m.replay = replay
	for _, sc := range m.s.cfg.Streams {
		m.maybeGrant(sc.ID)
	}
	m.pump()
}

// frameOverhead is a header's worth of bytes on the link.
const frameOverhead = 16

func (m *sim) wake(at time.Time) {
	if m.timerGranularity > 0 {
		// A real writer sleeps on a timer that fires late, not early.
		at = t0.Add((at.Sub(t0) + m.timerGranularity - 1).Truncate(m.timerGranularity))
	}
	if !m.wakeAt.IsZero() && !m.wakeAt.After(at) && m.wakeAt.After(m.now) {
		return
	}
	m.wakeAt = at
	m.at(at, func() {
		if m.wakeAt.Equal(at) {
			m.wakeAt = time.Time{}
		}
		m.pump()
	})
}

func (m *sim) arrive(f Frame) {
	if m.onArrive != nil {
		m.onArrive(f, m.now)
	}
	if f.Kind != FrameData {
		return
	}
	r := m.recv[f.Stream]
	held, err := r.Arrive(int64(f.Len), f.Last, int64(f.Offset+f.Len), m.now)
	if err != nil {
		m.t.Fatalf("at %v: %v", m.now.Sub(t0), err)
	}
	if f.Last {
		if m.consumeRate <= 0 {
			_ = r.Consume(held, m.now)
		} else {
			start := m.now
			if m.consumeFree.After(start) {
				start = m.consumeFree
			}
			m.consumeFree = start.Add(time.Duration(float64(held.Frame) / m.consumeRate * float64(time.Second)))
			m.at(m.consumeFree, func() {
				_ = r.Consume(held, m.now)
				m.maybeGrant(f.Stream)
			})
			if r.Received()-r.Granted().Received < r.Slack() {
				// As the session does: an envelope held arms nothing
				// until the bytes waiting reach Slack (see Deadline).
				return
			}
		}
	}
	m.maybeGrant(f.Stream)
}

func (m *sim) maybeGrant(stream StreamID) {
	r := m.recv[stream]
	if g, ok := r.Grant(m.now, m.s.Estimator().MinRTT()); ok {
		epoch := m.epoch
		m.at(m.now.Add(m.oneWay), func() {
			if epoch != m.epoch {
				return
			}
			if err := m.s.ApplyGrant(stream, g, m.now); err != nil {
				m.t.Fatalf("at %v: %v", m.now.Sub(t0), err)
			}
			rs := m.resend[stream]
			i := 0
			for i < len(rs) && rs[i].StreamOffset+int64(rs[i].Len) <= g.Consumed && (rs[i].Len > 0 || rs[i].StreamOffset < g.Consumed) {
				i++
			}
			m.resend[stream] = rs[i:]
			m.pump()
		})
		return
	}
	if d := r.Deadline(); !d.IsZero() && !m.grantAt[stream].Equal(d) {
		m.grantAt[stream] = d
		m.at(d, func() { m.maybeGrant(stream) })
	}
}

// enqueue adds an envelope at the current virtual time and writes what can go.
func (m *sim) enqueue(stream StreamID, key uint64, size int) Handle {
	h := mustEnqueue(m.t, m.s, stream, key, size)
	m.pump()
	return h
}

// every runs f at now, now+period, ... until end.
func (m *sim) every(period time.Duration, end time.Time, f func()) {
	var tick func()
	tick = func() {
		f()
		if next := m.now.Add(period); !next.After(end) {
			m.at(next, tick)
		}
	}
	m.at(m.now, tick)
}

// simConfig is a scheduler configuration with production-sized frames.
func simConfig() Config {
	return Config{Streams: []StreamConfig{
		{ID: stControl, Class: ClassControl},
		{ID: stMembership, Class: ClassMembership},
		{ID: stApp, Class: ClassData},
		{ID: stRepl, Class: ClassData},
	}}
}

// keepBacklogged keeps envelopes of size bytes queued on stream until end,
// as a bulk transfer does.
func (m *sim) keepBacklogged(stream StreamID, size int, end time.Time) {
	m.every(time.Millisecond, end, func() {
		for m.s.dataQueued < int64(4*size) {
			mustEnqueue(m.t, m.s, stream, uint64(m.seq), size)
		}
		m.pump()
	})
}
