package flow

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"
)

const (
	stControl    StreamID = 1
	stMembership StreamID = 2
	stApp        StreamID = 3
	stRepl       StreamID = 4
)

// testConfig has tiny frames so envelopes of a few hundred bytes are large.
func testConfig(window int64) Config {
	return Config{
		MaxFrame:  100,
		Estimator: EstimatorConfig{MinCwnd: 400, InitialCwnd: 800},
		Streams: []StreamConfig{
			{ID: stApp, Class: ClassData, Window: window},
			{ID: stRepl, Class: ClassData, Window: window},
			{ID: stMembership, Class: ClassMembership, Window: window},
			{ID: stControl, Class: ClassControl, Window: window},
		},
	}
}

func mustScheduler(t fataler, cfg Config) *Scheduler {
	t.Helper()
	s, err := NewScheduler(cfg)
	if err != nil {
		t.Fatalf("NewScheduler: %v", err)
	}
	return s
}

func mustEnqueue(t fataler, s *Scheduler, stream StreamID, key uint64, size int) Handle {
	t.Helper()
	h, err := s.EnqueueSize(stream, key, size)
	if err != nil {
		t.Fatalf("EnqueueSize(%d, %d, %d): %v", stream, key, size, err)
	}
	return h
}

// peer plays the receiving side for scheduler tests: it consumes everything
// at once and grants it when asked.
func grantAll(t fataler, s *Scheduler, now time.Time) {
	t.Helper()
	for _, st := range s.streams {
		c := st.credit
		if err := s.ApplyGrant(st.cfg.ID, Grant{Consumed: c.Sent(), Window: c.Window()}, now); err != nil {
			t.Fatalf("grant: %v", err)
		}
	}
}

// drain runs the scheduler to completion, waiting out pacing in virtual
// time and granting all credit whenever it is blocked.
func drain(t fataler, s *Scheduler, now time.Time) ([]Frame, time.Time) {
	t.Helper()
	var out []Frame
	for i := 0; s.Pending() > 0; i++ {
		if i > 1_000_000 {
			t.Fatalf("scheduler did not drain: %d pending", s.Pending())
		}
		f, wait, ok := s.Next(now)
		switch {
		case ok:
			out = append(out, f)
		case wait > 0:
			now = now.Add(wait)
		default:
			grantAll(t, s, now)
		}
	}
	return out, now
}

// untilBlocked writes frames, waiting out pacing in virtual time, until the
// scheduler is blocked by credit or the congestion window.
func untilBlocked(s *Scheduler, now time.Time) ([]Frame, time.Time) {
	var out []Frame
	for {
		f, wait, ok := s.Next(now)
		switch {
		case ok:
			out = append(out, f)
		case wait > 0:
			now = now.Add(wait)
		default:
			return out, now
		}
	}
}

func describe(fs []Frame) string {
	out := ""
	for _, f := range fs {
		if f.Kind == FrameAbort {
			out += fmt.Sprintf("abort(%d/%d) ", f.Stream, f.Envelope)
			continue
		}
		out += fmt.Sprintf("%d/%d@%d+%d ", f.Stream, f.Envelope, f.Offset, f.Len)
	}
	return out
}

func TestSchedulerSendsSmallEnvelopeBeforeFramesOfLargeOne(t *testing.T) {
	s := mustScheduler(t, testConfig(1<<20))
	large := mustEnqueue(t, s, stApp, 1, 350)
	small := mustEnqueue(t, s, stApp, 2, 60)
	frames, _ := drain(t, s, t0)
	if len(frames) != 5 || frames[0].Handle != small || !frames[0].First || !frames[0].Last {
		t.Fatalf("frames = %s; want the 60-byte envelope first, then 4 frames of the 350-byte one", describe(frames))
	}
	for _, f := range frames[1:] {
		if f.Handle != large {
			t.Fatalf("frames = %s; want only the large envelope after the small one", describe(frames))
		}
	}
}

