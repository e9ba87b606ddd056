package runtime

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/troupe-go/troupe/internal/codec"
	"github.com/troupe-go/troupe/internal/fault"
	"github.com/troupe-go/troupe/internal/host"
	"github.com/troupe-go/troupe/replication"
	"github.com/vmihailenco/msgpack/v5"
	"golang.org/x/crypto/blake2b"
)

// Idempotent asks.
//
// An ask made with WithIdempotencyKey to a kind that keeps its state
// carries the key to the key's owner. There the first ask with that key
// runs the handler, and its answer (the reply, the declared error, the
// failure, or that it gave none) is kept in the key's stored record with
// the hash of the request, written by the same commit as the state the
// handler changed: the answer leaves only once both met the write level
// (output commit), so an answer a caller saw is never lost with the
// state, and the record rides on the state's write rather than a write
// of its own. An ask with the same key and the same request (hash of its
// message's type and canonical encoding) gets the kept answer without the
// handler running, once the owner confirmed it still owns the key (a read
// barrier, which also waits for a write in flight that holds the answer);
// the same key with another request fails with ErrIdempotencyConflict.
// The router sends a keyed ask again when its owner dies before
// answering, as it does a ReadOnly one.
//
// A handler that defers its reply (Defer) leaves its answer kept as
// retainedDeferred, marked open (in memory: the deferredKept its Deferred
// shares) while this activation holds it: a retry meanwhile fails with
// ErrInProgress and does not run. When the reply is given (Resolve, or
// Fail: a declared error or a failure), its answer replaces that entry
// before the reply leaves, with no format of its own. Given while the cell
// handles a message (the usual case: a later message resolves it, or
// another goroutine does meanwhile), the entry is replaced under that
// message's gateMu and the record marked changed (recordChanged: not the
// Context's dirty, which the handler writes unlocked), and the reply
// waits for the message's commit, as holdReply holds one; the commit
// and the end of the hold happen under one gateMu, so a reply given
// after the commit is not released by it. Given while the cell handles
// none, a keptStep queued in its mailbox (forced past its bound) does
// the same as a message of its own whose handler does not run. A reply
// given after the cell left its table (passivated) or its system closed,
// or whose step finds the activation ended (a failed commit), leaves at
// once unkept; so does, in effect, one never given before its owner
// died: the entry an adopting owner loads is not open, and a retry gets
// ErrOutcomeUnknown.
//
// Each key's record keeps the answers of its last keyed asks (the record
// is written with every change of the state, mostly as a delta of the
// one before); past pageAbove of them (or pageAboveBytes) the commit
// moves the older ones into pages of their own beside it (pages.go), up
// to maxPages and maxPagedBytes, past which the oldest go first; the
// record itself holds at most maxRetainedHeld entries (pending requests
// and deferred replies still open, which no page takes, included). None
// is kept past the host's retention (replication.KeptAnswers.Retain,
// 24 h by default). Each
// member keeps at most its KeptAnswers' MaxAnswers and MaxBytes of them
// across its keys (by default 1,000,000 and 8 GiB, the bytes counted
// at every copy): its host's ledger (internal/host/kept.go) counts each
// key's answers, noted by the commits that write them and the loads
// that read them (noteKept), and past a bound asks the keys holding the
// oldest answers to drop those before a cutoff; one timer asks the keys
// whose oldest answer outlived the retention. A request is a pruneStep
// queued in the key's mailbox (activating the key if it is passivated,
// only where this member owns the key: see PruneKept), which drops them
// and writes the record as a keptStep does, without the handler
// running. Pending requests and deferred replies still open are never
// dropped by a bound, only by age. The ledger's entries are hints: a
// restarted member's ledger starts empty and counts a key once used, a
// key that moved is counted by its new owner once used there, and a
// retry whose answer was dropped runs its handler again.
//
// Strict durability (Spec.Strict, or the host's Strict for every durable
// kind) admits a message only once its key's write level is met for it,
// before the handler runs; otherwise the message is refused with
// ErrNotAdmitted and does not run. A keyed ask is admitted by writing
// its request to the record as pending (the request's hash, its attempt)
// at the level; its answer, kept when it ends, replaces the entry. A
// pending entry that a retry finds was left by an attempt that never
// completed (its owner died, or lost the key, mid-handler): the retry
// runs the handler again as the next attempt (Context.Attempt), and the
// older attempt cannot complete any more, since its owner's epoch is
// fenced by the acquisition that found the entry (it can no longer store
// its state or answer; outputs it sent before are not recalled). A
// pending entry stays until its request is answered, for the retention at
// most (then it is forgotten, as a kept answer is), whatever the other
// budgets; when maxPending would wait besides the request being
// admitted, the oldest of them (an orphan: nobody retried it) becomes
// lost, a kept answer whose retry gets ErrOutcomeUnknown. Any
// other message is admitted by a read barrier: a quorum at the level
// confirms that this node still owns the key.

// Retention of kept answers, per actor key (their retention is the
// host's: replication.KeptAnswers.Retain).
//
// The budgets are let go over by an eighth before the oldest answers are
// dropped, down to them: dropping the oldest changes the whole record
// (the answers after them move up), while adding one appends to it, a
// write that crosses to the replicas as a small delta (see
// replicanode's DeltaMin), so a key at its budget stays on deltas for
// most of its keyed asks instead of none.
const (
	maxRetained       = 128
	maxRetainedHeld   = maxRetained + maxRetained/8
	maxRetainedBytes  = 64 << 10
	maxRetainedGrowth = maxRetainedBytes / 8
	maxPending        = 32
)

// How a kept answer answers a retry.
const (
	retainedReply    byte = 1 // body: the encoded reply
	retainedDeclared byte = 2 // name, body, text: a declared error
	retainedFailed   byte = 3 // text: the handler failed (or panicked)
	retainedNoReply  byte = 4 // the handler returned without answering
	retainedDeferred byte = 5 // the handler deferred its reply, not kept yet (see deferredKept)
	retainedTooLarge byte = 6 // the answer was too large to keep (see maxRetainedBytes)
	retainedPending  byte = 7 // body: the attempt (uvarint), admitted and not answered yet (strict durability)
	retainedLost     byte = 8 // admitted, never answered, and no longer waited for: its outcome is unknown
)

