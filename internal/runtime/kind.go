package runtime

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/troupe-go/troupe/internal/codec"
	"github.com/troupe-go/troupe/internal/host"
)

const shardCount = 64 // locate takes the top 6 bits of a key's hash

// kind is the runtime of one definition inside one system: the table of
// its live activations, sharded by key.
type kind[S, M, C any] struct {
	def  *Spec[S, M, C]
	h    *host.Host
	rem  host.Remote // nil in an embedded system
	rt   host.Route  // rem's route of this kind
	seed maphash.Seed
	idle time.Duration
	ask  time.Duration
	bmin time.Duration
	bmax time.Duration
	// lastSweep is touched only by the host's clock goroutine.
	lastSweep time.Time
	// moving holds activations of keys now served by another member,
	// which end as soon as they are idle.
	movingMu sync.Mutex
	moving   []*cell[S, M, C]
	movingN  atomic.Int32 // len(moving), for Sweep to look without the lock
	shards   [shardCount]shard[S, M, C]
	// bound is def's mailbox bound, for cell.tell to read without
	// following def.
	bound int
	// segments holds emptied mailbox segments (*[]envelope[M], cleared)
	// for long mailboxes to reuse: a sender that stays ahead of the
	// goroutine would otherwise allocate one per segSize messages. It
	// comes after the shards, which keep the alignment they had without
	// it (placed before them it cost ping-pong and ask about a quarter
	// more CPU).
	segments sync.Pool
	// cold holds loop states (*loopState[S, M, C]) for cold starts to reuse
	// (see coldState).
	cold sync.Pool
	// asks ends the waits of asks at the ask timeout.
	asks askWaits
	// tgt is what this kind's refs point to.
	tgt target[M]
	// sent counts the tells that succeed as they are sent, in a host
	// that serves no keys (a client): no actor here takes them (see
	// host.TypeMeter). Nil elsewhere, or without metrics.
	sent *host.TypeMeter
}

type shard[S, M, C any] struct {
	mu sync.Mutex // serialises writers of t
	t  cellTable[S, M, C]
	_  [40]byte // pad to 64 bytes: neighbouring shards' locks on separate cache lines
}

// NewKind creates the runtime of d inside h, when a system registers
// the definition (or a client takes its first ref).
func NewKind[S, M, C any](h *host.Host, d *Spec[S, M, C]) host.Kind {
	k := &kind[S, M, C]{def: d, h: h, rem: h.Remote, seed: maphash.MakeSeed(),
		idle: d.Idle, ask: d.AskTimeout, bmin: d.BackoffMin, bmax: d.BackoffMax, bound: d.Mailbox}
	if h.IdleTimeout != 0 && !d.IdleSet { // negative: never
		k.idle = h.IdleTimeout
	}
	if h.AskTimeout > 0 && !d.AskSet {
		k.ask = h.AskTimeout
	}
	if h.BackoffMin > 0 && !d.BackoffSet {
		k.bmin = h.BackoffMin
	}
	if h.BackoffMax > 0 && !d.BackoffSet {
		k.bmax = h.BackoffMax
	}
	if k.rem != nil {
		k.rt = k.rem.Route(k)
	}
	k.tgt = target[M]{sink: k, typ: d.Name, clustered: k.rem != nil, stores: h.Store != nil, keeps: d.Durable}
	if h.Meter != nil {
		k.tgt.met = h.Meter(d.Name)
		if h.RemoteOnly {
			k.sent = k.tgt.met
		}
	}
	return k
}

// ref returns the bound ref of key.
func (k *kind[S, M, C]) ref(key string) Ref[M] {
	if k.rem != nil {
		return Ref[M]{to: &k.tgt, key: key, w: k.token(key)}
	}
	return Ref[M]{to: &k.tgt, key: key, w: k.hash(key)}
}

// token is key's ring token; 0 in an embedded system.
func (k *kind[S, M, C]) token(key string) uint64 {
	if k.rem == nil {
		return 0
	}
	return k.rem.Token(k.def.Name, key)
}

// Pinned implements host.RemoteKind.
func (k *kind[S, M, C]) Pinned() bool { return k.def.Pinned }