func TestSchedulerInterleavesLargeEnvelopesRoundRobin(t *testing.T) {
	s := mustScheduler(t, testConfig(1<<20))
	a := mustEnqueue(t, s, stApp, 1, 300)
	b := mustEnqueue(t, s, stApp, 2, 300)
	c := mustEnqueue(t, s, stApp, 3, 300)
	frames, _ := drain(t, s, t0)
	want := []Handle{a, b, c, a, b, c, a, b, c}
	if len(frames) != len(want) {
		t.Fatalf("frames = %s; want 9 frames", describe(frames))
	}
	for i, f := range frames {
		if f.Handle != want[i] {
			t.Fatalf("frames = %s; want three 300-byte envelopes interleaved a b c a b c a b c", describe(frames))
		}
	}
}

func TestSchedulerAlternatesDataStreams(t *testing.T) {
	s := mustScheduler(t, testConfig(1<<20))
	mustEnqueue(t, s, stApp, 1, 300)
	mustEnqueue(t, s, stApp, 2, 300)
	mustEnqueue(t, s, stRepl, 1, 300)
	frames, _ := drain(t, s, t0)
	for i, f := range frames[:6] {
		if want := []StreamID{stApp, stRepl}[i%2]; f.Stream != want {
			t.Fatalf("frames = %s; want application and replication frames to alternate while both have data", describe(frames))
		}
	}
}

func TestSchedulerKeepsOrderOfEnvelopesToOneKey(t *testing.T) {
	s := mustScheduler(t, testConfig(1<<20))
	large := mustEnqueue(t, s, stApp, 7, 300)
	small := mustEnqueue(t, s, stApp, 7, 10)
	frames, _ := drain(t, s, t0)
	if len(frames) != 4 || frames[3].Handle != small || frames[2].Handle != large || !frames[2].Last {
		t.Fatalf("frames = %s; want the small envelope only after the earlier large one to the same key", describe(frames))
	}
}

func TestSchedulerEnvelopeQueuedAfterAKeyLetsThatKeysLaterEnvelopesPass(t *testing.T) {
	s := mustScheduler(t, testConfig(1<<20))
	before := mustEnqueue(t, s, stApp, 1, 150)
	large, err := s.EnqueueAfter(stApp, 9, 1, make([]byte, 300))
	if err != nil {
		t.Fatal(err)
	}
	later := mustEnqueue(t, s, stApp, 1, 150)
	same := mustEnqueue(t, s, stApp, 9, 10)
	frames, _ := drain(t, s, t0)
	var order []Handle
	for _, f := range frames {
		if f.Last {
			order = append(order, f.Handle)
		}
		if f.Handle == large && f.First {
			for _, g := range frames {
				if g.Handle == before && g.Last && g.StreamOffset > f.StreamOffset {
					t.Fatalf("frames = %s; want the large envelope to start only after the envelope queued before it on key 1", describe(frames))
				}
			}
		}
	}
	want := []Handle{before, later, large, same}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Fatalf("frames = %s; want key 1's envelopes done first (the later one not waiting for the large one), then the large one, then the small one behind it on key 9", describe(frames))
	}
}

func TestSchedulerOrdersKeysPerStreamOnly(t *testing.T) {
	s := mustScheduler(t, testConfig(1<<20))
	mustEnqueue(t, s, stApp, 7, 300)
	small := mustEnqueue(t, s, stRepl, 7, 10)
	f, _, ok := s.Next(t0)
	if !ok || f.Handle != small {
		t.Fatalf("first frame = %+v; want the small envelope: the same key on another stream is not ordered", f)
	}
}

func TestSchedulerCancelBeforeFirstFrameDropsEnvelopeSilently(t *testing.T) {
	s := mustScheduler(t, testConfig(1<<20))
	h := mustEnqueue(t, s, stApp, 1, 300)
	next := mustEnqueue(t, s, stApp, 1, 10)
	if got := s.Cancel(h); got != CancelDropped {
		t.Fatalf("Cancel = %v, want CancelDropped", got)
	}
	frames, _ := drain(t, s, t0)
	if len(frames) != 1 || frames[0].Handle != next || frames[0].Envelope != 0 {
		t.Fatalf("frames = %s; want only the next envelope of the key, with envelope id 0", describe(frames))
	}
}

