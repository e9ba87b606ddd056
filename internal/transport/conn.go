package transport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/troupe-go/troupe/ring"
	"github.com/troupe-go/troupe/wire"
)

// liveConn is the active connection of a session, with its reader and
// writer goroutines.
type liveConn struct {
	*hsConn
	s         *session
	gen       uint64
	heardNano atomic.Int64
	done      chan struct{} // closed when the writer has finished
	wake      chan struct{} // nudges the writer; capacity 1
	stop      chan struct{} // closed by Close
	closeOnce sync.Once
	enc       codec // writer's codec
	dec       codec // reader's codec
	lowat     int   // TCP_NOTSENT_LOWAT last set; the writer's

	// The writer goroutine and senders writing inline (writeInlineLocked)
	// take turns; these fields are guarded by s.mu.
	writing    bool   // a goroutine holds the turn: it encodes or writes frames
	writerWait bool   // the writer found the turn taken and waits for a kick
	tail       []byte // what an inline write left unwritten; the writer writes it first

	// raw writes without blocking; nil unless the connection is plain TCP.
	raw syscall.RawConn
	// drainGrant asks the reader to grant credit when it next finds the
	// socket empty (arrivedLocked); set only on plain TCP (raw).
	drainGrant atomic.Bool
	// Used by the inline writer holding the turn.
	iframes []outFrame
	ibuf    []byte
	// zbuf holds the compressed chunks of the frames of one write; the
	// goroutine holding the turn (writing) reuses it once they are out:
	// a buffer per frame was most of a streaming sender's garbage.
	zbuf   []byte
	rawBuf []byte
	rawN   int
	rawErr error
	rawFn  func(fd uintptr) bool
	// Used by the writer goroutine for its vectored writes (writeVec).
	wvec   [][]byte
	wiov   []syscall.Iovec
	wvErr  error
	wvecFn func(fd uintptr) bool

	// The relief watch of inline deliveries (see look).
	dseq       atomic.Uint64
	watchSeq   atomic.Uint64 // the delivery the watch relieves at its next look
	watchLast  atomic.Uint64 // dseq at the last look
	watchArmed atomic.Bool
	watchRd    atomic.Pointer[reader] // the reader of the delivery running
	watchMu    sync.Mutex
	watch      *time.Timer
	// Periods of the watch's next look after one that found the
	// deliveries over (see look); touched only by the look holding the
	// watch (watchArmed).
	watchIdle int64
}

func (c *liveConn) heard() time.Time { return time.Unix(0, c.heardNano.Load()) }

func (c *liveConn) Close() error {
	var err error
	c.closeOnce.Do(func() {
		close(c.stop)
		c.watchMu.Lock()
		if c.watch != nil {
			c.watch.Stop()
		}
		c.watchMu.Unlock()
		err = c.hsConn.Close()
	})
	return err
}

// freshLocked reports whether this side cannot resume with peer: it
// holds no session with exactly that identity. It is read after the old
// connection is fenced, never from the hello: a hello may predate the
// activation of another connection of a simultaneous dial.
func (s *session) freshLocked(peer hello) bool {
	return s.id != peer.Node
}

// resumeAsAcceptor arbitrates a completed handshake, then exchanges resume
// frames: ours first, then the dialer's.
func (s *session) resumeAsAcceptor(ctx context.Context, hc *hsConn) error {
	t := s.t
	self := t.loc.node
	s.mu.Lock()
	if s.dialing && dialOrder(self, hc.peer.Node) < 0 {
		// Our own dial wins the simultaneous-dial rule if it completes;
		// give it half the handshake timeout (a relay may have swallowed
		// it).
		done := s.dialDone
		s.mu.Unlock()
		timer := time.NewTimer(t.cfg.HandshakeTimeout / 2)
		select {
		case <-done:
		case <-timer.C:
		case <-ctx.Done():
		}
		timer.Stop()
		s.mu.Lock()
		if s.conn != nil && s.conn.opener(self) == self {
			s.mu.Unlock()
			return supersede(hc)
		}
		if s.dialing && s.dialCancel != nil {
			s.dialCancel()
		}
	}
	if c := s.conn; c != nil && dialOrder(c.opener(self), hc.peer.Node) < 0 && time.Since(s.upAt) < t.cfg.HandshakeTimeout {
		// A connection opened by the smaller identity was just
		// established: this one is the losing half of a simultaneous
		// dial.
		s.mu.Unlock()
		return supersede(hc)
	}
	s.takeSlotLocked(hc)
	counts := s.countsLocked()
	fresh := s.freshLocked(hc.peer)
	s.mu.Unlock()

	if err := writeResume(hc, fresh, counts); err != nil {
		return s.abandon(hc, err)
	}
	theirFresh, theirs, confirm, err := readResume(ctx, hc)
	if err == nil && confirm {
		err = frameErr(ErrMalformedFrame, Header{Type: FrameResume}, "confirm from the dialer")
	}
	if err != nil {
		return s.abandon(hc, err)
	}
	return s.activate(hc, fresh || theirFresh, theirs)
}

// takeSlotLocked makes hc the connection in its resume exchange. Whatever
// connection held the slot is closed, and the active one fenced, before
// the counts are snapshotted: a side never makes a connection its own
// other than the one it last sent counts on, so the counts the peer acts
// on are never stale.
func (s *session) takeSlotLocked(hc *hsConn) {
	if old := s.activating; old != nil && old != hc {
		old.Close()
	}
	s.fenceLocked()
	s.activating = hc
}

// abandon gives up a connection in its resume exchange. If it was the one
// the session was waiting for, the session is without a connection again
// and dials if it can.
func (s *session) abandon(hc *hsConn, err error) error {
	hc.Close()
	s.mu.Lock()
	if s.activating == hc {
		s.activating = nil
		if s.conn == nil && !s.t.isClosed() {
			s.ensureDialLocked()
		}
	}
	s.mu.Unlock()
	return err
}