// retained is the kept answer of one keyed ask.
type retained struct {
	key  string
	hash requestSum
	at   int64          // when it was kept, Unix nanoseconds (keptNow; a record stores milliseconds): no pointer for the collector to follow
	rid  host.RequestID // not its text: a made id is two numbers, nothing to follow
	kind byte
	body []byte
	name string // retainedDeclared
	text string // retainedDeclared, retainedFailed
	// attempt numbers a pending request's executions, from 1.
	attempt uint64
	// open is, for retainedDeferred, the deferred reply this activation
	// still holds (never stored): a retry meanwhile is in progress.
	open *deferredKept
	// enc is the entry as appendRetained last wrote it, which the next
	// records copy instead of encoding it again (a key keeps up to
	// maxRetainedHeld answers, and each keyed ask writes them all); nil
	// until then. Code that changes an entry in place sets it to nil.
	enc []byte
}

// pending reports whether r is a request admitted and not answered yet.
func (r retained) pending() bool { return r.kind == retainedPending }

// keyedAsk is the keyed ask a Context is handling, before its answer is
// kept.
type keyedAsk struct {
	key   string
	hash  requestSum
	reply []byte // the encoded reply, once Respond gave one
	err   error  // why the reply could not be encoded
	given bool   // Respond gave a reply
	// attempt is the execution this is of the request, from 1: more when
	// an earlier one was admitted and never answered (strict durability).
	attempt uint64
	// deferred is the reply the handler deferred, if it did (Defer).
	deferred *deferredKept
}

// deferredKept is the reply a handler deferred to a keyed ask, shared by
// its Deferred and the activation's kept answers: once given, its answer
// replaces the entry that says the reply was deferred (see
// cell.holdKept). Its fields after rid are written and read under the
// gateMu of the Context handling a message of the cell.
type deferredKept struct {
	key  string
	hash requestSum
	rid  host.RequestID
	// answer is the reply given, once given says so: the handler that
	// deferred it may still run, before its kept answer is made.
	answer retained
	given  bool
}

// deferReply makes kd's reply deferred: the Deferred keeps its answer
// through what this returns.
func (kd *keyedAsk) deferReply(rid host.RequestID) *deferredKept {
	if kd.deferred == nil {
		kd.deferred = &deferredKept{key: kd.key, hash: kd.hash, rid: rid}
	}
	return kd.deferred
}

// replied is the kept answer of dk's reply r: encoded as retainReply
// encodes one, or a failure when it does not encode.
func (dk *deferredKept) replied(r any) retained {
	a := retained{key: dk.key, hash: dk.hash, at: keptNow(), rid: dk.rid, kind: retainedReply}
	b := codec.GetBuffer()
	defer codec.PutBuffer(b)
	body, err := codec.AppendReply(b, r)
	if err != nil {
		a.kind, a.text = retainedFailed, fmt.Sprintf("encode reply %T: %v", r, err)
		return a
	}
	a.body = slices.Clone(body)
	b.SetBytes(body[:0])
	return a
}

// failed is the kept answer of dk's reply failed with err: the declared
// error when errs declares it (as keepAnswer keeps one), else a failure.
func (dk *deferredKept) failed(errs *codec.Errors, err error) retained {
	a := retained{key: dk.key, hash: dk.hash, at: keptNow(), rid: dk.rid, kind: retainedFailed, text: err.Error()}
	if errs.Declares(err) {
		if de, ok := errs.Encode(err); ok {
			a.kind, a.name, a.body, a.text = retainedDeclared, de.Name, de.Body, de.Text
		}
	}
	return a
}

// WithIdempotencyKey returns ctx naming key as the idempotency key of the
// asks made with it (or contexts derived from it), keeping the request id
// ctx names, if any. A key that is not 1 to host.MaxIdempotencyKey visible
// ASCII bytes makes those asks fail with ErrInvalidIdempotencyKey.
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	nr := inherit(ctx)
	nr.idem, nr.idemErr = key, nil
	if why := host.ValidIdempotencyKey(key); why != "" {
		nr.idemErr = fmt.Errorf("%w %q: %s", ErrInvalidIdempotencyKey, key, why)
	}
	return context.WithValue(ctx, requestIDKey{}, nr)
}

// WithTenant returns ctx naming tenant as the scope of the idempotency
// keys of the asks made with it (or contexts derived from it): the same
// key under two tenants names two requests. A tenant that is not 1 to
// host.MaxTenant visible ASCII bytes makes those keyed asks fail with
// ErrInvalidIdempotencyKey.
func WithTenant(ctx context.Context, tenant string) context.Context {
	nr := inherit(ctx)
	nr.tenant, nr.tenantErr = tenant, nil
	if why := host.ValidTenant(tenant); why != "" {
		nr.tenantErr = fmt.Errorf("%w: tenant %q: %s", ErrInvalidIdempotencyKey, tenant, why)
	}
	return context.WithValue(ctx, requestIDKey{}, nr)
}

// inherit returns a copy of what ctx names about its asks' requests: a
// caller's names, or a handler's request id (its asks carry the id of the
// ask it handles).
func inherit(ctx context.Context) *namedRequest {
	switch prev := ctx.Value(requestIDKey{}).(type) {
	case *namedRequest:
		nr := *prev
		return &nr
	case *host.RequestID:
		if prev != nil {
			return &namedRequest{id: *prev}
		}
	}
	return &namedRequest{}
}