func TestSchedulerCancelAfterFirstFrameEmitsAbort(t *testing.T) {
	s := mustScheduler(t, testConfig(1<<20))
	h := mustEnqueue(t, s, stApp, 1, 300)
	next := mustEnqueue(t, s, stApp, 1, 10)
	f, _, ok := s.Next(t0)
	if !ok || f.Handle != h {
		t.Fatalf("first frame = %+v, want one of the large envelope", f)
	}
	if got := s.Cancel(h); got != CancelAborted {
		t.Fatalf("Cancel after one frame = %v, want CancelAborted", got)
	}
	if got := s.Cancel(h); got != CancelUnknown {
		t.Errorf("second Cancel = %v, want CancelUnknown", got)
	}
	frames, _ := drain(t, s, t0)
	if len(frames) != 2 || frames[0].Kind != FrameAbort || frames[0].Envelope != f.Envelope || frames[1].Handle != next {
		t.Fatalf("frames = %s; want an abort of envelope %d, then the next envelope of the key", describe(frames), f.Envelope)
	}
}

func TestSchedulerCancelOfWrittenEnvelopeIsUnknown(t *testing.T) {
	s := mustScheduler(t, testConfig(1<<20))
	h := mustEnqueue(t, s, stApp, 1, 10)
	drain(t, s, t0)
	if got := s.Cancel(h); got != CancelUnknown {
		t.Errorf("Cancel of a fully written envelope = %v, want CancelUnknown", got)
	}
	if got := s.Cancel(Handle{slot: 99}); got != CancelUnknown {
		t.Errorf("Cancel of a never issued handle = %v, want CancelUnknown", got)
	}
	fresh := mustScheduler(t, testConfig(1<<20))
	mustEnqueue(t, fresh, stApp, 1, 10)
	if got := fresh.Cancel(Handle{}); got != CancelUnknown {
		t.Errorf("Cancel of the zero Handle = %v, want CancelUnknown", got)
	}
}

func TestSchedulerCancelOfQueuedMiddleEnvelopeKeepsKeyOrder(t *testing.T) {
	s := mustScheduler(t, testConfig(1<<20))
	a := mustEnqueue(t, s, stApp, 1, 10)
	b := mustEnqueue(t, s, stApp, 1, 10)
	c := mustEnqueue(t, s, stApp, 1, 10)
	s.Cancel(b)
	frames, _ := drain(t, s, t0)
	if len(frames) != 2 || frames[0].Handle != a || frames[1].Handle != c {
		t.Fatalf("frames = %s; want a then c", describe(frames))
	}
}

func TestSchedulerRespectsStreamCredit(t *testing.T) {
	s := mustScheduler(t, testConfig(150))
	mustEnqueue(t, s, stApp, 1, 300)
	frames, now := untilBlocked(s, t0)
	var sent int
	for _, f := range frames {
		sent += f.Len
	}
	if sent != 150 {
		t.Fatalf("sent %d bytes before blocking, want the 150-byte window", sent)
	}
	now = now.Add(time.Second)
	if err := s.ApplyGrant(stApp, Grant{Consumed: 150, Window: 150}, now); err != nil {
		t.Fatal(err)
	}
	if f, _, ok := s.Next(now); !ok || f.StreamOffset != 150 {
		t.Fatalf("after a grant: %+v, %v; want the frame at stream offset 150", f, ok)
	}
}