// Replicas implements host.RemoteKind.
func (k *kind[S, M, C]) Replicas() int { return k.def.Replicas }

func (k *kind[S, M, C]) Name() string              { return k.def.Name }
func (k *kind[S, M, C]) askTimeout() time.Duration { return k.ask }
func (k *kind[S, M, C]) waits() *askWaits          { return &k.asks }
func (k *kind[S, M, C]) host() *host.Host          { return k.h }
func (k *kind[S, M, C]) declares(err error) bool   { return k.def.Errors.Declares(err) }

// hash is key's hash in this kind's table: the top bits pick the shard,
// the low bits the slot inside the shard's table. Refs keep it, so a send
// does not hash the key again.
func (k *kind[S, M, C]) hash(key string) uint64 { return fixHash(maphash.String(k.seed, key)) }

// locate returns key's hash and shard.
func (k *kind[S, M, C]) locate(key string) (uint64, *shard[S, M, C]) {
	h := k.hash(key)
	return h, &k.shards[h>>58]
}

// newSegment returns an empty mailbox segment.
func (k *kind[S, M, C]) newSegment() []envelope[M] {
	if p, ok := k.segments.Get().(*[]envelope[M]); ok {
		return (*p)[:0]
	}
	return make([]envelope[M], 0, segSize)
}

// recycle keeps a dropped mailbox buffer of segment size for another
// mailbox; it must hold no messages (handled batches are cleared).
func (k *kind[S, M, C]) recycle(b []envelope[M]) {
	if cap(b) == segSize {
		b = b[:0]
		k.segments.Put(&b)
	}
}

// cellAt returns the live cell of key, whose hash is h, creating it; the
// cell keeps a copy of key unless own says the string is the program's.
func (k *kind[S, M, C]) cellAt(h uint64, key string, own bool) *cell[S, M, C] {
	if c := k.shards[h>>58].t.get(h, key); c != nil { // lock-free; a miss looks again under the lock
		return c
	}
	return k.cellLocked(h, key, own)
}

// cellLocked is cellAt after a lock-free miss.
func (k *kind[S, M, C]) cellLocked(h uint64, key string, own bool) *cell[S, M, C] {
	sh := &k.shards[h>>58]
	sh.mu.Lock()
	c := sh.t.get(h, key)
	if c == nil {
		// The key may alias a network buffer (a remote message): the
		// cell keeps its own copy. A ref's key it shares, so that the
		// key compare of a lookup through that ref is a pointer compare.
		if !own {
			key = strings.Clone(key)
		}
		c = &cell[S, M, C]{k: k, key: key}
		sh.t.put(h, c)
		k.h.Active.Add(1)
		k.h.Activated.Add(1)
	}
	sh.mu.Unlock()
	return c
}

func (k *kind[S, M, C]) deliver(ctx context.Context, key string, h, tok uint64, m M, s replier, tr *host.Trace) error {
	if k.rem != nil {
		if key == "" {
			return ErrInvalidRef
		}
		if k.h.Closed() {
			return ErrSystemClosed
		}
		if tok == 0 {
			tok = k.token(key)
		}
		if s == nil && tr == nil && !k.def.Codec.Concrete() {
			// A tell whose type encodes by its plan alone is encoded
			// straight into the batch that carries it, and placed with one
			// look at the ring. (Only for an interface M: boxing a
			// concrete one would cost the tells that stay here.)
			a := any(m)
			if tn := k.def.Codec.Appender(a); tn != nil {
				here, err := k.rt.TellOrHere(ctx, key, tok, tn.Name(), tn, a)
				if err != nil || !here {
					return err // sent: the batch it went into measured it
				}
				if err := k.fits(m); err != nil {
					return err
				}
				return k.tellHere(ctx, key, h, m)
			}
		}
		here, err := k.rt.Here(key, tok)
		if err != nil {
			return err
		}
		if !here {
			return k.send(ctx, key, tok, m, s, tr)
		}
		if err := k.fits(m); err != nil {
			return err
		}
	}
	if s == nil && tr == nil {
		return k.tellHere(ctx, key, h, m)
	}
	return k.pushKey(ctx, key, h, true, m, s, false, tr)
}