// requestHash is the hash a kept answer is matched with: the message's
// registered name and its msgpack encoding, map keys sorted, of the
// message as the owner holds it after one trip through the codec. A
// message asked here and one that crossed members hash alike: the trip
// turns the values of fields typed any (int into the smallest integer
// that holds it, say) as the wire does, and another trip changes nothing.
func (c *cell[S, M, C]) requestHash(m M) (requestSum, error) {
	if any(m) == nil {
		return requestSum{}, fmt.Errorf("%w: a nil message", ErrInvalidRef)
	}
	k := c.k
	wire := codec.GetBuffer()
	defer codec.PutBuffer(wire)
	name, err := k.def.Codec.EncodeTo(wire, any(m))
	if err != nil {
		return requestSum{}, fmt.Errorf("hash the request %T: %w", m, err)
	}
	held, err := codec.DecodeMessage[M](k.def.Codec, k.h, name, wire.Bytes())
	if err != nil {
		return requestSum{}, fmt.Errorf("hash the request %T: %w", m, err)
	}
	buf := codec.GetBuffer()
	defer codec.PutBuffer(buf)
	buf.SetBytes(appendString(buf.Bytes()[:0], name))
	enc := msgpack.GetEncoder()
	defer msgpack.PutEncoder(enc)
	enc.Reset(buf.Writer())
	enc.SetSortMapKeys(true)
	if err := enc.Encode(any(held)); err != nil {
		return requestSum{}, fmt.Errorf("hash the request %T: %w", m, err)
	}
	sum := blake2b.Sum256(buf.Bytes())
	return requestSum(sum[:len(requestSum{})]), nil
}

// requestSum is the hash of a request that a kept answer is matched with:
// the first 16 bytes of its BLAKE2b-256 (formats 2 and 3 of a record kept
// all 32, of which a match reads these). Two different requests under
// one idempotency key match by chance with a probability of 2^-128, and
// making two that match takes about 2^64 hashes and only gets their
// sender, under its own key and scope, one answer for both.
type requestSum [16]byte

// keptNow is the time a kept answer is kept at: now, to the nanosecond,
// though a record stores milliseconds. The ledger orders a member's
// answers by it, and a bound drops a key's answers dated before a
// cutoff, its oldest at least: dated to the millisecond, the many kept
// in one would tie, and a key whose answers all fell in the oldest's
// millisecond lost them all, its newest too.
func keptNow() int64 { return time.Now().UnixNano() }

// lookupKeyed looks up the keyed ask e at a started durable activation.
// It returns the kept answer to give instead of running the handler (or
// the conflict), or nil with ctx.keyed set for the handler to run.
func (c *cell[S, M, C]) lookupKeyed(ctx *Context[S, M, C], e *envelope[M]) (*retained, error) {
	key := e.slot.idempotencyKey()
	sum, err := c.requestHash(e.msg)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	x := c.x
	c.mu.Unlock()
	if x != nil {
		// A deferred reply given on another goroutine may be replacing
		// its entry (holdKept).
		ctx.gateMu.Lock()
		defer ctx.gateMu.Unlock()
		if i := findKept(x.retained, key); i >= 0 {
			r := &x.retained[i]
			if err := refuseKept(r, &sum, c.k.def.Name, c.key); err != nil {
				return nil, err
			}
			if r.pending() {
				// Admitted and never answered: this runs it again.
				ctx.keyed = &keyedAsk{key: key, hash: sum, attempt: r.attempt + 1}
				return nil, nil
			}
			kept := *r // a copy: the entry may change once the lock is let go
			return &kept, nil
		}
		// A paged answer past the retention is gone, whether or not its
		// page was erased yet.
		if r := x.pages.find(key, time.Now().UnixNano()-int64(c.k.h.Kept.Retain)); r != nil {
			if err := refuseKept(r, &sum, c.k.def.Name, c.key); err != nil {
				return nil, err
			}
			kept := *r
			return &kept, nil
		}
	}
	ctx.keyed = &keyedAsk{key: key, hash: sum, attempt: 1}
	return nil, nil
}

// findKept returns the index in rs of the kept answer of idempotency key
// key, or -1. (Not generic, and the errors in refuseKept: the lookup runs
// on a cell's goroutine, whose stack it should not grow.)
func findKept(rs []retained, key string) int {
	for i := range rs {
		if rs[i].key == key {
			return i
		}
	}
	return -1
}

// refuseKept returns why a request of hash sum gets neither r, the kept
// answer of its idempotency key at def/key, nor a run of its handler: it
// is another request (ErrIdempotencyConflict), or the first request's
// reply is deferred and not given yet (ErrInProgress). It returns nil
// otherwise.
func refuseKept(r *retained, sum *requestSum, def, key string) error {
	if r.hash != *sum {
		return fmt.Errorf("%w: key %q was first used for another request to %s/%s (request %s)", ErrIdempotencyConflict, r.key, def, key, r.rid)
	}
	if r.kind == retainedDeferred && r.open != nil {
		return fmt.Errorf("%w: the first request with idempotency key %q to %s/%s (request %s) deferred its reply, not given yet", ErrInProgress, r.key, def, key, r.rid)
	}
	return nil
}

// strict reports whether the kind admits its messages under strict
// durability. The host's setting leaves out kinds written at One, whose
// copies promise no more than the owner's own (replication.One).
func (c *cell[S, M, C]) strict() bool {
	return c.durable() && (c.k.def.Strict || (c.k.h.Strict && (c.k.def.Replicas <= 1 || c.k.def.Level != replication.One)))
}

// admit admits the message ctx handles under strict durability, before
// its handler runs: a keyed ask's request is written to the record as
// pending at the write level, any other message waits for a read
// barrier (but the first of an activation, whose start confirmed the
// key: fresh). A message that cannot be admitted gets ErrNotAdmitted and
// does not run; a failed write or barrier also loses the activation (as
// any failed commit does), whose next message acquires the key again.
func (c *cell[S, M, C]) admit(ctx *Context[S, M, C], fresh bool) error {
	kd := ctx.keyed
	if kd == nil {
		if !fresh {
			ctx.confirmed = false // confirmed for this message, not an earlier one
		}
		if err := ctx.commit(true); err != nil {
			return fmt.Errorf("%w: %s/%s: %w", ErrNotAdmitted, c.k.def.Name, c.key, err)
		}
		return nil
	}
	c.mu.Lock()
	x := c.ext()
	c.mu.Unlock()
	ctx.gateMu.Lock()
	rs := withoutKey(x.retained, kd.key)
	loseOrphans(rs)
	r := retained{key: kd.key, hash: kd.hash, at: keptNow(), rid: *ctx.slot.requestID(), kind: retainedPending, attempt: kd.attempt}
	x.retained = pruneRetainedWithin(append(rs, r), time.Unix(0, r.at), c.k.h.Kept.Retain, pagingBudget)
	ctx.dirty = true
	err := ctx.commitLocked(false)
	ctx.gateMu.Unlock()
	if err != nil {
		return fmt.Errorf("%w: %s/%s: %w", ErrNotAdmitted, c.k.def.Name, c.key, err)
	}
	return nil
}