// resumeAsDialer waits for the acceptor's verdict, then answers with our
// counts.
func (s *session) resumeAsDialer(ctx context.Context, hc *hsConn) error {
	theirFresh, theirs, confirm, err := readResume(ctx, hc)
	if err == nil && confirm {
		err = frameErr(ErrMalformedFrame, Header{Type: FrameResume}, "confirm before counts")
	}
	if err != nil {
		hc.Close()
		return err
	}
	s.mu.Lock()
	s.takeSlotLocked(hc)
	counts := s.countsLocked()
	fresh := s.freshLocked(hc.peer)
	s.mu.Unlock()
	if err := writeResume(hc, fresh, counts); err != nil {
		return s.abandon(hc, err)
	}
	// The acceptor's counts are only good if it makes this connection
	// its own: wait for its confirmation.
	_, _, confirm, err = readResume(ctx, hc)
	if err == nil && !confirm {
		err = frameErr(ErrMalformedFrame, Header{Type: FrameResume}, "counts twice")
	}
	if err != nil {
		return s.abandon(hc, err)
	}
	return s.activate(hc, fresh || theirFresh, theirs)
}

func supersede(hc *hsConn) error {
	hc.SetWriteDeadline(time.Now().Add(time.Second))
	hc.Write(appendFrame(nil, FrameGoodbye, 0, 0, appendGoodbye(nil, goodbye{Code: goodbyeSuperseded})))
	hc.Close()
	return errSuperseded
}

// fenceLocked stops the active connection: from now on nothing it
// delivers is counted.
func (s *session) fenceLocked() {
	if s.conn != nil {
		s.noteHeardLocked(s.conn)
		s.gen++
		s.conn.Close()
		s.conn = nil
		s.downAt = time.Now()
	}
}

func writeResume(hc *hsConn, fresh bool, c resumeCounts) error {
	var f Flags
	if fresh {
		f = FlagFresh
	}
	_, err := hc.Write(appendFrame(nil, FrameResume, f, 0, appendResume(nil, c)))
	return err
}

func readResume(ctx context.Context, hc *hsConn) (fresh bool, c resumeCounts, confirm bool, err error) {
	fresh, c, err = readResumeFrame(ctx, hc, &confirm)
	return fresh, c, confirm, err
}

func readResumeFrame(ctx context.Context, hc *hsConn, confirm *bool) (bool, resumeCounts, error) {
	if dl, ok := ctx.Deadline(); ok {
		hc.SetReadDeadline(dl)
		defer hc.SetReadDeadline(time.Time{})
	}
	f, err := newFrameReader(hc.r, maxHelloSize).read()
	if err != nil {
		return false, resumeCounts{}, tlsRefusal(err)
	}
	switch f.Type {
	case FrameResume:
		if f.Flags&FlagConfirm != 0 {
			*confirm = true
			if len(f.Payload) != 0 || f.Flags&FlagFresh != 0 {
				return false, resumeCounts{}, frameErr(ErrMalformedFrame, f.Header, "confirm with a payload")
			}
			return false, resumeCounts{}, nil
		}
		c, err := parseResume(f.Header, f.Payload)
		return f.Flags&FlagFresh != 0, c, err
	case FrameGoodbye:
		g, err := parseGoodbye(f.Header, f.Payload)
		if err != nil {
			return false, resumeCounts{}, err
		}
		switch g.Code {
		case goodbyeSuperseded:
			return false, resumeCounts{}, errSuperseded
		case goodbyeRefused:
			return false, resumeCounts{}, &wire.Refused{Reason: g.Refuse, ByPeer: true, Detail: g.Detail}
		}
		return false, resumeCounts{}, fmt.Errorf("%w: goodbye during handshake", wire.ErrClosed)
	}
	return false, resumeCounts{}, frameErr(ErrMalformedFrame, f.Header, "want resume")
}

// activate makes hc the session's connection, unless another one took its
// place meanwhile.
func (s *session) activate(hc *hsConn, fresh bool, theirs resumeCounts) error {
	t := s.t
	enc, err := newCodec(hc.codec, t.cfg.Limits.MaxFrame)
	if err != nil {
		hc.Close()
		return err
	}
	dec, _ := newCodec(hc.codec, t.cfg.Limits.MaxFrame)
	s.mu.Lock()
	if s.activating != hc || s.closing || t.isClosed() {
		s.mu.Unlock()
		closeCodecs(enc, dec)
		return s.abandon(hc, errSuperseded)
	}
	if !hc.dialer {
		// Tell the dialer, before any data, that this connection is now
		// the session's. The frame is tiny and first on a fresh
		// connection, so writing it under the lock cannot block long.
		hc.SetWriteDeadline(time.Now().Add(t.cfg.HandshakeTimeout))
		_, err := hc.Write(appendFrame(nil, FrameResume, FlagConfirm, 0, nil))
		hc.SetWriteDeadline(time.Time{})
		if err != nil {
			s.mu.Unlock()
			closeCodecs(enc, dec)
			return s.abandon(hc, err)
		}
	}
	s.activating = nil
	now := time.Now()
	prev := s.id
	if !s.resumeLocked(hc.peer.Node, fresh, theirs, now) {
		s.mu.Unlock()
		closeCodecs(enc, dec)
		hc.Close()
		return fmt.Errorf("%w: resume impossible", wire.ErrPeerDead)
	}
	s.gen++
	c := &liveConn{hsConn: hc, s: s, gen: s.gen, done: make(chan struct{}), wake: make(chan struct{}, 1), stop: make(chan struct{}), enc: enc, dec: dec, lowat: t.cfg.NotSentLowat}
	if tc, ok := hc.Conn.(*net.TCPConn); ok {
		if rc, err := tc.SyscallConn(); err == nil {
			c.raw, c.rawFn, c.wvecFn = rc, c.writeRaw, c.writeVecRaw
		}
	}
	c.heardNano.Store(now.UnixNano())
	s.conn = c
	s.upAt = now
	s.downAt = time.Time{}
	s.wantSince = time.Time{}
	s.pongs, s.pingWant = nil, false
	s.credits = s.credits[:0] // the resume makes the next grant due anyway
	if s.dialCancel != nil && s.dialing {
		s.dialCancel()
	}
	if !s.up || prev != hc.peer.Node || s.suspected {
		s.up = true
		t.emit(PeerEvent{Peer: hc.peer.Node, Up: true})
	}
	s.suspected = false
	t.wg.Add(2)
	go c.readLoop()
	go c.writeLoop()
	s.kick()
	s.mu.Unlock()
	return nil
}