// tell implements sink.tell: w is key's hash here, its token in a
// cluster (where a tell delivered here hashes the key again: the ref's
// hash would make the call a word too long for registers).
func (k *kind[S, M, C]) tell(ctx context.Context, key string, w uint64, m M) error {
	if k.rem == nil {
		h := w
		// The common case inline: the key's cell in the first slot it may
		// occupy (a pointer to a per-key anchor in the ref would spare
		// little more than this probe), then cell.tell's fast case.
		if p := k.shards[h>>58].t.slots.Load(); p != nil && h != 0 {
			slots := *p
			s := &slots[h&uint64(len(slots)-1)]
			if s.hash.Load() == h {
				if c := s.c.Load(); c != nil && sameKey(c.key, key) {
					if err, retry := c.tell(ctx, m); !retry {
						return err
					}
				}
			}
		}
		return k.tellHere(ctx, key, h, m)
	}
	err := k.deliver(ctx, key, 0, w, m, nil, nil)
	if err == nil && k.sent != nil {
		k.sent.Tells[host.OutcomeOK].Add(1)
	}
	return err
}

// tellHere queues the tell m for key, whose hash is h (0 if unknown), in
// this system.
func (k *kind[S, M, C]) tellHere(ctx context.Context, key string, h uint64, m M) error {
	if h == 0 || key == "" {
		return k.pushKey(ctx, key, h, true, m, nil, false, nil)
	}
	// pushKey's loop, with the first lookup shared with the busy-cell
	// case: a miss (a new activation) goes straight to the locked lookup.
	c := k.shards[h>>58].t.get(h, key)
	for {
		if c == nil {
			if k.h.Closed() {
				return ErrSystemClosed
			}
			c = k.cellLocked(h, key, true)
		}
		err, retry := c.tell(ctx, m)
		if !retry {
			return err
		}
		runtime.Gosched() // a passivated cell is leaving its place; let it
		c = k.shards[h>>58].t.get(h, key)
	}
}

// fits checks, in a clustered system, that m to a key served here
// encodes within the message limit (and encodes at all), so that a
// message meets the same limit wherever its key lives.
func (k *kind[S, M, C]) fits(m M) error {
	limit := k.h.MaxMessage
	if limit <= 0 {
		return nil
	}
	if k.def.Codec.ConcreteWithin(limit) {
		return nil
	}
	if ok, err := k.def.Codec.Within(any(m), limit); ok || err != nil {
		return err
	}
	buf := codec.GetBuffer()
	defer codec.PutBuffer(buf)
	if _, err := k.def.Codec.EncodeTo(buf, any(m)); err != nil {
		return err
	}
	return tooLarge(m, len(buf.Bytes()), limit)
}

// tooLarge reports a message of n bytes over limit (0: none).
func tooLarge(m any, n, limit int) error {
	if limit > 0 && n > limit {
		return fmt.Errorf("%w: %T of %d bytes, limit %d", ErrMessageTooLarge, m, n, limit)
	}
	return nil
}

// send carries m, with its trace context tr (nil: none), to the member
// that serves key.
func (k *kind[S, M, C]) send(ctx context.Context, key string, tok uint64, m M, s replier, tr *host.Trace) error {
	a := any(m) // boxed once: boxing a concrete M allocates
	if s == nil {
		// A tell whose type encodes by its plan alone is encoded straight
		// into the batch that carries it.
		if tn := k.def.Codec.Appender(a); tn != nil {
			return k.rt.Tell(ctx, host.Outbound{Type: k.def.Name, Key: key, Token: tok, Name: tn.Name(), Enc: tn, Msg: a, Trace: tr})
		}
	}
	buf := codec.GetBuffer()
	defer codec.PutBuffer(buf)
	name, err := k.def.Codec.EncodeTo(buf, a)
	if err != nil {
		return err
	}
	if err := tooLarge(a, len(buf.Bytes()), k.h.MaxMessage); err != nil {
		return err
	}
	out := host.Outbound{Type: k.def.Name, Key: key, Token: tok, Name: name, Body: buf.Bytes(), Trace: tr}
	if s == nil {
		return k.rt.Tell(ctx, out)
	}
	relieveInline(ctx) // the reply may come through the goroutine asking
	out.Deadline, _ = s.deadline()
	out.Chain = s.asking()
	out.RequestID = *s.requestID()
	out.IdempotencyKey = s.idempotencyKey()
	_, out.ReadOnly = a.(interface{ ReadOnly() }) // actor.ReadOnly
	cancel, err := k.rem.Ask(ctx, out, s.sentTo(k.h, k.def.Errors))
	if err != nil {
		return err
	}
	s.setWithdraw(cancel)
	return nil
}