func TestSchedulerDoesNotCutFramesToATrickleOfCredit(t *testing.T) {
	s := mustScheduler(t, testConfig(800))
	mustEnqueue(t, s, stApp, 1, 795)
	untilBlocked(s, t0)
	mustEnqueue(t, s, stApp, 2, 100)
	if frames, _ := untilBlocked(s, t0.Add(time.Second)); len(frames) != 0 {
		t.Fatalf("frames = %s; want none: 5 bytes of credit are less than an eighth of the window", describe(frames))
	}
}

func TestSchedulerCutsFrameToAUsefulPartOfCredit(t *testing.T) {
	s := mustScheduler(t, testConfig(400))
	mustEnqueue(t, s, stApp, 1, 330)
	untilBlocked(s, t0)
	mustEnqueue(t, s, stApp, 2, 200)
	frames, _ := untilBlocked(s, t0.Add(time.Second))
	if len(frames) != 1 || frames[0].Len != 70 || frames[0].Last {
		t.Fatalf("frames = %s; want a first frame cut to the 70 bytes of credit left (over an eighth of the window)", describe(frames))
	}
}

func TestSchedulerControlAndMembershipBypassPacing(t *testing.T) {
	s := mustScheduler(t, testConfig(1<<20))
	mustEnqueue(t, s, stApp, 1, 100_000)
	var wait time.Duration
	for wait == 0 {
		var ok bool
		if _, wait, ok = s.Next(t0); !ok && wait == 0 {
			t.Fatal("data blocked without pacing; the test needs pacing to hold it")
		}
	}
	for _, st := range []StreamID{stMembership, stControl} {
		h := mustEnqueue(t, s, st, 1, 500)
		for range 5 {
			f, w, ok := s.Next(t0)
			if !ok || f.Handle != h {
				t.Fatalf("stream %d frame behind pacing: %+v wait %v; want it written at once", st, f, w)
			}
		}
	}
}

func TestSchedulerControlGoesBeforeMembershipBeforeData(t *testing.T) {
	s := mustScheduler(t, testConfig(1<<20))
	d := mustEnqueue(t, s, stApp, 1, 10)
	m := mustEnqueue(t, s, stMembership, 1, 10)
	c := mustEnqueue(t, s, stControl, 1, 10)
	frames, _ := drain(t, s, t0)
	if len(frames) != 3 || frames[0].Handle != c || frames[1].Handle != m || frames[2].Handle != d {
		t.Fatalf("frames = %s; want control, membership, data", describe(frames))
	}
}

func TestSchedulerFramesCarryPayloadSubslices(t *testing.T) {
	s := mustScheduler(t, testConfig(1<<20))
	payload := make([]byte, 250)
	for i := range payload {
		payload[i] = byte(i)
	}
	if _, err := s.Enqueue(stApp, 1, payload); err != nil {
		t.Fatal(err)
	}
	frames, _ := drain(t, s, t0)
	var got []byte
	for _, f := range frames {
		if &f.Payload[0] != &payload[f.Offset] || len(f.Payload) != f.Len {
			t.Fatalf("frame %+v does not carry payload[%d:%d]", f, f.Offset, f.Offset+f.Len)
		}
		got = append(got, f.Payload...)
	}
	if string(got) != string(payload) {
		t.Errorf("frames reassemble to %d bytes that differ from the payload", len(got))
	}
}

func TestSchedulerRejectsUnknownStream(t *testing.T) {
	s := mustScheduler(t, testConfig(1<<20))
	if _, err := s.EnqueueSize(99, 1, 1); !errors.Is(err, ErrUnknownStream) {
		t.Errorf("EnqueueSize on stream 99 = %v, want ErrUnknownStream", err)
	}
	if err := s.ApplyGrant(99, Grant{Window: 1}, t0); !errors.Is(err, ErrUnknownStream) {
		t.Errorf("ApplyGrant on stream 99 = %v, want ErrUnknownStream", err)
	}
}