func closeCodecs(cs ...codec) {
	for _, c := range cs {
		if c != nil {
			c.close()
		}
	}
}

// keepaliveReader counts every byte heard and turns silence into pings
// and, if the silence lasts, into an error.
type keepaliveReader struct {
	c      *liveConn
	pinged bool
	set    int64 // heardNano when the read deadline was last moved
	limit  int   // if positive, the most one Read returns
	// at is when the last Read returned bytes; the read loop takes it as
	// the arrival time of the frames in them, sparing a clock reading per
	// frame (155 ns on this project's VMs). The loop zeroes it after an
	// inline delivery, which may have run long.
	at time.Time

	p      []byte // the buffer of the raw read under way
	n      int    // its outcome
	err    error
	readFn func(fd uintptr) bool // readRaw, bound once
}

func (k *keepaliveReader) Read(p []byte) (int, error) {
	cfg := &k.c.s.t.cfg
	if k.limit > 0 && len(p) > k.limit {
		p = p[:k.limit]
	}
	for {
		n, err := k.read(p)
		if n > 0 {
			k.at = time.Now()
			k.c.heardNano.Store(k.at.UnixNano())
			k.pinged = false
		}
		if err != nil && isTimeout(err) {
			silent := time.Since(k.c.heard())
			switch {
			case silent < cfg.KeepaliveAfter:
				k.c.SetReadDeadline(k.c.heard().Add(cfg.KeepaliveAfter))
			case !k.pinged:
				k.pinged = true
				s := k.c.s
				s.mu.Lock()
				s.pingWant = true
				s.kick()
				s.mu.Unlock()
				k.c.SetReadDeadline(time.Now().Add(cfg.KeepaliveTimeout))
			default:
				return n, fmt.Errorf("troupe: peer silent for %v: %w", silent.Round(time.Millisecond), err)
			}
			if n > 0 {
				return n, nil
			}
			continue
		}
		if n > 0 {
			// Moving the deadline is a timer update; doing it on every
			// read costs more than the rare early timeout, which the
			// first case above extends to KeepaliveAfter after the last
			// byte heard.
			if now := k.c.heardNano.Load(); now-k.set >= int64(cfg.KeepaliveAfter/8) {
				k.set = now
				k.c.SetReadDeadline(time.Unix(0, now).Add(cfg.KeepaliveAfter))
			}
		}
		return n, err
	}
}

// isTimeout reports whether err is a net.Error timeout. A function of its
// own: the net.Error that errors.As fills escapes, and declared in Read it
// cost an allocation per read.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// read reads into p from the connection, on plain TCP with rawRead
// (waiting in the network poller as net.Conn.Read does).
func (k *keepaliveReader) read(p []byte) (int, error) {
	c := k.c
	if c.raw == nil || len(p) == 0 {
		return c.hsConn.Conn.Read(p)
	}
	k.p = p
	err := c.raw.Read(k.readFn)
	for err == nil && k.err == syscall.EAGAIN {
		// The socket is drained: the grants left for this moment go
		// now (outside the callback: Close waits for it, under s.mu).
		c.grantDrained()
		err = c.raw.Read(k.readFn)
	}
	k.p = nil
	if err != nil {
		return 0, err // closed, or the deadline passed
	}
	switch n, rerr := k.n, k.err; {
	case rerr != nil:
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: rerr}
	case n == 0:
		return 0, io.EOF
	default:
		return n, nil
	}
}

// readRaw is the RawConn callback of read: false (wait until readable)
// while the socket has nothing.
func (k *keepaliveReader) readRaw(fd uintptr) bool {
	for {
		n, err := rawRead(int(fd), k.p)
		switch err {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			if k.c.drainGrant.Load() {
				k.n, k.err = 0, err // read returns to grant, then waits
				return true
			}
			return false
		}
		k.n, k.err = n, err
		return true
	}
}

// grantDrained sends the grants that chunks arriving in a burst left
// for the moment the reader finds the socket empty (see arrivedLocked).
// With the writer idle the reader writes them itself, as a sender writes
// inline: waking the writer for a credit frame cost a goroutine hand-off
// per grant.
func (c *liveConn) grantDrained() {
	c.drainGrant.Store(false)
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != c.gen {
		return
	}
	now := time.Now()
	rtt := s.sched.Estimator().MinRTT()
	for i := range s.recv {
		if g, ok := s.recv[i].Grant(now, rtt); ok {
			s.credits = append(s.credits, creditFrame(StreamID(i), g))
		} else {
			s.grantLaterLocked(StreamID(i), now)
		}
	}
	if len(s.credits) > 0 {
		s.writeCreditsLocked()
	}
}

// directMin is the least chunk the reader reads straight into its
// envelope instead of through the frame buffer: below it the extra call
// costs more than the copy it saves.
const directMin = 4 << 10

// reader is the state of a connection's reading, which passes from one
// goroutine to another when the reader is relieved (deliverInline).
type reader struct {
	br      *bufio.Reader
	fr      *frameReader
	src     io.Reader // what br reads from; large chunks are read from it directly
	ka      *keepaliveReader
	drained bool // a chunk read from src emptied br
	scratch []byte
}

