package remote

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/troupe-go/troupe/internal/host"
)

// Envelope kinds on the application stream.
const (
	kindTell    uint8 = 1 // a message, no reply
	kindAsk     uint8 = 2 // a request; a reply with the same id answers it
	kindCancel  uint8 = 3 // the asker stopped waiting for request id
	kindReply   uint8 = 4 // the outcome of request id
	kindSync    uint8 = 5 // a client asks for the member list and for pushes
	kindMembers uint8 = 6 // the member list (answer to sync, or pushed)
	// kindTellNext is a tell in a batch right after another tell: it
	// takes the type (and, flagged, the key, token and message name) of
	// that one, so a stream of tells sends little more than bodies. It
	// decodes as a kindTell.
	kindTellNext uint8 = 7
	kindDrain    uint8 = 8 // a new owner asks the previous one to answer id once typ/key has no activation there
	kindDrained  uint8 = 9 // the answer to drain id: typ/key is not active on the sender
	// kindRetired says, on lane id, that the leaving sender answered every
	// ask of the receiver it accepted (the answers went before it on that
	// lane) and runs no more: see Router.Retire.
	kindRetired uint8 = 10
	// Member lists with versions (see sync.go): kindSyncSince is a
	// client's sync naming the digest of the list it last had from the
	// receiver ("" for none); kindMembersV is the member list with the
	// sender's placement version, the answer to it or a push;
	// kindVersion is the sender's placement version and list digest
	// without the list: the answer to a sync whose digest is the
	// sender's, or (id 0) a notice to a client that sent here for a key
	// this member does not own.
	kindSyncSince uint8 = 11
	kindMembersV  uint8 = 12
	kindVersion   uint8 = 13

	// traced, on the kind byte of a tell or an ask (kinds 1 and 2), says
	// that a trace context follows the kind's fields: a traceparent and
	// a tracestate, as strings. A message without one is encoded as if
	// tracing did not exist.
	traced uint8 = 0x80
)

// Flags of a kindTellNext.
const (
	nextSameKey  = 1 << 0 // key and token as the previous tell
	nextSameName = 1 << 1 // message name as the previous tell
)

// tellHead is what the next tell of a batch may take from the envelope
// before it: set when that one was a tell.
type tellHead struct {
	ok        bool
	typ, name string
	key       string
	token     uint64
}

// set records e as the envelope before the next one. It writes only the
// fields that change: a pointer written to the heap costs a write barrier
// while the garbage collector marks, and in a stream they mostly do not.
// An ask's strings are kept too, for the decoder to reuse (see
// decoder.stringAs), but only a tell can be continued.
func (h *tellHead) set(e *envelope) {
	h.ok = e.kind == kindTell
	if !h.ok && e.kind != kindAsk {
		return
	}
	if h.typ != e.typ {
		h.typ = e.typ
	}
	if h.name != e.name {
		h.name = e.name
	}
	if h.key != e.key {
		h.key = e.key
	}
	h.token = e.token
}

// envelopeVersion is the first byte of every envelope; a node refuses
// envelopes of a version it does not know. 2 added the reply codes of
// declared errors, too-large messages and panics (a declared error's
// reply carries its name and body), which a node of version 1 would
// misread. 3 added an ask's request id, after its chain; 4 an ask's
// idempotency key (empty for none), after its request id. Optional
// additions since take a kind of their own (kindTellNext) or a flag on
// the kind byte (traced), so that an envelope without them is as it was
// and only a node that does not know them drops them, as an unknown kind.
const envelopeVersion = 4

// Forms of an ask's request id on the wire (see appendRequestID).
const (
	ridNone  uint8 = 0 // no id
	ridMade  uint8 = 1 // made by a host: 8 bytes of prefix, 8 of count
	ridNamed uint8 = 2 // named by the caller: a string
)

// ErrMalformed reports an envelope that cannot be decoded.
var ErrMalformed = errors.New("troupe: malformed application envelope")