// loseOrphans gives up the oldest requests pending in rs beyond
// maxPending - 1 as lost. One message runs at a time: every pending
// request but the one being admitted is an orphan (its owner died or
// lost the key, and nobody retried yet).
func loseOrphans(rs []retained) {
	for {
		oldest, waiting := -1, 0
		for i, r := range rs {
			if r.pending() {
				waiting++
				if oldest < 0 || r.at < rs[oldest].at {
					oldest = i
				}
			}
		}
		if waiting < maxPending {
			return
		}
		rs[oldest].kind, rs[oldest].enc = retainedLost, nil
	}
}

// withoutKey returns rs without the entry of idempotency key key.
func withoutKey(rs []retained, key string) []retained {
	return slices.DeleteFunc(rs, func(r retained) bool { return r.key == key })
}

// retainReply keeps r, the reply Respond gives to a keyed ask, before
// the reply may leave: the commit that releases it (Respond's output
// gate, or the write it waits for) then writes the kept answer with the
// state.
func (c *Context[S, M, C]) retainReply(r any) {
	kd := c.keyed
	if kd == nil || kd.given {
		return
	}
	kd.given = true
	b := codec.GetBuffer()
	defer codec.PutBuffer(b)
	body, err := codec.AppendReply(b, r)
	if err != nil {
		kd.err = fmt.Errorf("encode reply %T: %w", r, err)
		return
	}
	rec := retained{key: kd.key, hash: kd.hash, at: keptNow(), rid: *c.slot.requestID(), kind: retainedReply, body: slices.Clone(body)}
	b.SetBytes(body[:0])
	c.cell.keep(c, rec)
	c.keyed = nil // kept: keepAnswer has nothing to add
}

// keepAnswer records the answer of the keyed ask ctx handled, whose
// handler returned err (panicked if it panicked) without a reply kept by
// Respond, in the activation's kept answers, for the message's commit to
// write: those answers (a declared error, a failure, no reply) leave only
// after that commit.
func (c *cell[S, M, C]) keepAnswer(ctx *Context[S, M, C], e *envelope[M], err error, panicked bool) {
	kd := ctx.keyed
	ctx.keyed = nil
	if kd == nil || ctx.startErr != nil || !c.started {
		return
	}
	r := retained{key: kd.key, hash: kd.hash, at: keptNow(), rid: *e.slot.requestID()}
	switch {
	case kd.given:
		r.kind, r.text = retainedFailed, kd.err.Error()
	case err != nil && !panicked && c.k.def.Errors.Declares(err):
		de, _ := c.k.def.Errors.Encode(err)
		r.kind, r.name, r.body, r.text = retainedDeclared, de.Name, de.Body, de.Text
	case err != nil:
		r.kind, r.text = retainedFailed, err.Error()
	case e.slot.settled():
		r.kind = retainedDeferred
	default:
		r.kind = retainedNoReply
	}
	r.open = kd.deferred
	c.keep(ctx, r)
}

// keep adds r to the activation's kept answers and marks the message's
// state dirty, so that its next commit writes them. An answer with a
// deferred reply is that reply's, when it was given already (while its
// handler ran: the reply waits for this message's commit, see
// holdKept); one still open says so, for a retry meanwhile.
func (c *cell[S, M, C]) keep(ctx *Context[S, M, C], r retained) {
	c.mu.Lock()
	x := c.ext()
	c.mu.Unlock()
	ctx.gateMu.Lock() // a commit of a goroutine the handler started may be encoding them
	if dk := r.open; dk != nil {
		switch {
		case dk.given:
			r = dk.answer
		case r.kind != retainedDeferred:
			r.open = nil // failed as the handler returned: no reply to come
		}
	}
	x.retained = pruneRetainedWithin(append(withoutKey(x.retained, r.key), r), time.Unix(0, r.at), c.k.h.Kept.Retain, pagingBudget)
	ctx.dirty = true
	ctx.gateMu.Unlock()
}

// holdKept implements replyHolder for r, the deferred reply of the keyed
// ask dk, whose answer is a: the answer is kept before the reply leaves.
// While the cell handles a message, a replaces the entry that says dk's
// reply was deferred (or waits in dk for the handler that deferred it,
// still running, to keep it) and r waits for the message's commit,
// which writes it. Otherwise a step queued in the cell's mailbox does
// the same (see keepGiven). It reports false when neither can be, the
// cell having left its table (passivated) or its system closed: r then
// leaves at once, its answer not kept.
func (c *cell[S, M, C]) holdKept(dk *deferredKept, a retained, r heldReply) bool {
	for {
		c.mu.Lock()
		var gate *sync.Mutex
		if x := c.x; x != nil && x.handling {
			gate = x.gate
		}
		c.mu.Unlock()
		if gate == nil {
			break
		}
		gate.Lock() // before c.mu, as a commit takes them
		held := c.keepGivenLocked(gate, dk, a, r)
		gate.Unlock()
		if held {
			return true
		}
		// That message ended meanwhile: look again.
	}
	var none M
	err, retry := c.push(context.Background(), none, &keptStep{dk: dk, answer: a, reply: r}, true, nil)
	return err == nil && !retry
}