// headerFill bounds the read that refills the buffer for a frame header
// after a chunk was read past the buffer: a full 64 KiB refill would
// mostly hold the next frame's chunk, to be copied out of the buffer
// again (a twentieth of a bulk receiver's CPU).
const headerFill = 4 << 10

// header reads the next frame's header.
func (rd *reader) header() (Header, error) {
	if rd.drained {
		rd.ka.limit = headerFill
	}
	h, err := rd.fr.header()
	rd.ka.limit, rd.drained = 0, false
	return h, err
}

func (c *liveConn) readLoop() {
	t := c.s.t
	c.SetReadDeadline(time.Now().Add(t.cfg.KeepaliveAfter))
	// Bytes the handshake reader already buffered come first.
	ka := &keepaliveReader{c: c}
	ka.readFn = ka.readRaw
	src := io.MultiReader(bufferedOf(c.r), ka)
	br := bufio.NewReaderSize(src, 64<<10)
	c.read(&reader{br: br, fr: newFrameReader(br, t.cfg.Limits.MaxFrame), src: src, ka: ka})
}

// read reads frames until the connection ends, or until another goroutine
// relieves it of reading while it delivers an envelope.
func (c *liveConn) read(rd *reader) {
	s, t := c.s, c.s.t
	defer t.wg.Done()
	fr := rd.fr
	var err error
	for {
		var h Header
		h, err = rd.header()
		if err != nil {
			break
		}
		if h.Type == FrameData && h.Flags&FlagCompressed == 0 && h.Length >= directMin {
			var fenced bool
			var tk taking
			fenced, tk, err = c.readDataDirect(rd, h)
			if fenced {
				c.fenced()
				return
			}
			if err != nil {
				break
			}
			if tk.took && c.deliverInline(rd, tk.st, tk.from, tk.dv) {
				return // another goroutine reads now
			}
			continue
		}
		var f frame
		f, err = fr.payload(h)
		if err != nil {
			break
		}
		var d dataFrame
		var chunk []byte
		if f.Type == FrameData {
			d, err = parseData(f.Header, f.Payload, t.cfg.Limits.MaxFrame, t.cfg.Limits.MaxMessage)
			if err != nil {
				break
			}
			chunk = d.Chunk
			if f.Flags&FlagCompressed != 0 {
				if c.dec == nil {
					err = frameErr(ErrMalformedFrame, f.Header, "compressed chunk on an uncompressed connection")
					break
				}
				rd.scratch, err = c.dec.decompress(rd.scratch[:0], d.Chunk, int(d.RawLen), t.cfg.Limits.MaxFrame)
				if err != nil {
					err = frameErr(ErrDecompress, f.Header, "%v", err)
					break
				}
				chunk = rd.scratch
			}
		}
		now := rd.ka.at
		if now.IsZero() {
			now = time.Now()
		}
		s.mu.Lock()
		if s.gen != c.gen {
			s.mu.Unlock()
			c.fenced()
			return
		}
		s.mayTake = f.Type == FrameData
		// The last chunk of an envelope of several frames, as one read
		// in place (readDataDirect), may go to the reader whatever its
		// size (see inlineStream).
		s.mayTakeLarge = s.mayTake && f.Flags&FlagFirst == 0
		err = c.handleLocked(f, d, chunk, now, nil)
		took, dv, st, from := s.took, s.taken, s.takenSt, s.id
		s.mayTake, s.mayTakeLarge, s.took, s.taken = false, false, false, delivery{}
		s.mu.Unlock()
		if err != nil {
			if took {
				s.mu.Lock()
				s.busy[st] = false
				s.mu.Unlock()
			}
			break
		}
		if took && c.deliverInline(rd, st, from, dv) {
			return // another goroutine reads now
		}
	}
	closeCodecs(c.dec)
	c.broken(err)
}

// deliverInline runs the handler of an envelope on the reader, which
// spares the hop to the stream's deliverer: the session took it because
// the stream's handler was idle and its inbox empty, and marked the
// stream busy, so what arrives meanwhile queues behind it. A DeferHandler
// then finishes its work after the envelope is consumed. Should the
// handler run long (reliefAfter to maxIdleLooks+1 times it, see look), a
// new goroutine continues reading from rd; deliverInline then reports true and the caller must end.
func (c *liveConn) deliverInline(rd *reader, st StreamID, from ring.NodeID, d delivery) (relieved bool) {
	s, t := c.s, c.s.t
	h := t.handlers[st].Load()
	quick := false
	if h != nil {
		if qh, ok := (*h).(QuickHandler); ok {
			quick = qh.Quick(d.payload)
		}
	}
	seq := c.watchDelivery(rd, !quick)
	var then func(relieve func())
	if h != nil && *h != nil {
		if dh, ok := (*h).(DeferHandler); ok {
			then = dh.ReceiveDefer(from, d.payload)
		} else {
			(*h).Receive(from, d.payload)
		}
	} else {
		t.bufs.put(d.payload) // dropped: nobody holds it
	}
	now := time.Now()
	s.mu.Lock()
	s.consumedLocked(st, d, now, then == nil)
	if len(s.inbox[st]) > 0 {
		s.ready[st].Signal()
	}
	s.mu.Unlock()
	if then != nil {
		then(func() { c.relieve(seq, rd) })
		// The work's reply, if it wrote one, took the grant along; one
		// still pending gets the grant timer only now.
		s.mu.Lock()
		if !s.closing {
			s.grantLaterLocked(st, time.Time{}) // reads the clock if it arms
		}
		s.mu.Unlock()
		now = time.Time{} // that work may have run long
	}
	// Fails if the watch relieved this delivery: a new reader reads.
	if !c.dseq.CompareAndSwap(seq, seq+1) {
		return true
	}
	rd.ka.at = now // the clock for the frames the reader has buffered
	return false
}