// envelope is one application-stream message. Its encoding is a version
// byte, a kind byte, then the fields the kind uses, in this order:
// uvarint numbers and length-prefixed strings and bytes. It is written by
// hand, not with msgpack, because every remote message pays for it; the
// user's message body inside is msgpack.
type envelope struct {
	kind  uint8
	id    uint64 // request id, chosen by the asker (ask, cancel, reply, sync)
	token uint64 // ring token of typ/key (tell, ask)
	typ   string
	key   string
	name  string // registered message type name
	body  []byte // msgpack: the message, the reply, or the member list
	ttl   int64  // nanoseconds the asker still waits (ask)
	hops  uint8  // forwards already taken (tell)
	chain []string
	rid   host.RequestID // the ask's request id (ask)
	idem  string         // the ask's idempotency key, "" for none (ask)
	trace *host.Trace    // the message's trace context, nil for none (tell, ask)
	err   *wireError     // reply
	// version is the sender's placement version (members, version), and
	// digest the digest of a member list (sync since, version): opaque
	// tokens, compared for equality only.
	version string
	digest  string
	// encoded is the length of the body appendBody last encoded from a
	// message (not from body): the size the message limit is about.
	encoded int
}

// appendBody appends e's body with its length: e.body, or, when enc is
// set, m as enc encodes it (a tell encoded straight into its batch). The
// encoder travels beside the envelope, not in it: a pointer stored in an
// envelope would make the compiler allocate the envelope's pointees.
func (e *envelope) appendBody(b []byte, enc host.MessageAppender, m any) []byte {
	if enc == nil {
		return appendBytes(b, e.body)
	}
	start := len(b)
	b = append(b, 0) // room for a one-byte length: most bodies are short
	b = enc.AppendMessage(b, m)
	e.encoded = len(b) - start - 1
	return putLength(b, start)
}

// wireError is an error crossing nodes: a code callers can test with
// errors.Is once decoded, and text for humans.
type wireError struct {
	code  uint8
	msg   string
	actor string     // the failed actor (codeFailed)
	hint  string     // the owner the replier believes in (codeNotOwner)
	chain []string   // codeCycle
	cause *wireError // codeFailed: the handler's error, when it has a code
	name  string     // codeDeclared: the declared error's name
	body  []byte     // codeDeclared: its msgpack value (types only)
}

// maxCauseDepth bounds nested causes, so a hostile envelope cannot
// recurse deeply.
const maxCauseDepth = 8

func appendWireError(b []byte, w *wireError, depth int) []byte {
	b = append(b, w.code)
	b = appendString(b, w.msg)
	b = appendString(b, w.actor)
	b = appendString(b, w.hint)
	b = appendStrings(b, w.chain)
	if w.code == codeDeclared {
		b = appendString(b, w.name)
		b = appendBytes(b, w.body)
	}
	if w.cause == nil || depth >= maxCauseDepth {
		return append(b, 0)
	}
	return appendWireError(b, w.cause, depth+1)
}

func (d *decoder) wireError(code uint8, depth int) *wireError {
	w := &wireError{code: code}
	w.msg = d.string("message")
	w.actor = d.string("actor")
	w.hint = d.string("hint")
	w.chain = d.strings("chain")
	if code == codeDeclared {
		w.name = d.string("error name")
		w.body = d.bytes("error body")
	}
	if c := d.byte("cause"); c != 0 && d.err == nil {
		if depth >= maxCauseDepth {
			d.fail("causes nested too deeply")
			return w
		}
		w.cause = d.wireError(c, depth+1)
	}
	return w
}

func (e *envelope) encode() []byte {
	n := 2 + 10 + 10 + len(e.typ) + len(e.key) + len(e.name) + len(e.body) + 40
	for _, c := range e.chain {
		n += len(c) + 2
	}
	if e.trace != nil {
		n += len(e.trace.Parent) + len(e.trace.State) + 4
	}
	n += len(e.version) + len(e.digest)
	return e.appendTo(make([]byte, 0, n))
}

// appendNextBody appends e's encoding to a batch whose previous envelope
// prev describes (nil: none): as a kindTellNext when e is a tell that
// can be. It updates prev to e. e's body is given as for appendBody.
func (e *envelope) appendNextBody(b []byte, prev *tellHead, enc host.MessageAppender, m any) []byte {
	if prev == nil {
		return e.appendToBody(b, enc, m)
	}
	if !prev.ok || e.kind != kindTell || e.typ != prev.typ || e.id != 0 || e.ttl != 0 || len(e.chain) > 0 || e.trace != nil {
		prev.set(e)
		return e.appendToBody(b, enc, m)
	}
	var flags uint8
	if e.key == prev.key && e.token == prev.token {
		flags |= nextSameKey
	}
	if e.name == prev.name {
		flags |= nextSameName
	}
	b = append(b, envelopeVersion, kindTellNext, flags)
	if flags&nextSameKey == 0 {
		b = binary.BigEndian.AppendUint64(b, e.token)
		b = appendString(b, e.key)
	}
	if flags&nextSameName == 0 {
		b = appendString(b, e.name)
	}
	b = e.appendBody(b, enc, m)
	b = append(b, e.hops)
	prev.set(e)
	return b
}