// holdKey marks the context of a push that waits for room whatever the
// overflow policy: a tell from another node.
type holdKey struct{}

// tellRemote queues a tell that another node sent. A remote sender
// cannot be told that the mailbox is full, and a tell must not be lost:
// on a full mailbox it holds the stream until there is room, whatever
// the overflow policy. Its credit stops the sender's node from sending
// more on it.
// TODO(backpressure): refuse per key rather than hold the stream.
func (k *kind[S, M, C]) tellRemote(key string, m M, tr *host.Trace) error {
	err := k.push(noWait, key, 0, m, nil, false, tr)
	if errors.Is(err, ErrMailboxFull) {
		err = k.hold(key, m, tr)
	}
	return err
}

// DeliverRemote implements host.RemoteKind: it queues a message that
// another node sent, without waiting for mailbox room (a full mailbox
// refuses it), and answers asks through in.Reply.
func (k *kind[S, M, C]) DeliverRemote(in host.Inbound) (host.Withdrawer, error) {
	if in.Key == "" {
		return nil, ErrInvalidRef
	}
	m, err := codec.DecodeMessage[M](k.def.Codec, k.h, in.Name, in.Body)
	if err != nil {
		return nil, err
	}
	if in.Reply == nil {
		return nil, k.tellRemote(in.Key, m, in.Trace)
	}
	s := k.remoteSlot(in)
	if err := k.push(noWait, in.Key, 0, m, s, false, in.Trace); err != nil {
		return nil, err
	}
	return s, nil
}

// remoteSlot returns the reply slot of an ask from another node: it
// encodes the outcome and hands it to in.Reply.
func (k *kind[S, M, C]) remoteSlot(in host.Inbound) *slot[any] {
	a := &remoteAsk{reply: in.Reply, k: k.failer(), key: in.Key}
	a.s.dl, a.s.chain, a.s.rid, a.s.opt = in.Deadline, in.Chain, in.RequestID, withOptions(in.IdempotencyKey, in.Trace)
	a.s.onDone = a
	return &a.s
}

// remoteAsk is the slot of an ask from another node with what its reply
// needs, in one allocation.
type remoteAsk struct {
	s     slot[any]
	reply host.Replier
	k     failer
	key   string
}

// failer is what a remote ask's reply needs of its kind, untyped.
type failer interface {
	failure(key string, err error, panicked bool) *FailedError
	declared() *codec.Errors
	maxMessage() int
}

func (k *kind[S, M, C]) failer() failer          { return k }
func (k *kind[S, M, C]) declared() *codec.Errors { return k.def.Errors }
func (k *kind[S, M, C]) maxMessage() int         { return k.h.MaxMessage }

func (a *remoteAsk) outcome(v any, err error) {
	if b, ok := v.(retainedBody); ok && err == nil {
		// A kept reply, encoded already, maybe by a first ask from this
		// member: the limit of replies to other members holds for it too.
		if limit := a.k.maxMessage(); limit > 0 && len(b) > limit {
			a.reply.Reply(nil, fmt.Errorf("%w: kept reply of %d bytes, limit %d", ErrMessageTooLarge, len(b), limit))
			return
		}
		a.reply.Reply(b, nil)
		return
	}
	if err != nil {
		var fe *FailedError
		if !errors.As(err, &fe) {
			if de, ok := a.k.declared().Encode(err); ok {
				err = de
			}
		}
		a.reply.Reply(nil, err)
		return
	}
	// reply copies the body before it returns (into the outbox's batch,
	// or decoding it for a local asker): the buffer is reused.
	b := codec.GetBuffer()
	body, eerr := codec.AppendReply(b, v)
	if eerr != nil {
		codec.PutBuffer(b)
		a.reply.Reply(nil, a.k.failure(a.key, fmt.Errorf("encode reply %T: %w", v, eerr), false))
		return
	}
	if limit := a.k.maxMessage(); limit > 0 && len(body) > limit {
		codec.PutBuffer(b)
		a.reply.Reply(nil, fmt.Errorf("%w: reply %T of %d bytes, limit %d", ErrMessageTooLarge, v, len(body), limit))
		return
	}
	a.reply.Reply(body, nil)
	b.SetBytes(body[:0])
	codec.PutBuffer(b)
}