// The relief watch. Arming a timer for every inline delivery would cost
// more than the delivery: adding a timer wakes another thread of the Go
// scheduler, or the one waiting in the network poller. One timer per
// connection instead looks at the deliveries while they go on, and rests
// once a look finds none since the last. A delivery it finds running on
// two looks in a row, or on the first look after the delivery armed it,
// is relieved. After a look that finds deliveries since but none running,
// the next look comes later, twice as late each time that repeats, from 2
// up to maxIdleLooks periods; a look that finds one running looks again
// one period later (and the next idle one waits as long as before). So a
// blocking delivery is relieved reliefAfter to (maxIdleLooks+1) times
// reliefAfter after it starts (1-9 ms), and a ping-pong of short
// deliveries costs a firing every maxIdleLooks periods. dseq counts the
// starts and ends of deliveries (odd while one runs); the watch relieves
// by moving it on (CAS), which the delivery's end then fails to do.

// watchDelivery marks the start of an inline delivery by the reader rd
// and, if arm, makes sure the watch runs; it returns the delivery's
// number. A delivery not armed for is still relieved by a watch that
// runs for earlier ones.
func (c *liveConn) watchDelivery(rd *reader, arm bool) uint64 {
	c.watchRd.Store(rd)
	seq := c.dseq.Add(1)
	if arm && !c.watchArmed.Load() && c.watchArmed.CompareAndSwap(false, true) {
		c.armWatch(seq, 1)
	}
	return seq
}

// relieve hands reading to a new goroutine now, if delivery seq still
// runs unrelieved: its work is about to wait (for a reply that may come
// on this very connection).
func (c *liveConn) relieve(seq uint64, rd *reader) {
	if c.dseq.CompareAndSwap(seq, seq+1) {
		c.s.t.wg.Add(1)        // the delivering goroutine still holds its count
		rd.ka.at = time.Time{} // the last read is a relief's time old
		go c.read(rd)
	}
}

// armWatch arms the watch for delivery seq, to look in reliefAfter times
// periods; the caller set watchArmed.
func (c *liveConn) armWatch(seq uint64, periods int64) {
	c.watchSeq.Store(seq)
	if h := c.s.t.tune.watchArm; h != nil {
		h(c, periods) // the test calls look itself
		return
	}
	d := time.Duration(periods) * c.s.t.tune.reliefAfter
	c.watchMu.Lock()
	if c.watch == nil {
		c.watch = time.AfterFunc(d, c.look)
	} else {
		c.watch.Reset(d)
	}
	c.watchMu.Unlock()
}

// maxIdleLooks is the most reliefAfter periods the watch waits after a
// look that found deliveries since the last one but none running. Short
// deliveries (a remote ask's handler) then cost a firing every 8 ms rather
// than every 3 ms (session 5) or 1 ms (session 4): a firing is the wake-up
// of a sleeping thread and back, often on the other vCPU (25-40 us of CPU
// measured per firing), and its re-arming another. A delivery that starts
// meanwhile and blocks is relieved within maxIdleLooks+1 periods.
const maxIdleLooks = 8

// look is the watch: it relieves the delivery it saw running at its last
// look (or that armed it), and looks again while deliveries go on.
func (c *liveConn) look() {
	select {
	case <-c.stop:
		c.watchArmed.Store(false)
		return
	default:
	}
	v := c.dseq.Load()
	last := c.watchLast.Swap(v)
	switch {
	case v&1 == 0 && v == last:
		// No delivery since the last look: rest until the next one.
		c.watchIdle = 0
		c.watchArmed.Store(false)
		// A delivery that started after the load above may have seen the
		// watch armed and left it to us.
		if v2 := c.dseq.Load(); v2&1 == 1 && c.watchArmed.CompareAndSwap(false, true) {
			c.armWatch(v2, 1)
		}
		return
	case v&1 == 0:
		// Deliveries since the last look, none running now.
		c.watchIdle = min(max(2*c.watchIdle, 2), maxIdleLooks)
		c.armWatch(v, c.watchIdle)
		return
	case v == c.watchSeq.Load():
		c.relieve(v, c.watchRd.Load())
	}
	// Running: look again a period later. The idle wait stays as long
	// (starting over cost a ping-pong busy enough to be caught running
	// now and then twice the firings), so the bound stays as stated.
	c.armWatch(v, 1)
}

// fenced ends the reader of a connection a newer one replaced.
func (c *liveConn) fenced() {
	c.Close()
	closeCodecs(c.dec)
}

// readDataDirect reads an uncompressed data frame whose header was just
// read, with the chunk going straight into the buffer of its envelope
// rather than through the frame buffer and a copy. The frame is applied
// only once whole, as any other: a connection that breaks inside it
// changes nothing. It reports fenced when a newer connection owns the
// session (the reader then ends quietly).
func (c *liveConn) readDataDirect(rd *reader, h Header) (fenced bool, tk taking, err error) {
	s, lim, br := c.s, c.s.t.cfg.Limits, rd.br
	pre, err := br.Peek(min(int(h.Length), maxDataOverhead))
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return false, tk, err
	}
	d, n, err := parseDataPrefix(h, pre, int(h.Length), lim.MaxFrame, lim.MaxMessage)
	if err != nil {
		return false, tk, err
	}
	br.Discard(n)
	s.mu.Lock()
	if s.gen != c.gen {
		s.mu.Unlock()
		return true, tk, nil
	}
	p, dst := s.chunkTargetLocked(h, d, int(h.Length)-n, c.gen)
	s.mu.Unlock()
	if p != nil && dst == nil {
		dst = p.allocChunk(s.t.bufs, int(h.Length)-n)
	}
	if dst == nil {
		// Not a chunk the session can take: read it into a scratch
		// buffer; applying it reports what is wrong.
		dst = make([]byte, int(h.Length)-n)
	}
	// What the buffer holds, then the rest straight from the socket.
	k, _ := br.Read(dst[:min(len(dst), br.Buffered())])
	if k < len(dst) {
		if _, err := io.ReadFull(rd.src, dst[k:]); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return false, tk, err
		}
		rd.drained = true
	}
	now := time.Now()
	s.mu.Lock()
	p.filledLocked(c.gen)
	if s.gen != c.gen {
		s.mu.Unlock()
		return true, tk, nil
	}
	// The envelope this chunk completes goes to the reader when its
	// stream's deliverer is idle (replication too, see inlineStream):
	// handing a large envelope to the deliverer cost a wake-up and a park
	// per envelope, against a handler that a large envelope's reading
	// dwarfs (the relief watch hands reading on if it blocks).
	s.mayTake, s.mayTakeLarge = true, true
	err = c.handleLocked(frame{Header: h}, d, dst, now, p)
	tk = taking{s.took, s.taken, s.takenSt, s.id}
	s.mayTake, s.mayTakeLarge, s.took, s.taken = false, false, false, delivery{}
	if err != nil && tk.took {
		s.busy[tk.st] = false
		tk.took = false
	}
	s.mu.Unlock()
	return false, tk, err
}