// appendTo appends e's encoding to b.
func (e *envelope) appendTo(b []byte) []byte { return e.appendToBody(b, nil, nil) }

// appendToBody is appendTo with e's body given as for appendBody.
func (e *envelope) appendToBody(b []byte, enc host.MessageAppender, m any) []byte {
	kind := e.kind
	if e.trace != nil && (kind == kindTell || kind == kindAsk) {
		kind |= traced
	}
	b = append(b, envelopeVersion, kind)
	switch e.kind {
	case kindTell, kindAsk, kindDrain:
		b = binary.AppendUvarint(b, e.id)
		b = binary.BigEndian.AppendUint64(b, e.token)
		b = appendString(b, e.typ)
		b = appendString(b, e.key)
		b = appendString(b, e.name)
		b = e.appendBody(b, enc, m)
		b = binary.AppendVarint(b, e.ttl)
		b = append(b, e.hops)
		b = appendStrings(b, e.chain)
		if e.kind == kindAsk {
			b = appendRequestID(b, e.rid)
			b = appendString(b, e.idem)
		}
		if kind&traced != 0 {
			b = appendString(b, e.trace.Parent)
			b = appendString(b, e.trace.State)
		}
	case kindCancel, kindDrained, kindRetired:
		b = binary.AppendUvarint(b, e.id)
	case kindReply:
		b = binary.AppendUvarint(b, e.id)
		if e.err == nil {
			b = append(b, 0)
			b = appendBytes(b, e.body)
		} else {
			b = appendWireError(b, e.err, 0)
		}
	case kindSync:
		b = binary.AppendUvarint(b, e.id)
	case kindMembers:
		b = binary.AppendUvarint(b, e.id)
		b = appendBytes(b, e.body)
	case kindSyncSince:
		b = binary.AppendUvarint(b, e.id)
		b = appendString(b, e.digest)
	case kindMembersV:
		b = binary.AppendUvarint(b, e.id)
		b = appendString(b, e.version)
		b = appendBytes(b, e.body)
	case kindVersion:
		b = binary.AppendUvarint(b, e.id)
		b = appendString(b, e.version)
		b = appendString(b, e.digest)
	}
	return b
}

// appendRequestID appends id: its form, then 16 bytes for a made id or
// a string for a named one. A made id stays 16 bytes on the wire and
// two numbers once decoded: nobody formats it unless someone reads it.
func appendRequestID(b []byte, id host.RequestID) []byte {
	if hi, lo, ok := id.Made(); ok {
		b = append(b, ridMade)
		b = binary.BigEndian.AppendUint64(b, hi)
		return binary.BigEndian.AppendUint64(b, lo)
	}
	if name := id.Name(); name != "" {
		b = append(b, ridNamed)
		return appendString(b, name)
	}
	return append(b, ridNone)
}

// requestID reads what appendRequestID wrote; a named id must be one a
// caller may name (host.ValidRequestID), a made one not zero.
func (d *decoder) requestID() host.RequestID {
	switch form := d.byte("request id"); form {
	case ridNone:
	case ridMade:
		hi, lo := d.uint64("request id"), d.uint64("request id")
		if id := host.MadeRequestID(hi, lo); !id.IsZero() || d.err != nil {
			return id
		}
		d.fail("request id: zero")
	case ridNamed:
		s := d.string("request id")
		if why := host.ValidRequestID(s); why != "" && d.err == nil {
			d.fail("request id: " + why)
			return host.RequestID{}
		}
		return host.NamedRequestID(s)
	default:
		d.fail("request id form")
	}
	return host.RequestID{}
}