func TestConfigValidateNamesTheField(t *testing.T) {
	for _, cfg := range []Config{
		{},
		{MaxFrame: -1, Streams: []StreamConfig{{ID: 1}}},
		{Streams: []StreamConfig{{ID: 1}, {ID: 1}}},
		{Streams: []StreamConfig{{ID: 1, Class: 9}}},
		{Streams: []StreamConfig{{ID: 1, Window: -5}}},
		{Streams: []StreamConfig{{ID: 1}}, Estimator: EstimatorConfig{MinCwnd: 10, InitialCwnd: 5}},
	} {
		if err := cfg.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
}

// modelEnvelope is the property test's record of one envelope.
type modelEnvelope struct {
	h        Handle
	stream   StreamID
	class    Class
	key      uint64
	size     int
	sent     int
	done     bool // last frame written, or cancelled
	cancel   CancelResult
	aborts   int
	afterEnd int // frames written after it was done
	// follows lists the envelopes of its after key that were queued
	// before it (EnqueueAfter): it starts only once they are done.
	follows []*modelEnvelope
}

type schedModel struct {
	s        *Scheduler
	envs     []*modelEnvelope
	byHandle map[Handle]*modelEnvelope
	nextOff  map[StreamID]int64
	lastID   map[StreamID]int64
	now      time.Time
}

// ready reports whether m is the oldest unfinished envelope of its key.
func (m *schedModel) ready(e *modelEnvelope) bool {
	if e.done {
		return false
	}
	for _, o := range e.follows {
		if !o.done {
			return false
		}
	}
	for _, o := range m.envs {
		if o == e {
			return true
		}
		if !o.done && o.stream == e.stream && o.key == e.key {
			return false
		}
	}
	return false
}

// open reports whether the stream has credit for the next frame of any
// envelope. (With less, the scheduler only looks at the head of a stream's
// queue, and a later, smaller envelope may fit where the head does not.)
func (m *schedModel) open(stream StreamID) bool {
	c := m.s.Credit(stream)
	return c.Available() >= int64(m.s.cfg.MaxFrame) || (c.Available() > 0 && c.Available() >= c.Window()/8)
}

func (m *schedModel) step(t *rapid.T) {
	var bypassReady, smallDataReady bool
	for _, e := range m.envs {
		if m.ready(e) && m.open(e.stream) {
			bypassReady = bypassReady || e.class.Bypasses()
			smallDataReady = smallDataReady || (!e.class.Bypasses() && e.size <= m.s.cfg.MaxFrame)
		}
	}
	f, wait, ok := m.s.Next(m.now)
	if !ok {
		if bypassReady {
			t.Fatalf("a control or membership envelope was ready but Next waited %v", wait)
		}
		if wait > 0 {
			m.now = m.now.Add(wait)
		} else {
			grantAll(t, m.s, m.now)
		}
		return
	}
	if f.Kind == FrameAbort {
		e := m.byHandle[f.Handle]
		if e == nil || e.cancel != CancelAborted {
			t.Fatalf("abort %+v for an envelope that was not cancelled after frames", f)
		}
		e.aborts++
		return
	}
	e := m.byHandle[f.Handle]
	if e == nil {
		t.Fatalf("frame %+v of an unknown envelope", f)
	}
	if e.done {
		e.afterEnd++
		t.Fatalf("frame %+v of an envelope that was finished or cancelled", f)
	}
	if !m.ready(e) {
		t.Fatalf("frame %+v of an envelope behind an unfinished one of key %d", f, e.key)
	}
	if bypassReady && !e.class.Bypasses() {
		t.Fatalf("data frame %+v while a control or membership envelope was ready", f)
	}
	if smallDataReady && !e.class.Bypasses() && e.size > m.s.cfg.MaxFrame {
		t.Fatalf("frame of a large envelope %+v while a small one was ready with credit", f)
	}
	if f.Offset != e.sent || f.First != (e.sent == 0) || f.Len <= 0 && e.size > 0 {
		t.Fatalf("frame %+v out of order: %d of %d bytes were written", f, e.sent, e.size)
	}
	if f.StreamOffset != m.nextOff[f.Stream] {
		t.Fatalf("frame %+v at stream offset %d, want %d", f, f.StreamOffset, m.nextOff[f.Stream])
	}
	m.nextOff[f.Stream] += int64(f.Len)
	if f.First {
		if int64(f.Envelope) != m.lastID[f.Stream]+1 {
			t.Fatalf("envelope id %d on stream %d, want %d", f.Envelope, f.Stream, m.lastID[f.Stream]+1)
		}
		m.lastID[f.Stream]++
	}
	e.sent += f.Len
	if f.Last != (e.sent == e.size) {
		t.Fatalf("frame %+v Last=%v with %d of %d bytes written", f, f.Last, e.sent, e.size)
	}
	e.done = f.Last
}

// Random workloads over four streams with random credit, pacing, grants and
// cancellations: every non-cancelled envelope's frames come exactly once and
// in order, keys keep their order, small goes before large, control and
// membership never wait, and a cancelled envelope emits nothing more, or one
// abort if it was partly written.
func TestSchedulerProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		window := rapid.Int64Range(50, 2000).Draw(t, "window")
		m := &schedModel{
			s:        mustScheduler(t, testConfig(window)),
			byHandle: map[Handle]*modelEnvelope{},
			nextOff:  map[StreamID]int64{},
			lastID:   map[StreamID]int64{stControl: -1, stMembership: -1, stApp: -1, stRepl: -1},
			now:      t0,
		}
		classes := map[StreamID]Class{stControl: ClassControl, stMembership: ClassMembership, stApp: ClassData, stRepl: ClassData}
		for range rapid.IntRange(1, 300).Draw(t, "ops") {
			switch rapid.IntRange(0, 5).Draw(t, "op") {
			case 0, 1:
				st := rapid.SampledFrom([]StreamID{stControl, stMembership, stApp, stRepl}).Draw(t, "stream")
				size := rapid.IntRange(0, 450).Draw(t, "size")
				e := &modelEnvelope{stream: st, class: classes[st], key: rapid.Uint64Range(0, 3).Draw(t, "key"), size: size}
				if rapid.Bool().Draw(t, "after") {
					after := rapid.Uint64Range(0, 3).Draw(t, "after key")
					for _, o := range m.envs {
						if !o.done && o.stream == st && o.key == after && after != e.key {
							e.follows = append(e.follows, o)
						}
					}
					h, err := m.s.EnqueueAfter(st, e.key, after, make([]byte, size))
					if err != nil {
						t.Fatalf("EnqueueAfter: %v", err)
					}
					e.h = h
				} else {
					e.h = mustEnqueue(t, m.s, st, e.key, size)
				}
				m.envs = append(m.envs, e)
				m.byHandle[e.h] = e
			case 2:
				if len(m.envs) == 0 {
					continue
				}
				e := m.envs[rapid.IntRange(0, len(m.envs)-1).Draw(t, "victim")]
				got := m.s.Cancel(e.h)
				var want CancelResult
				switch {
				case e.done:
					want = CancelUnknown
				case e.sent == 0:
					want = CancelDropped
				default:
					want = CancelAborted
				}
				if got != want {
					t.Fatalf("Cancel of envelope with %d of %d bytes written (done %v) = %v, want %v", e.sent, e.size, e.done, got, want)
				}
				if got != CancelUnknown {
					e.cancel, e.done = got, true
				}
			case 3:
				grantAll(t, m.s, m.now)
			default:
				m.step(t)
			}
			var queued int64
			for _, e := range m.envs {
				if !e.done && !e.class.Bypasses() {
					queued += int64(e.size - e.sent)
				}
			}
			if got := m.s.Stats().QueuedDataBytes; got != queued {
				t.Fatalf("Stats().QueuedDataBytes = %d, want %d unwritten on data streams", got, queued)
			}
		}
		for i := 0; m.s.Pending() > 0; i++ {
			if i > 100_000 {
				t.Fatalf("did not drain: %d pending", m.s.Pending())
			}
			m.step(t)
		}
		for _, e := range m.envs {
			switch {
			case e.cancel == CancelAborted && e.aborts != 1:
				t.Fatalf("partly written cancelled envelope got %d aborts, want 1", e.aborts)
			case e.cancel != CancelAborted && e.aborts != 0:
				t.Fatalf("envelope (cancel %v) got %d aborts, want none", e.cancel, e.aborts)
			case e.cancel == CancelUnknown && e.sent != e.size:
				t.Fatalf("envelope wrote %d of %d bytes, want all", e.sent, e.size)
			}
		}
	})
}