// taking is an envelope the session handed to the reader to deliver.
type taking struct {
	took bool
	dv   delivery
	st   StreamID
	from ring.NodeID
}

func bufferedOf(r *bufio.Reader) io.Reader {
	n := r.Buffered()
	b, _ := r.Peek(n)
	return bytesReader(append([]byte(nil), b...))
}

type bytesReaderT struct{ b []byte }

func bytesReader(b []byte) io.Reader { return &bytesReaderT{b} }

func (r *bytesReaderT) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

// errGoodbye ends a read loop on an orderly goodbye.
var errGoodbye = errors.New("troupe: peer said goodbye")

// handleLocked applies a received frame. For a data frame, chunk holds the
// (decompressed) chunk and p, if not nil, the envelope chunkTargetLocked
// prepared for it.
func (c *liveConn) handleLocked(f frame, d dataFrame, chunk []byte, now time.Time, p *partialEnv) error {
	s := c.s
	s.traffic.received[f.Stream%NumStreams].count(HeaderSize + int(f.Length))
	switch f.Type {
	case FrameData:
		return s.applyDataLocked(f.Header, d, chunk, now, p)
	case FrameCredit:
		cr, err := parseCredit(f.Header, f.Payload)
		if err != nil {
			return err
		}
		return s.applyCreditLocked(f.Stream, cr, now)
	case FrameAbort:
		id, err := parseUvarintPayload(f.Header, f.Payload)
		if err != nil {
			return err
		}
		if p := s.partial[f.Stream][id]; p != nil {
			s.reserved -= p.reserved
			delete(s.partial[f.Stream], id)
			s.t.bufs.put(p.buf)
		}
		return nil
	case FramePing:
		tok, err := parsePing(f.Header, f.Payload)
		if err != nil {
			return err
		}
		s.pongs = append(s.pongs, tok)
		s.pingedLocked()
		s.kick()
		return nil
	case FramePong:
		tok, err := parsePing(f.Header, f.Payload)
		if err != nil {
			return err
		}
		if tok == s.pingToken && !s.pingSent.IsZero() {
			s.sched.Estimator().OnRTT(now.Sub(s.pingSent), now)
			s.pingSent = time.Time{}
		}
		return nil
	case FrameGoodbye:
		g, err := parseGoodbye(f.Header, f.Payload)
		if err != nil {
			return err
		}
		if g.Code == goodbyeClose {
			return errGoodbye
		}
		return fmt.Errorf("troupe: peer closed the connection: code %d %s", g.Code, g.Detail)
	default:
		return frameErr(ErrMalformedFrame, f.Header, "unexpected after the handshake")
	}
}

// broken handles the end of a connection: unless fenced already, the
// session loses it and, after anything but a goodbye, redials.
func (c *liveConn) broken(err error) {
	s := c.s
	c.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != c.gen {
		return
	}
	s.gen++
	s.conn = nil
	s.downAt = time.Now()
	s.noteHeardLocked(c)
	s.kick()
	if s.t.isClosed() || s.closing {
		return
	}
	var fe *FrameError
	if errors.As(err, &fe) || errors.Is(err, ErrCreditOverrun) {
		s.t.log.Warn("troupe: wire: protocol error", "peer", s.id, "err", err)
	}
	if errors.Is(err, errGoodbye) {
		s.dropLocked(fmt.Errorf("%w: peer left", wire.ErrPeerDead))
		return
	}
	s.t.log.Debug("troupe: wire: connection broken", "peer", s.id, "err", err)
	if s.addr != "" {
		s.ensureDialLocked()
		return
	}
	// Nobody can dial a client: wait for it to dial again, for at most
	// the resume grace.
	gen := s.gen
	if s.grace != nil {
		s.grace.Stop()
	}
	s.grace = time.AfterFunc(resumeGrace(&s.t.cfg), func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.gen == gen && s.conn == nil && !s.closing {
			s.dropLocked(fmt.Errorf("%w: client gone for %v", wire.ErrPeerDead, resumeGrace(&s.t.cfg)))
		}
	})
}