// hold queues a tell from another node into a full mailbox: it waits for
// room until the system stops hard.
func (k *kind[S, M, C]) hold(key string, m M, tr *host.Trace) error {
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), holdKey{}, true))
	defer cancel()
	go func() {
		select {
		case <-k.h.HardStop():
			cancel()
		case <-ctx.Done():
		}
	}()
	return k.push(ctx, key, 0, m, nil, false, tr)
}

// DeliverTells implements host.RemoteKind: DeliverRemote for a run of
// tells, decoded with one decoder. Consecutive tells to one key are
// queued together, under one lock of their cell.
func (k *kind[S, M, C]) DeliverTells(b host.TellBatch) {
	d := codec.GetDecoder(k.h)
	defer codec.PutDecoder(d)
	var run tellsToKey[S, M, C]
	for i := range b.Len() {
		key, name, body := b.Tell(i)
		if key == "" {
			b.Dropped(i, ErrInvalidRef)
			continue
		}
		m, err := codec.DecodeWith[M](d, k.def.Codec, name, body)
		if err != nil {
			b.Dropped(i, err)
			continue
		}
		if run.n > 0 && (run.key != key || run.n == len(run.msgs)) {
			k.queueTells(&run, b)
		}
		if run.n == 0 {
			run.key = key
		}
		run.msgs[run.n], run.idx[run.n] = m, i
		run.n++
	}
	if run.n > 0 {
		k.queueTells(&run, b)
	}
}

// tellsToKey is a run of decoded tells to one key, waiting to be queued.
type tellsToKey[S, M, C any] struct {
	key  string
	c    *cell[S, M, C] // key's cell, when found for an earlier run
	n    int
	msgs [64]M
	idx  [64]int // their indexes in the batch, to report drops
}

// queueTells queues the run's tells and empties it: at once those the
// mailbox has room for, then the others one by one as DeliverRemote
// does, holding the stream while the mailbox is full.
func (k *kind[S, M, C]) queueTells(run *tellsToKey[S, M, C], b host.TellBatch) {
	msgs := run.msgs[:run.n]
	for len(msgs) > 0 {
		if run.c == nil || run.c.key != run.key {
			if k.h.Closed() {
				break
			}
			run.c = k.cellAt(k.hash(run.key), run.key, false)
		}
		n, retry, err := run.c.pushTells(msgs)
		if err != nil {
			break
		}
		msgs = msgs[n:]
		if retry { // passivated meanwhile: look the key up again
			run.c = nil
			continue
		}
		if n == 0 {
			break // full
		}
	}
	for j := run.n - len(msgs); j < run.n; j++ {
		if err := k.tellRemote(run.key, run.msgs[j], nil); err != nil {
			b.Dropped(run.idx[j], err)
		}
	}
	clear(run.msgs[:run.n])
	run.n = 0
}