func TestSchedulerResendIsPacedAndRecordedButTakesNoCredit(t *testing.T) {
	s := mustScheduler(t, testConfig(1000))
	mustEnqueue(t, s, stApp, 1, 300)
	frames, now := untilBlocked(s, t0)
	credit := s.Credit(stApp).Available()
	s.Resume(now)
	var waited time.Duration
	for _, f := range frames {
		for {
			wait, err := s.Resend(f.Stream, f.StreamOffset, f.Len, now)
			if err != nil {
				t.Fatal(err)
			}
			if wait == 0 {
				break
			}
			waited += wait
			now = now.Add(wait)
		}
	}
	if waited == 0 {
		t.Error("resending 300 bytes with a 200-byte pacer burst never waited; want data resends paced")
	}
	if got := s.Estimator().Inflight(); got != 300 {
		t.Errorf("estimator in flight after resending 300 bytes = %d, want 300", got)
	}
	if got := s.Credit(stApp).Available(); got != credit {
		t.Errorf("credit after resending = %d, want unchanged %d", got, credit)
	}
	for _, st := range []StreamID{stControl, stMembership} {
		for range 10 {
			if wait, _ := s.Resend(st, 0, 100, now); wait != 0 {
				t.Fatalf("resend on stream %d waited %v, want control and membership never paced", st, wait)
			}
		}
	}
	if _, err := s.Resend(99, 0, 1, now); !errors.Is(err, ErrUnknownStream) {
		t.Errorf("Resend on stream 99 = %v, want ErrUnknownStream", err)
	}
}