// keepGivenLocked keeps a, the answer of dk's reply r, for the message
// that the Context whose gateMu is gate handles, and holds r for its
// commit; gate is held. It reports false when that message is no longer
// being handled.
func (c *cell[S, M, C]) keepGivenLocked(gate *sync.Mutex, dk *deferredKept, a retained, r heldReply) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	x := c.x
	if x == nil || !x.handling || x.gate != gate {
		return false
	}
	dk.answer, dk.given = a, true
	// Only this activation's entry: one loaded since says the reply of
	// an activation that no longer holds the key was deferred.
	if i := slices.IndexFunc(x.retained, func(e retained) bool { return e.open == dk }); i >= 0 {
		x.retained = pruneRetainedWithin(append(slices.Delete(x.retained, i, i+1), a), time.Unix(0, a.at), c.k.h.Kept.Retain, pagingBudget)
		x.recordChanged = true
	}
	x.held = append(x.held, r)
	return true
}

// keptStep is a deferred reply of a keyed ask given while its cell
// handled no message: queued in the cell's mailbox, in an envelope's slot
// as a tracedTell is, it makes the cell keep the answer and write it
// before the reply leaves (keepGiven). Its handler does not run.
type keptStep struct {
	dk     *deferredKept
	answer retained
	reply  heldReply
}

// keepGiven runs st on the cell's goroutine, as a message of its own:
// its answer replaces the entry that says the reply was deferred, and
// the reply leaves once the commit that writes it met the write level
// (or fails with that commit's error). An activation that ended since
// (a commit of it failed, say) holds no key to write to: the reply
// leaves at once, its answer not kept.
func (c *cell[S, M, C]) keepGiven(ctx *Context[S, M, C], st *keptStep) {
	if !c.started {
		st.reply.answer()
		return
	}
	c.handling(ctx)
	ctx.gateMu.Lock()
	c.keepGivenLocked(&ctx.gateMu, st.dk, st.answer, st.reply)
	ctx.gateMu.Unlock()
	var e envelope[M]
	c.settle(ctx, &e, nil)
}

func (t *keptStep) trace() *host.Trace                              { return nil }
func (t *keptStep) begin() bool                                     { return true }
func (t *keptStep) fail(err error)                                  { t.reply.fail(err) }
func (t *keptStep) settled() bool                                   { return true }
func (t *keptStep) stopped(parent context.Context) context.Context  { return parent }
func (t *keptStep) stoppedIfMade() context.Context                  { return nil }
func (t *keptStep) finished() bool                                  { return true }
func (t *keptStep) cancelled() bool                                 { return false }
func (t *keptStep) deadline() (time.Time, bool)                     { return time.Time{}, false }
func (t *keptStep) abort(err error)                                 { t.reply.fail(err) }
func (t *keptStep) setDeferred()                                    {}
func (t *keptStep) asking() []string                                { return nil }
func (t *keptStep) requestID() *host.RequestID                      { return new(host.RequestID) }
func (t *keptStep) sentTo(*host.Host, *codec.Errors) host.Replier   { return nil }
func (t *keptStep) setWithdraw(host.Withdrawer)                     {}
func (t *keptStep) idempotencyKey() string                          { return "" }
func (t *keptStep) replay(*host.Host, *codec.Errors, []byte, error) {}

// setRetained makes kept and pages, as loaded, the activation's kept
// answers.
func (c *cell[S, M, C]) setRetained(ctx *Context[S, M, C], kept []retained, pages *keptPages) {
	c.mu.Lock()
	x := c.x
	if x == nil && (len(kept) > 0 || pages != nil) {
		x = c.ext()
	}
	c.mu.Unlock()
	if x == nil {
		return
	}
	ctx.gateMu.Lock()
	x.keptLoaded = len(kept)
	x.retained = pruneRetainedWithin(kept, time.Now(), c.k.h.Kept.Retain, pagingBudget)
	c.loadPages(x, pages)
	c.noteKept()
	ctx.gateMu.Unlock()
}

// pruneRetained drops the kept answers older than retainFor (the host's
// retention) at now (or dated after it by more than that: a clock that
// went back, or a record from elsewhere), then the oldest once there are
// more than maxRetainedHeld, down to maxRetained. The newest answer stays
// whatever its size, but its body is dropped when it and the pending
// requests take more than maxRetainedBytes (a retry gets
// ErrOutcomeUnknown rather than a record too large to store); then, once
// they all take more than maxRetainedBytes + maxRetainedGrowth, the
// oldest answers go, down to maxRetainedBytes. Pending requests are
// dropped only past retainFor (admit bounds their number) and count
// toward the budgets first.
func pruneRetained(rs []retained, now time.Time, retainFor time.Duration) []retained {
	return pruneRetainedWithin(rs, now, retainFor, recordBudget)
}

// keptBudget is what a list of kept answers may hold before its oldest
// answers go: held answers, then down to keep; growth bytes over bytes,
// then down to bytes.
type keptBudget struct {
	held, keep    int
	bytes, growth int
}

// recordBudget is the budget of the answers a record holds;
// pagingBudget that of an activation's list between its commits, which
// move the oldest to pages (see pageOut) before the list reaches the
// record's budget: the latter only stops a list that pages cannot take
// (deferred replies still open) from growing without end.
var (
	recordBudget = keptBudget{held: maxRetainedHeld, keep: maxRetained, bytes: maxRetainedBytes, growth: maxRetainedGrowth}
	pagingBudget = keptBudget{held: 4 * maxRetainedHeld, keep: 4 * maxRetained, bytes: 4 * maxRetainedBytes, growth: 4 * maxRetainedGrowth}
)