// pushTells queues tells from another node, as many as the mailbox bound
// lets in, under one lock; it returns how many. retry means the cell was
// passivated meanwhile and the caller must look the key up again.
func (c *cell[S, M, C]) pushTells(ms []M) (n int, retry bool, err error) {
	k := c.k
	c.mu.Lock()
	if c.gone {
		c.mu.Unlock()
		return 0, true, nil
	}
	if k.h.Closed() {
		c.mu.Unlock()
		return 0, false, ErrSystemClosed
	}
	for _, m := range ms {
		if bound := k.def.Mailbox; c.inLen()+int(c.batchLen) >= bound && c.queuedLocked() >= bound {
			break
		}
		c.put(envelope[M]{msg: m}) // segments and hasIn as a push
		n++
	}
	if n == 0 {
		c.mu.Unlock()
		return 0, false, nil
	}
	// As push does: start a goroutine, or wake the parked one.
	start, wake := c.claimLocked()
	c.mu.Unlock()
	if start {
		k.h.Enter()
		go c.loop()
	} else if wake != nil {
		nudge(wake)
	}
	return n, false, nil
}

// deliverAnswer queues a piped answer whatever the mailbox bound: the
// actor asked for it, and the goroutine delivering it must not block.
// It carries tr, the trace context of the message whose handler piped.
func (k *kind[S, M, C]) deliverAnswer(key string, m M, tr *host.Trace) error {
	return k.push(context.Background(), key, 0, m, nil, true, tr)
}

// push queues m, with its trace context tr (nil: none), for key; h is
// key's hash, or 0 to compute it. key may alias a network buffer.
func (k *kind[S, M, C]) push(ctx context.Context, key string, h uint64, m M, s replier, force bool, tr *host.Trace) error {
	return k.pushKey(ctx, key, h, false, m, s, force, tr)
}

// pushKey is push; own says key is the program's string (a bound ref's),
// which a new cell may share.
func (k *kind[S, M, C]) pushKey(ctx context.Context, key string, h uint64, own bool, m M, s replier, force bool, tr *host.Trace) error {
	if key == "" {
		return ErrInvalidRef
	}
	for {
		if k.h.Closed() {
			return ErrSystemClosed
		}
		if h == 0 {
			h = k.hash(key)
		}
		c := k.cellAt(h, key, own)
		err, retry := c.push(ctx, m, s, force, tr)
		if !retry {
			return err
		}
		runtime.Gosched() // a passivated cell is leaving its place; let it
	}
}

// forget removes c from the table if it is still passivatable (idle since
// before idleBefore; now stamps a cell idle at an unread time, see
// passivatable); the caller must not hold c.mu.
func (k *kind[S, M, C]) forget(c *cell[S, M, C], reason string, idleBefore, now time.Time) bool {
	h, sh := k.locate(c.key)
	sh.mu.Lock()
	c.mu.Lock()
	ok := c.passivatable(idleBefore, now)
	wasStarted := c.started
	if idleBefore.IsZero() && wasStarted {
		// A release, overtaken: between the released goroutine's exit and
		// this call, a new message activated the cell again. Keep it.
		ok = false
	}
	if ok {
		c.gone = true
		c.stopTimersLocked() // a durable key's stored ones: its owner wakes it when due
		if !wasStarted {
			sh.t.remove(h, c)
		}
	}
	c.mu.Unlock()
	sh.mu.Unlock()
	if !ok {
		return false
	}
	k.h.Active.Add(-1)
	if wasStarted && c.durable() {
		k.h.Store.Resign(k.def.Name, c.key)
	}
	if wasStarted {
		// Report the end while the gone cell still holds the key's place,
		// so the next activation of the key cannot start (and be reported)
		// before this end is: senders wait for the place to clear.
		k.h.Emit(host.Event{Kind: host.ActivationEnded, Type: k.def.Name, Key: c.key, Reason: reason})
		sh.mu.Lock()
		sh.t.remove(h, c)
		sh.mu.Unlock()
	}
	return true
}

// each calls f for every live cell, outside the shard locks.
func (k *kind[S, M, C]) each(f func(*cell[S, M, C])) {
	var batch []*cell[S, M, C]
	for i := range k.shards {
		sh := &k.shards[i]
		sh.mu.Lock()
		batch = batch[:0]
		sh.t.each(func(c *cell[S, M, C]) { batch = append(batch, c) })
		sh.mu.Unlock()
		for _, c := range batch {
			f(c)
		}
	}
}