func (c *liveConn) writeLoop() {
	s, t := c.s, c.s.t
	defer t.wg.Done()
	defer close(c.done)
	defer closeCodecs(c.enc)
	var frames []outFrame
	var buf []byte
	var vec [][]byte
	// Only a plain TCP socket writes a vector in one system call; TLS
	// and wrapped connections would write each piece separately.
	_, writev := c.hsConn.Conn.(*net.TCPConn)
	minBytes := compressMinBytes(t.cfg.Compression)
	mine := false     // the writer holds the turn (c.writing) for its last write
	var tally traffic // frames encoded since the session last counted them
	for {
		s.mu.Lock()
		s.traffic.add(&tally)
		tally = traffic{}
		if s.gen != c.gen {
			s.mu.Unlock()
			return
		}
		if mine {
			c.writing, mine = false, false
		}
		if tail := c.tail; tail != nil {
			// An inline write left these bytes, and the turn, to us:
			// no wait to be kicked out of any more.
			c.tail, c.writerWait, mine = nil, false, true
			s.mu.Unlock()
			if _, err := c.hsConn.Conn.Write(tail); err != nil {
				c.Close()
				return
			}
			continue
		}
		if c.writing {
			// A sender writes inline; it kicks us when done.
			c.writerWait = true
			s.mu.Unlock()
			select {
			case <-c.wake:
			case <-c.stop:
				return
			case <-t.ctx.Done():
			}
			continue
		}
		closing := s.closing
		var wait time.Duration
		now := time.Now()
		frames, wait = s.nextFramesLocked(now, frames[:0], writeBudget(s.notSentLowatLocked(now)))
		s.wakeAt = time.Time{}
		if len(frames) == 0 && wait > 0 {
			s.wakeAt = now.Add(wait)
		}
		lowat := s.notSentLowatLocked(now)
		if len(frames) > 0 {
			c.writing, mine = true, true
		}
		s.mu.Unlock()
		c.tuneLowat(lowat)

		if len(frames) > 0 {
			// Headers and small payloads are encoded into buf; chunks
			// of data frames are written from the caller's payload
			// without a copy (writev on TCP).
			buf = buf[:0]
			vec = vec[:0]
			c.zbuf = c.zbuf[:0] // the last write's chunks are out
			mark := 0
			for i := range frames {
				var chunk []byte
				at := len(buf)
				buf, chunk = c.encode(buf, &frames[i], minBytes)
				tally.sent[frames[i].stream%NumStreams].count(len(buf) - at + len(chunk))
				switch {
				case len(chunk) == 0:
				case !writev:
					buf = append(buf, chunk...)
				default:
					vec = append(vec, buf[mark:], chunk)
					mark = len(buf)
				}
			}
			if mark < len(buf) {
				vec = append(vec, buf[mark:])
			}
			if t.tune.wrote != nil {
				t.tune.wrote(countData(frames))
			}
			if err := c.writeVec(vec, writev); err != nil {
				c.Close() // the reader notices and handles the break
				return
			}
			clear(vec) // the chunks point into payloads and zbuf
			c.keepZbuf()
			if closing {
				c.Close()
				return
			}
			continue
		}
		var timer *time.Timer
		var fire <-chan time.Time
		if wait > 0 {
			timer = time.NewTimer(wait)
			fire = timer.C
		}
		select {
		case <-c.wake:
		case <-fire:
		case <-c.stop:
		case <-t.ctx.Done():
		}
		if timer != nil {
			timer.Stop()
		}
		select {
		case <-c.stop:
			return
		default:
		}
	}
}

// tuneLowat sets the socket's TCP_NOTSENT_LOWAT to n when it differs from
// the last value set by more than a half (the value follows a rate, and
// each change is a system call).
func (c *liveConn) tuneLowat(n int) {
	if n < 0 || (2*n >= c.lowat && 2*c.lowat >= n) {
		return
	}
	if err := setNotSentLowat(c.hsConn.Conn, n); err == nil {
		c.lowat = n
	}
}

// encode appends the frame to buf, except for the chunk of a data frame,
// which it returns to be written after buf.
func (c *liveConn) encode(buf []byte, f *outFrame, minBytes int) ([]byte, []byte) {
	var chunk []byte
	var flags Flags
	start := len(buf)
	buf = appendHeader(buf, Header{Version: ProtocolVersion, Type: f.typ, Stream: f.stream})
	switch f.typ {
	case FrameData:
		d := dataFrame{Envelope: f.data.env, Offset: uint64(f.data.offset), Total: uint64(f.data.total), Chunk: f.data.payload}
		if f.data.first {
			flags |= FlagFirst
		}
		if f.data.last {
			flags |= FlagLast
		}
		if c.enc != nil && len(d.Chunk) >= minBytes {
			at := len(c.zbuf)
			c.zbuf = c.enc.compress(c.zbuf, d.Chunk)
			if z := c.zbuf[at:]; len(z) < len(d.Chunk) {
				flags |= FlagCompressed
				d.RawLen = uint64(len(d.Chunk))
				d.Chunk = z[:len(z):len(z)]
			} else {
				c.zbuf = c.zbuf[:at]
			}
		}
		chunk = d.Chunk
		d.Chunk = nil
		buf = appendData(buf, flags, d)
	case FrameAbort:
		buf = binaryAppendUvarint(buf, f.data.env)
	case FrameCredit:
		buf = appendCredit(buf, f.cr)
	case FramePing, FramePong:
		buf = binaryAppendUint64(buf, f.u1)
	case FrameGoodbye:
		buf = appendGoodbye(buf, f.bye)
	}
	buf[start+2] = byte(flags)
	n := len(buf) - start - HeaderSize + len(chunk)
	buf[start+4], buf[start+5], buf[start+6], buf[start+7] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	return buf, chunk
}

// inlineMax is the largest envelope a sender writes inline; larger ones
// go through the writer, which writes chunks without copying them.
const inlineMax = 16 << 10

// inlineBudget bounds the data an inline write takes from the scheduler.
const inlineBudget = 32 << 10

// creditBudget bounds the data the goroutine that read a credit frame
// writes inline (applyCreditLocked): a grant frees GrantBytes of small
// envelopes, 32 KiB plus their frame headers, which should go in one
// write rather than leave a remnant for the writer to wake up for.
const creditBudget = 2 * inlineBudget