// pruneRetainedWithin is pruneRetained with budget b: the newest
// answer's body is dropped past maxRetainedBytes whatever b.
func pruneRetainedWithin(rs []retained, now time.Time, retainFor time.Duration, b keptBudget) []retained {
	t := now.UnixNano()
	lo, hi := t-int64(retainFor), t+int64(retainFor)
	// Most calls add one answer to a list within every budget: a pass
	// that allocates nothing tells so, and the list stays as it is.
	if len(rs) <= b.held {
		total, waiting, answered, ok := 0, 0, false, true
		for i := range rs {
			r := &rs[i]
			if r.at < lo || r.at > hi || (answered && r.pending()) {
				ok = false
				break
			}
			answered = answered || !r.pending()
			if !answered {
				waiting += r.size()
			}
			total += r.size()
		}
		if ok && total <= b.bytes+b.growth && (!answered || waiting+rs[len(rs)-1].size() <= maxRetainedBytes) {
			return rs
		}
	}
	var pending []retained
	kept := 0
	for i := range rs {
		r := &rs[i]
		switch {
		case r.at < lo || r.at > hi:
			// Too old (a pending request this old is forgotten too).
		case r.pending():
			pending = append(pending, *r)
		default:
			rs[kept] = *r
			kept++
		}
	}
	clear(rs[kept:])
	rs = rs[:kept]
	if len(rs)+len(pending) > b.held {
		rs = slices.Delete(rs, 0, min(len(rs)+len(pending)-b.keep, len(rs)))
	}
	waiting := 0
	for i := range pending {
		waiting += pending[i].size()
	}
	if len(rs) > 0 && waiting+rs[len(rs)-1].size() > maxRetainedBytes {
		last := &rs[len(rs)-1]
		last.kind, last.body, last.name, last.text, last.enc = retainedTooLarge, nil, "", "", nil
	}
	total := waiting
	for i := range rs {
		total += rs[i].size()
	}
	if total > b.bytes+b.growth {
		drop := 0
		for drop < len(rs)-1 && total > b.bytes {
			total -= rs[drop].size()
			drop++
		}
		rs = slices.Delete(rs, 0, drop)
	}
	if len(pending) == 0 {
		return rs
	}
	return append(pending, rs...)
}

// size is about the bytes r takes in a record.
func (r *retained) size() int {
	rid := len(r.rid.Name())
	if _, _, made := r.rid.Made(); made {
		rid = 16
	}
	return len(r.key) + len(r.hash) + rid + len(r.body) + len(r.name) + len(r.text) + 16
}

// answerKept answers s with the kept answer r.
func (c *cell[S, M, C]) answerKept(s replier, r *retained) {
	switch r.kind {
	case retainedReply:
		s.replay(c.k.h, c.k.def.Errors, r.body, nil)
	case retainedDeclared:
		s.replay(c.k.h, c.k.def.Errors, nil, &fault.DeclaredError{Name: r.name, Body: r.body, Text: r.text})
	case retainedFailed:
		fe := c.k.failure(c.key, errors.New(r.text), false)
		fe.RequestID = s.requestID().String()
		s.fail(fe)
	case retainedNoReply:
		s.fail(ErrNoReply)
	case retainedTooLarge:
		s.fail(fault.OutcomeUnknown("the answer to the first request with idempotency key %q was too large to keep", r.key))
	case retainedLost:
		s.fail(fault.OutcomeUnknown("the first request with idempotency key %q was admitted and never answered (its member died or lost the key mid-handler), and is no longer tracked", r.key))
	default:
		s.fail(fault.OutcomeUnknown("the first request with idempotency key %q deferred its reply, whose answer was not kept: its member died, or lost or left the key, before giving it", r.key))
	}
}

// appendRetained appends the kept answers rs to a record of format 4
// (recordVersionCompact) or 5 (recordVersionHeld), which hold them
// alike. Each is its idempotency key, its request's sum (16 bytes), when
// it was kept (varint, Unix milliseconds), its request id (uvarint: 0
// none, 1 made and its 16 bytes, else a named id's length plus one and
// its text), its kind, a byte saying which of body (1), name (2) and
// text (4) follow, and those (a pending request's body is its attempt, a
// uvarint). The oldest comes first, so a new answer is appended.
func appendRetained(b []byte, rs []retained) []byte {
	b = slices.Grow(b, retainedLen(rs)) // once, not as the answers are appended
	b = binary.AppendUvarint(b, uint64(len(rs)))
	for i := range rs {
		r := &rs[i]
		if r.enc != nil {
			b = append(b, r.enc...)
			continue
		}
		start := len(b)
		b = appendAnswer(b, r)
		r.enc = slices.Clone(b[start:])
	}
	return b
}

// appendAnswer appends r as appendRetained writes it.
func appendAnswer(b []byte, r *retained) []byte {
	b = appendString(b, r.key)
	b = append(b, r.hash[:]...)
	b = binary.AppendVarint(b, r.at/int64(time.Millisecond))
	switch hi, lo, made := r.rid.Made(); {
	case made:
		b = append(b, 1)
		b = binary.BigEndian.AppendUint64(b, hi)
		b = binary.BigEndian.AppendUint64(b, lo)
	case r.rid.IsZero():
		b = append(b, 0)
	default:
		b = binary.AppendUvarint(b, uint64(len(r.rid.Name()))+1)
		b = append(b, r.rid.Name()...)
	}
	body := r.body
	if r.pending() {
		body = binary.AppendUvarint(nil, r.attempt)
	}
	var has byte
	if len(body) > 0 {
		has |= keptBody
	}
	if r.name != "" {
		has |= keptName
	}
	if r.text != "" {
		has |= keptText
	}
	b = append(b, r.kind, has)
	if has&keptBody != 0 {
		b = binary.AppendUvarint(b, uint64(len(body)))
		b = append(b, body...)
	}
	if has&keptName != 0 {
		b = appendString(b, r.name)
	}
	if has&keptText != 0 {
		b = appendString(b, r.text)
	}
	return b
}

// Which of a kept answer's fields a record of format 4 or 5 holds.
const (
	keptBody byte = 1 << iota
	keptName
	keptText
)

// retainedLen is at least the bytes appendRetained appends for rs.
func retainedLen(rs []retained) int {
	n := binary.MaxVarintLen64
	for i := range rs {
		if rs[i].enc != nil {
			n += len(rs[i].enc)
			continue
		}
		n += rs[i].size() + 5*binary.MaxVarintLen64 // size, and the lengths and time
	}
	return n
}