// Moved implements host.Mover: activations of keys that here no longer
// accepts stop their timers and body, finish what is queued, and end.
// Their next message activates the key on its new owner: from the
// initial state, or for a durable kind from what its replicas hold.
func (k *kind[S, M, C]) Moved(here func(key string) bool) {
	k.each(func(c *cell[S, M, C]) {
		if here(c.key) {
			return
		}
		c.mu.Lock()
		c.haltTimersLocked()
		c.stopRunLocked()
		c.mu.Unlock()
		if !k.forget(c, "moved", time.Now().Add(time.Hour), time.Now()) {
			k.movingMu.Lock()
			k.moving = append(k.moving, c)
			k.movingN.Store(int32(len(k.moving)))
			k.movingMu.Unlock()
		}
	})
}

// endMoved ends the moved activations that became idle.
func (k *kind[S, M, C]) endMoved() {
	k.movingMu.Lock()
	defer k.movingMu.Unlock()
	live := k.moving[:0]
	for _, c := range k.moving {
		c.mu.Lock()
		gone := c.gone
		c.mu.Unlock()
		if !gone && !k.forget(c, "moved", time.Now().Add(time.Hour), time.Now()) {
			live = append(live, c)
		}
	}
	clear(k.moving[len(live):])
	k.moving = live
	k.movingN.Store(int32(len(live)))
}

// neverSweep is how often a kind whose keys never passivate looks for
// released keys to drop from its table.
const neverSweep = time.Minute

// Sweep passivates cells idle for the idle timeout (a negative one:
// never, see actor.Never).
func (k *kind[S, M, C]) Sweep(now time.Time) {
	if k.movingN.Load() > 0 {
		k.endMoved()
	}
	never := k.idle < 0 // keys never passivate; released ones still leave the table
	if never {
		if now.Sub(k.lastSweep) < neverSweep {
			return
		}
	} else if now.Sub(k.lastSweep) < k.idle/4 {
		return
	}
	k.lastSweep = now
	before := now.Add(-k.idle)
	if never {
		before = now.Add(-neverSweep)
	}
	k.each(func(c *cell[S, M, C]) {
		c.mu.Lock()
		ok := c.passivatable(before, now) && (!never || !c.started)
		c.mu.Unlock()
		if ok {
			k.forget(c, "idle", before, now)
		}
	})
}

// Deepest reports the longest mailbox.
func (k *kind[S, M, C]) Deepest() int {
	deepest := 0
	k.each(func(c *cell[S, M, C]) {
		if n := c.queued(); n > deepest {
			deepest = n
		}
	})
	return deepest
}

// QueuedKeys returns the keys with messages waiting, at most limit.
func (k *kind[S, M, C]) QueuedKeys(limit int) []string {
	var keys []string
	k.each(func(c *cell[S, M, C]) {
		if len(keys) < limit && c.queued() > 0 {
			keys = append(keys, c.key)
		}
	})
	return keys
}

// Active implements host.Mover: whether key has an activation here, live
// or ending after a move.
func (k *kind[S, M, C]) Active(key string) bool {
	h := k.hash(key)
	if k.shards[h>>58].t.get(h, key) != nil {
		return true
	}
	if k.movingN.Load() == 0 {
		return false
	}
	k.movingMu.Lock()
	defer k.movingMu.Unlock()
	for _, c := range k.moving {
		if c.key == key {
			return true
		}
	}
	return false
}

// Activations implements host.Kind: the keys in this kind's
// table, summed shard by shard from the count each table keeps anyway, so
// that nothing is added to the message path.
func (k *kind[S, M, C]) Activations() int {
	total := 0
	for i := range k.shards {
		sh := &k.shards[i]
		sh.mu.Lock()
		total += sh.t.n
		sh.mu.Unlock()
	}
	return total
}

// Queued reports the messages waiting in all mailboxes.
func (k *kind[S, M, C]) Queued() int {
	total := 0
	k.each(func(c *cell[S, M, C]) { total += c.queued() })
	return total
}

// Stop stops timers and bodies; queued work drains.
func (k *kind[S, M, C]) Stop() {
	k.each(func(c *cell[S, M, C]) { c.stop() })
}

// Abort cancels running handlers and fails queued messages.
func (k *kind[S, M, C]) Abort() {
	k.each(func(c *cell[S, M, C]) { c.abort() })
}