// writeInlineLocked writes what is due now, up to about budget bytes of
// data, on the calling goroutine (a sender, a sender waiting on a
// receipt, or the reader after a credit frame or a consumed envelope),
// sparing the hop to the writer goroutine and its wake-up: the frames are
// taken as the writer takes them and written with one non-blocking
// system call. The caller checked that the turn is free (c.writing
// unset) and c.raw set. What the socket does not take at once is left,
// with the turn, to the writer (c.tail); so is anything the budget or
// pacing left queued. s.mu is held on entry and on return and released
// meanwhile.
func (c *liveConn) writeInlineLocked(budget int) {
	s := c.s
	if s.closing || len(s.replay) > 0 {
		s.kick()
		return
	}
	frames, wait := s.nextFramesLocked(time.Now(), c.iframes[:0], budget)
	if len(frames) == 0 {
		if wait > 0 {
			// Paced: the writer arms its timer.
			s.kick()
		}
		// Otherwise the window or credit holds what is queued: the
		// credit that frees it kicks the writer (applyCreditLocked).
		return
	}
	c.writing = true
	s.mu.Unlock()
	minBytes := compressMinBytes(s.t.cfg.Compression)
	buf := c.ibuf[:0]
	c.zbuf = c.zbuf[:0] // the last write's chunks are out
	size := 0           // as the budget counts: uncompressed, with headers
	var tally traffic
	for i := range frames {
		if frames[i].typ == FrameData {
			size += len(frames[i].data.payload) + HeaderSize
		}
		at := len(buf)
		var chunk []byte
		buf, chunk = c.encode(buf, &frames[i], minBytes)
		buf = append(buf, chunk...)
		tally.sent[frames[i].stream%NumStreams].count(len(buf) - at)
	}
	if s.t.tune.wrote != nil {
		s.t.tune.wrote(countData(frames))
	}
	clear(frames) // they point into payloads
	c.iframes = frames[:0]
	n, err := c.writeNow(buf)
	s.mu.Lock()
	s.traffic.add(&tally)
	switch {
	case err != nil && err != syscall.EAGAIN:
		// The reader notices the break; the frames are in the resend
		// buffers for the resume.
		c.writing = false
		c.Close()
	case n < len(buf):
		c.tail = append([]byte(nil), buf[n:]...)
		s.kick()
	default:
		c.writing = false
		// What is still queued waits for the writer only if the budget
		// or pacing stopped us; held by the window or credit, it waits
		// for the credit, which kicks.
		more := s.queued.n > 0 && (wait > 0 || size >= budget)
		if c.writerWait || more || len(s.replay) > 0 || len(s.credits) > 0 || len(s.pongs) > 0 || s.pingWant || s.ackPing {
			c.writerWait = false
			s.kick()
		}
	}
	if cap(buf) <= 2*creditBudget {
		c.ibuf = buf[:0]
	}
	c.keepZbuf()
}

// countData counts the data frames of frames.
func countData(frames []outFrame) int {
	n := 0
	for i := range frames {
		if frames[i].typ == FrameData {
			n++
		}
	}
	return n
}

// keepZbuf drops zbuf after a write that grew it past what a steady
// stream needs, so that one burst of large messages does not pin it.
func (c *liveConn) keepZbuf() {
	if cap(c.zbuf) > zbufKeep {
		c.zbuf = nil
	}
}

// zbufKeep is the largest compression buffer a connection keeps between
// writes: a write budget's worth, with room for incompressible data.
const zbufKeep = 2 << 20

// writeNow writes b with one non-blocking system call and returns how
// much the socket took.
func (c *liveConn) writeNow(b []byte) (int, error) {
	c.rawBuf = b
	err := c.raw.Write(c.rawFn)
	c.rawBuf = nil
	if err != nil {
		return 0, err
	}
	return max(c.rawN, 0), c.rawErr
}

// writeVec writes the writer's frames. On plain TCP it makes its writev
// calls without the scheduler's system call bookkeeping, as the reader
// reads (rawRead): a writev of a large batch runs the loopback receive
// path too and lasts hundreds of microseconds, long enough for sysmon
// to take the writer's P and hand it to another thread (a futex wake,
// and a stop when the call returns), about once per MiB in bulk.
func (c *liveConn) writeVec(vec [][]byte, writev bool) error {
	if !writev || c.raw == nil {
		nb := net.Buffers(vec)
		_, err := nb.WriteTo(c.hsConn.Conn)
		return err
	}
	c.wvec, c.wvErr = vec, nil
	err := c.raw.Write(c.wvecFn)
	if err == nil {
		err = c.wvErr
	}
	c.wvec = nil
	if err != nil {
		return &net.OpError{Op: "writev", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
	}
	return nil
}

// writeVecRaw is the RawConn callback of writeVec: it writes until the
// vector is out, returning false (wait until writable) when the socket
// takes no more.
func (c *liveConn) writeVecRaw(fd uintptr) bool {
	for len(c.wvec) > 0 {
		if len(c.wvec[0]) == 0 {
			c.wvec = c.wvec[1:]
			continue
		}
		var n int
		var err error
		n, c.wiov, err = rawWritev(int(fd), c.wvec, c.wiov[:0])
		switch err {
		case nil:
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		default:
			c.wvErr = err
			return true
		}
		for n > 0 {
			k := min(n, len(c.wvec[0]))
			c.wvec[0] = c.wvec[0][k:]
			n -= k
			if len(c.wvec[0]) == 0 {
				c.wvec = c.wvec[1:]
			}
		}
	}
	return true
}

// writeRaw is the RawConn callback of writeNow: one attempt, never a wait
// for the socket to become writable.
func (c *liveConn) writeRaw(fd uintptr) bool {
	b := c.rawBuf
	if n := c.s.t.tune.shortInlineWrites; n > 0 && len(b) > n {
		b = b[:n]
	}
	for {
		n, err := rawWrite(int(fd), b)
		if err == syscall.EINTR {
			continue
		}
		c.rawN, c.rawErr = n, err
		return true
	}
}