func TestSchedulerSmallEnvelopePassesOneThatDoesNotFitCredit(t *testing.T) {
	s := mustScheduler(t, testConfig(400))
	mustEnqueue(t, s, stApp, 1, 360)
	untilBlocked(s, t0)
	mustEnqueue(t, s, stApp, 2, 90)
	fits := mustEnqueue(t, s, stApp, 3, 30)
	frames, _ := untilBlocked(s, t0.Add(time.Second))
	if len(frames) != 1 || frames[0].Handle != fits {
		t.Fatalf("frames = %s; want only the 30-byte envelope: 40 bytes of credit fit it, not the 90-byte one ahead", describe(frames))
	}
}

func TestSchedulerStatsCountQueuedDataOnly(t *testing.T) {
	s := mustScheduler(t, testConfig(1<<20))
	mustEnqueue(t, s, stApp, 1, 300)
	mustEnqueue(t, s, stMembership, 1, 50)
	h := mustEnqueue(t, s, stRepl, 1, 200)
	s.Cancel(h)
	if st := s.Stats(); st.Pending != 2 || st.QueuedDataBytes != 300 {
		t.Errorf("Stats() = %+v; want 2 pending and the 300 queued bytes of the application stream", st)
	}
	drain(t, s, t0)
	if st := s.Stats(); st.Pending != 0 || st.QueuedDataBytes != 0 {
		t.Errorf("Stats() after draining = %+v; want nothing pending or queued", st)
	}
}