// trace reads the trace context of a traced tell or ask: a traceparent
// and a tracestate, both valid (host.ValidTrace).
func (d *decoder) trace() *host.Trace {
	t := &host.Trace{Parent: d.string("traceparent"), State: d.string("tracestate")}
	if d.err != nil {
		return nil
	}
	if why := host.ValidTrace(*t); why != "" {
		d.fail("trace context: " + why)
		return nil
	}
	return t
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendBytes(b []byte, p []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}

func appendStrings(b []byte, ss []string) []byte {
	b = binary.AppendUvarint(b, uint64(len(ss)))
	for _, s := range ss {
		b = appendString(b, s)
	}
	return b
}

// decoder reads the fields of one envelope; the first problem sticks.
// It moves an offset rather than reslicing b: writing an int costs no
// write barrier while the garbage collector marks.
type decoder struct {
	b   []byte
	i   int // next byte to read
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrMalformed, what)
	}
}

// left returns the bytes not read yet.
func (d *decoder) left() []byte { return d.b[d.i:] }

func (d *decoder) byte(what string) uint8 {
	if d.err != nil || d.i >= len(d.b) {
		d.fail(what)
		return 0
	}
	v := d.b[d.i]
	d.i++
	return v
}

func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	if d.i < len(d.b) && d.b[d.i] < 0x80 { // one byte: most lengths and ids
		v := d.b[d.i]
		d.i++
		return uint64(v)
	}
	v, n := binary.Uvarint(d.left())
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.i += n
	return v
}

func (d *decoder) varint(what string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.left())
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.i += n
	return v
}

func (d *decoder) uint64(what string) uint64 {
	if d.err != nil || len(d.b)-d.i < 8 {
		d.fail(what)
		return 0
	}
	v := binary.BigEndian.Uint64(d.b[d.i:])
	d.i += 8
	return v
}

// bytes returns a sub-slice of the envelope (no copy).
func (d *decoder) bytes(what string) []byte {
	n := d.uvarint(what)
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)-d.i) {
		d.fail(what)
		return nil
	}
	j := d.i + int(n)
	v := d.b[d.i:j:j]
	d.i = j
	return v
}

func (d *decoder) string(what string) string { return string(d.bytes(what)) }

// stringAs returns the next string, which is same when the bytes are
// same's: a stream of envelopes mostly repeats its type, key and message
// name, and reusing the string spares copying it out of the envelope (the
// comparison copies nothing).
func (d *decoder) stringAs(what, same string) string {
	b := d.bytes(what)
	if string(b) == same {
		return same
	}
	return string(b)
}

// maxToken bounds a placement version or a list digest on the wire
// (they are 32 hex digits now).
const maxToken = 64

// token reads a placement version or a list digest: empty, or at most
// maxToken visible ASCII bytes.
func (d *decoder) token(what string) string {
	b := d.bytes(what)
	if d.err != nil {
		return ""
	}
	if len(b) > maxToken {
		d.fail(what + ": too long")
		return ""
	}
	for _, c := range b {
		if c <= ' ' || c > '~' {
			d.fail(what + ": not visible ASCII")
			return ""
		}
	}
	return string(b)
}

func (d *decoder) strings(what string) []string {
	n := d.uvarint(what)
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)-d.i) { // each string takes at least one byte
		d.fail(what)
		return nil
	}
	if n == 0 {
		return nil
	}
	ss := make([]string, n)
	for i := range ss {
		ss[i] = d.string(what)
	}
	return ss
}

// decodeEnvelope decodes b, which is alone or first in its batch. Byte
// fields of the result alias b; strings are copies.
func decodeEnvelope(b []byte) (envelope, error) {
	var e envelope
	err := e.decode(b, nil)
	return e, err
}

// decodeRepeat decodes b into e, a zero envelope, when b is a
// kindTellNext with the key and the message name of the tell before it,
// prev: the common case in a stream of tells to one key. It reads the
// body and the hops without the general decoder's bookkeeping, and
// leaves prev as it is (the strings are prev's). It reports false,
// touching nothing, for anything else: decode then takes b, and reports
// its problems.
func (e *envelope) decodeRepeat(b []byte, prev *tellHead) bool {
	if len(b) < 5 || b[0] != envelopeVersion || b[1] != kindTellNext || b[2] != nextSameKey|nextSameName || !prev.ok {
		return false
	}
	n, k := binary.Uvarint(b[3:])
	// The body, then exactly one byte: the hops.
	if k <= 0 || n >= uint64(len(b)) || 3+k+int(n)+1 != len(b) {
		return false
	}
	end := 3 + k + int(n)
	e.kind, e.typ, e.name, e.key, e.token = kindTell, prev.typ, prev.name, prev.key, prev.token
	e.body = b[3+k : end : end]
	e.hops = b[end]
	return true
}