// retained reads the kept answers of a record of format f (2 to 5).
func (r *recordReader) retained(f byte) []retained {
	n := r.uvarint()
	most := uint64(maxRetained)
	if f >= recordVersionHeld {
		most = maxRetainedHeld
	}
	if r.err != nil || n > most {
		if r.err == nil {
			r.err = fmt.Errorf("%w: %d kept answers, at most %d", errRecord, n, most)
		}
		return nil
	}
	rs := make([]retained, 0, n)
	for range n {
		var x retained
		r.answer(f, &x)
		if r.err != nil {
			return nil
		}
		rs = append(rs, x)
	}
	return rs
}

// answer reads one kept answer of a record of format f and returns when
// it was kept; into x unless x is nil (RecordWakeDue reads the time only).
func (r *recordReader) answer(f byte, x *retained) (at int64) {
	key := r.bytes()
	var hash, rid, body, name, text []byte
	var made, kind []byte
	named := false // format 4 says a named id is one (older ones showed it)
	if f < recordVersionCompact {
		hash = r.fixed(32)
		at = r.varint()
		rid = r.bytes()
		kind = r.fixed(1)
		body = r.bytes()
		name = r.bytes()
		text = r.bytes()
	} else {
		hash = r.fixed(len(requestSum{}))
		ms := r.varint()
		if r.err == nil && (ms > math.MaxInt64/int64(time.Millisecond) || ms < math.MinInt64/int64(time.Millisecond)) {
			r.err = fmt.Errorf("%w: a kept answer's time out of range", errRecord)
		}
		at = ms * int64(time.Millisecond)
		switch tag := r.uvarint(); {
		case tag == 1:
			made = r.fixed(16)
		case tag > 1:
			rid = r.fixed(int(min(tag-1, uint64(len(r.b)+1))))
			named = true
		}
		kind = r.fixed(1)
		has := r.fixed(1)
		if r.err == nil && has[0]&^(keptBody|keptName|keptText) != 0 {
			r.err = fmt.Errorf("%w: a kept answer's fields %#x", errRecord, has[0])
		}
		if r.err == nil && has[0]&keptBody != 0 {
			body = r.bytes()
		}
		if r.err == nil && has[0]&keptName != 0 {
			name = r.bytes()
		}
		if r.err == nil && has[0]&keptText != 0 {
			text = r.bytes()
		}
		if r.err == nil && (has[0]&keptBody != 0 && len(body) == 0 || has[0]&keptName != 0 && len(name) == 0 || has[0]&keptText != 0 && len(text) == 0) {
			r.err = fmt.Errorf("%w: a kept answer's empty field marked present", errRecord) // one encoding per answer
		}
	}
	if r.err != nil {
		return 0
	}
	last := retainedLost
	if f == recordVersionKept {
		last = retainedTooLarge // format 2 holds no pending request
	}
	if kind[0] < retainedReply || kind[0] > last {
		r.err = fmt.Errorf("%w: kept answer of kind %d", errRecord, kind[0])
		return 0
	}
	var attempt uint64
	if kind[0] == retainedPending {
		n, used := binary.Uvarint(body)
		if used <= 0 || used != len(body) || n == 0 {
			r.err = fmt.Errorf("%w: a pending request's attempt", errRecord)
			return 0
		}
		attempt, body = n, nil
	}
	if made != nil {
		hi, lo := binary.BigEndian.Uint64(made[:8]), binary.BigEndian.Uint64(made[8:])
		if hi == 0 && lo == 0 {
			r.err = fmt.Errorf("%w: a made request id of zeros", errRecord)
			return 0
		}
		if x != nil {
			x.rid = host.MadeRequestID(hi, lo)
		}
	} else if x != nil && named {
		x.rid = host.NamedRequestID(string(rid))
	} else if x != nil {
		x.rid = host.ShownRequestID(rid) // "": none
	}
	if x != nil {
		x.key = string(key)
		copy(x.hash[:], hash) // formats 2 and 3 kept all 32 bytes of the sum
		x.at = at
		x.kind = kind[0]
		x.body = slices.Clone(body)
		x.name = string(name)
		x.text = string(text)
		x.attempt = attempt
	}
	return at
}

// retainedBody is a kept reply, already encoded, on its way to an asker
// on another member (see remoteAsk.outcome).
type retainedBody []byte

// replay answers s with a kept answer: the encoded reply body, or err (a
// declared error as it crosses members). An ask from another member gets
// them as they are; a local asker decodes them as a reply from another
// member would be.
func (s *slot[R]) replay(h *host.Host, errs *codec.Errors, body []byte, err error) {
	if _, remote := any(s.onDone).(*remoteAsk); remote {
		var v R
		if err == nil {
			v = any(retainedBody(body)).(R)
		}
		s.complete(v, err)
		return
	}
	if s.rh == nil {
		s.rh, s.errs = h, errs
	}
	s.Reply(body, err)
}

// noteKept tells the host's ledger of kept answers what the activation
// keeps, after a commit wrote it or a load read it: the answers that
// are not pending (nor deferred and still open), their bytes at every
// copy of the record, and the oldest one's time. The caller holds the
// Context's gateMu. A key that never kept any is not noted.
func (c *cell[S, M, C]) noteKept() {
	c.mu.Lock()
	x := c.x
	c.mu.Unlock()
	if x == nil {
		return
	}
	answers, bytes, oldest := 0, int64(0), int64(0)
	for i := range x.retained {
		r := &x.retained[i]
		if r.pending() || r.open != nil {
			continue
		}
		if answers == 0 || r.at < oldest {
			oldest = r.at
		}
		answers++
		bytes += int64(r.size())
	}
	if p := x.pages; p != nil {
		for _, pg := range p.list {
			if len(pg.answers) > 0 && (answers == 0 || pg.answers[0].at < oldest) {
				oldest = pg.answers[0].at // oldest first
			}
		}
		answers += p.answers
		bytes += int64(p.bytes)
	}
	if answers == 0 && !x.keptNoted {
		return
	}
	x.keptNoted = answers > 0
	c.k.h.NoteKept(c.k.def.Name, c.key, answers, bytes*int64(c.k.copies()), oldest)
}