// A large envelope's frames grow to what the path sends in FrameTime at
// its sustained rate (within LargeFrame) once the path is fast; before
// that, and after a burst that inflated the bandwidth estimate alone, they
// stay at MaxFrame.
func TestSchedulerLargeFramesGrowWithTheSustainedRate(t *testing.T) {
	cfg := simConfig()
	cfg.LargeFrame = 256 << 10
	big := 1 << 20
	first := func(s *Scheduler) int {
		mustEnqueue(t, s, stApp, 1, big)
		now := t0.Add(time.Second)
		f, wait, ok := s.Next(now)
		if !ok && wait > 0 { // the pacer's bucket fills at the new rate
			f, _, ok = s.Next(now.Add(wait))
		}
		if !ok {
			t.Fatalf("no frame: in flight %d, cwnd %d", s.Estimator().Inflight(), s.Estimator().CWnd())
		}
		if n := s.LargeFrame(); n != f.Len {
			t.Errorf("LargeFrame() = %d, the frame written has %d bytes", n, f.Len)
		}
		return f.Len
	}
	slow := mustScheduler(t, cfg)
	if n := first(slow); n != DefaultMaxFrame {
		t.Errorf("frame of %d bytes before any measurement, want MaxFrame %d", n, DefaultMaxFrame)
	}

	// 3 ms at 1 GB/s, as a token bucket lets its burst through: the
	// bandwidth estimate jumps, the sustained rate does not.
	burst := mustScheduler(t, cfg)
	feed(burst.Estimator(), t0, 200, 16<<10, 16*time.Microsecond, 50*time.Microsecond, false)
	if r := burst.Estimator().PacingRate(); r*DefaultFrameTime.Seconds() <= DefaultMaxFrame {
		t.Fatalf("pacing rate %.3g too low for the test", r)
	}
	if n := first(burst); n != DefaultMaxFrame {
		t.Errorf("frame of %d bytes after a 3 ms burst, want MaxFrame %d", n, DefaultMaxFrame)
	}

	// 50 ms of it: 250 µs at the sustained rate is about 250 KB.
	fast := mustScheduler(t, cfg)
	feed(fast.Estimator(), t0, 3000, 16<<10, 16*time.Microsecond, 50*time.Microsecond, false)
	e := fast.Estimator()
	want := min(int(min(e.PacingRate(), e.SustainedRate())*DefaultFrameTime.Seconds()), cfg.LargeFrame)
	if want <= DefaultMaxFrame {
		t.Fatalf("sustained rate %.3g too low for the test", e.SustainedRate())
	}
	if n := first(fast); n != want {
		t.Errorf("frame of %d bytes at a sustained %.3g B/s, want %d", n, e.SustainedRate(), want)
	}
}

// On a slow path a large envelope's frame is cut to what the congestion
// window has room for (a whole frame past it would stand in the
// bottleneck's queue in front of the next small envelope); on a fast path,
// where frames are sized by FrameTime, it is not.
func TestSchedulerCutsLargeFramesToTheWindowOnASlowPath(t *testing.T) {
	for _, c := range []struct {
		name     string
		size     int // bytes per millisecond fed
		wantsCut bool
	}{
		{"1 MB/s", 1_000, true},
		{"1 GB/s", 1_000_000, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := simConfig()
			cfg.Estimator.MinCwnd = 16 << 10
			s := mustScheduler(t, cfg)
			e := s.Estimator()
			now := feed(e, t0, 2000, c.size, time.Millisecond, 100*time.Microsecond, false)
			const room = 5000
			in := e.CWnd() - room - e.Inflight()
			e.OnSend(1, e.stream(1).acked+in, int(in), now)
			mustEnqueue(t, s, stApp, 1, 1<<20)
			f, wait, ok := s.Next(now)
			if !ok && wait > 0 {
				f, _, ok = s.Next(now.Add(wait))
			}
			if !ok {
				t.Fatalf("no frame: in flight %d, cwnd %d", e.Inflight(), e.CWnd())
			}
			if cut := f.Len == room; cut != c.wantsCut {
				t.Errorf("frame of %d bytes with %d of window left (cwnd %d, sustained %.3g B/s); cut to the window: %v, want %v",
					f.Len, room, e.CWnd(), e.SustainedRate(), cut, c.wantsCut)
			}
		})
	}
}