// decode decodes b into e, which must be zero; on an error e is left
// zero. Byte fields of e alias b; strings are copies, or prev's strings
// when equal. prev describes the envelope before b in its batch (nil:
// none), which a kindTellNext needs; decode updates it to e.
func (e *envelope) decode(b []byte, prev *tellHead) error {
	err := e.decodeAfter(b, prev)
	if prev != nil {
		prev.set(e) // a failure leaves e zero, which is no tell
	}
	return err
}

func (e *envelope) decodeAfter(b []byte, prev *tellHead) error {
	d := decoder{b: b}
	var was tellHead // strings to reuse; ok is false
	if prev != nil {
		was = *prev
	}
	if v := d.byte("version"); d.err == nil && v != envelopeVersion {
		return fmt.Errorf("%w: version %d, want %d", ErrMalformed, v, envelopeVersion)
	}
	e.kind = d.byte("kind")
	withTrace := false
	if e.kind == kindTell|traced || e.kind == kindAsk|traced {
		e.kind &^= traced
		withTrace = true
	}
	switch e.kind {
	case kindTell, kindAsk, kindDrain:
		e.id = d.uvarint("id")
		e.token = d.uint64("token")
		e.typ = d.stringAs("type", was.typ)
		e.key = d.stringAs("key", was.key)
		e.name = d.stringAs("name", was.name)
		e.body = d.bytes("body")
		e.ttl = d.varint("ttl")
		e.hops = d.byte("hops")
		e.chain = d.strings("chain")
		if e.kind == kindAsk {
			e.rid = d.requestID()
			if e.idem = d.string("idempotency key"); e.idem != "" && d.err == nil {
				if why := host.ValidScopedIdempotencyKey(e.idem); why != "" {
					d.fail("idempotency key: " + why)
				}
			}
		}
		if withTrace {
			e.trace = d.trace()
		}
	case kindCancel, kindSync, kindDrained, kindRetired:
		e.id = d.uvarint("id")
	case kindReply:
		e.id = d.uvarint("id")
		if code := d.byte("code"); code == 0 {
			e.body = d.bytes("body")
		} else {
			e.err = d.wireError(code, 0)
		}
	case kindMembers:
		e.id = d.uvarint("id")
		e.body = d.bytes("members")
	case kindSyncSince:
		e.id = d.uvarint("id")
		e.digest = d.token("list digest")
	case kindMembersV:
		e.id = d.uvarint("id")
		e.version = d.token("placement version")
		e.body = d.bytes("members")
	case kindVersion:
		e.id = d.uvarint("id")
		e.version = d.token("placement version")
		e.digest = d.token("list digest")
	case kindTellNext:
		if prev == nil || !prev.ok {
			e.kind = 0
			return fmt.Errorf("%w: a continued tell follows no tell", ErrMalformed)
		}
		e.kind, e.typ, e.name, e.key, e.token = kindTell, prev.typ, prev.name, prev.key, prev.token
		flags := d.byte("flags")
		if flags&^(nextSameKey|nextSameName) != 0 {
			d.fail("flags")
		}
		if flags&nextSameKey == 0 {
			e.token = d.uint64("token")
			e.key = d.stringAs("key", was.key)
		}
		if flags&nextSameName == 0 {
			e.name = d.stringAs("name", was.name)
		}
		e.body = d.bytes("body")
		e.hops = d.byte("hops")
	default:
		if d.err == nil {
			kind := e.kind
			*e = envelope{}
			return fmt.Errorf("%w: unknown kind %d", ErrMalformed, kind)
		}
	}
	var err error
	switch {
	case d.err != nil:
		err = d.err
	case d.i != len(d.b):
		err = fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(d.b)-d.i)
	case e.ttl < 0 || e.ttl > math.MaxInt64/2:
		err = fmt.Errorf("%w: ttl %d", ErrMalformed, e.ttl)
	}
	if err != nil {
		*e = envelope{}
	}
	return err
}