// forgetKept tells the host's ledger that the key keeps no answers: its
// record was deleted.
func (c *cell[S, M, C]) forgetKept() {
	c.mu.Lock()
	x := c.x
	c.mu.Unlock()
	if x != nil && x.keptNoted {
		x.keptNoted = false
		c.k.h.NoteKept(c.k.def.Name, c.key, 0, 0, 0)
	}
}

// copies is how many copies of a key's record the stores hold: its
// replicas in a cluster, one otherwise.
func (k *kind[S, M, C]) copies() int {
	if k.rem == nil || k.def.Pinned || k.def.Replicas < 1 {
		return 1
	}
	return k.def.Replicas
}

// PruneKept implements host.KeptPruner: a step queued in key's cell,
// activating the key if it is passivated, drops its answers dated
// before before and those past their retention (see pruneKept). Only
// for a key this member owns now: one that moved is counted by its new
// owner once used there, and the ledger's hint must not take it back.
func (k *kind[S, M, C]) PruneKept(key string, before int64) {
	if !k.def.Durable || k.h.Store == nil || k.h.Closed() {
		return
	}
	if k.rem != nil {
		if here, err := k.rt.Here(key, k.token(key)); err != nil || !here {
			return
		}
	}
	var none M
	if err := k.push(context.Background(), key, 0, none, &pruneStep{before: before}, true, nil); err != nil && !errors.Is(err, ErrSystemClosed) {
		k.h.Logger.Warn("troupe: kept answers not pruned; they go when the key is next used past their retention, or by a later bound", "actor", k.def.Name, "key", key, "err", err)
	}
}

// pruneStep is the host's ledger asking a cell to drop its kept answers
// dated before before (Unix nanoseconds), and those past their
// retention: queued in the cell's mailbox as a keptStep is, it writes
// the record at the kind's level without the handler running. Pending
// requests are never dropped by it but past their retention.
type pruneStep struct{ before int64 }

// pruneKept runs st on the cell's goroutine, as a message of its own.
// A key that cannot be activated (its store is unreachable, say) is
// left as it is: the ledger counts it again when it is next used.
func (c *cell[S, M, C]) pruneKept(ctx *Context[S, M, C], st *pruneStep) {
	loaded := !c.started
	if loaded {
		// The key may have moved since the ledger's check (PruneKept):
		// activating it here would acquire it from its new owner.
		if k := c.k; k.rem != nil {
			if here, err := k.rt.Here(c.key, k.token(c.key)); err != nil || !here {
				return
			}
		}
		if err := c.activate(ctx); err != nil {
			ctx.unreached = false
			c.k.h.Logger.Warn("troupe: kept answers not pruned: the key could not be activated; they go when it is next used past their retention, or by a later bound",
				"actor", c.k.def.Name, "key", c.key, "err", err)
			return
		}
	}
	c.handling(ctx)
	ctx.gateMu.Lock()
	c.mu.Lock()
	x := c.ext()
	c.mu.Unlock()
	n := len(x.retained)
	if loaded {
		// A load prunes what outlived its retention without writing:
		// the step writes that too. A key whose record holds no answer
		// (deleted since the ledger counted it) is not written: a
		// record written now would bring it back.
		n = x.keptLoaded
	}
	now := time.Now()
	x.retained = pruneRetainedWithin(dropKeptBefore(x.retained, st.before), now, c.k.h.Kept.Retain, pagingBudget)
	paged := x.pages.dropBefore(st.before)
	changed := len(x.retained) != n || paged || c.pagesDue(x)
	if changed {
		c.mu.Lock()
		x.recordChanged = true
		c.mu.Unlock()
	} else {
		c.noteKept() // no commit to note it: the ledger counts it again
	}
	ctx.gateMu.Unlock()
	var e envelope[M]
	c.settle(ctx, &e, nil)
}

// dropKeptBefore drops from rs the answers dated before before, but
// pending requests and deferred replies still open (neither has an
// answer yet).
func dropKeptBefore(rs []retained, before int64) []retained {
	return slices.DeleteFunc(rs, func(r retained) bool { return r.at < before && !r.pending() && r.open == nil })
}

func (t *pruneStep) trace() *host.Trace                              { return nil }
func (t *pruneStep) begin() bool                                     { return true }
func (t *pruneStep) fail(error)                                      {}
func (t *pruneStep) settled() bool                                   { return true }
func (t *pruneStep) stopped(parent context.Context) context.Context  { return parent }
func (t *pruneStep) stoppedIfMade() context.Context                  { return nil }
func (t *pruneStep) finished() bool                                  { return true }
func (t *pruneStep) cancelled() bool                                 { return false }
func (t *pruneStep) deadline() (time.Time, bool)                     { return time.Time{}, false }
func (t *pruneStep) abort(error)                                     {}
func (t *pruneStep) setDeferred()                                    {}
func (t *pruneStep) asking() []string                                { return nil }
func (t *pruneStep) requestID() *host.RequestID                      { return new(host.RequestID) }
func (t *pruneStep) sentTo(*host.Host, *codec.Errors) host.Replier   { return nil }
func (t *pruneStep) setWithdraw(host.Withdrawer)                     {}
func (t *pruneStep) idempotencyKey() string                          { return "" }
func (t *pruneStep) replay(*host.Host, *codec.Errors, []byte, error) {}

// KeptIn returns how many kept answers, and how many requests pending,
// the stored record rec holds, with the answers it says its pages hold:
// for tests of their bounds, which read the store.
func KeptIn(h *host.Host, rec []byte) (answers, pending int, err error) {
	_, _, kept, paged, err := decodeRecordPaged[any](h, rec)
	answers = int(paged.answers)
	for _, r := range kept {
		if r.pending() {
			pending++
		} else {
			answers++
		}
	}
	return answers, pending, err
}
