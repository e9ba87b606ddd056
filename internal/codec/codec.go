package codec

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/troupe-go/troupe/internal/host"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// codec turns the messages of one definition into bytes and back, for
// keys served on another node. Structs encode as msgpack maps keyed by
// field name, so adding a field stays compatible with older nodes.
//
// A message type that implements msgpack.CustomEncoder (value receiver)
// and whose pointer implements msgpack.CustomDecoder is encoded and
// decoded by those methods, called directly: that skips msgpack's lookups
// by type and its reflection, most of a small message's cost.
//
// The codec reads a message only through reflect: a pointer message
// through reflect.Value.UnsafePointer, a struct message after copying it
// into an addressable scratch value of its type. A decoded message is a
// value of its own (no allocation shared with other messages) and
// shares no memory with the bytes it was decoded from.
type codec struct {
	concrete bool // the message type is not an interface: no name needed
	// self is the message type when concrete: it has no name.
	self   *typeName
	byName map[string]*typeName
	names  map[reflect.Type]*typeName
	// last is the type encoded last, looked at before names: a stream of
	// messages is mostly of one type, and a map keyed by an interface
	// hashes slowly.
	last atomic.Pointer[typeName]
}

// typeName is a message type, its registered name, and how to encode and
// decode it.
type typeName struct {
	t    reflect.Type
	name string
	// enc: t implements msgpack.CustomEncoder; nilable: and can be nil,
	// which encodes as msgpack nil without calling it (as msgpack does).
	enc, nilable bool
	// dec: the pointer to t (to t's element when t is a pointer) implements
	// msgpack.CustomDecoder, and t (or the element) itself does not.
	dec bool
	ptr bool // t is a pointer
	// plan encodes and decodes t (a plain struct, or a pointer to one)
	// without msgpack's reflection; nil for other types.
	plan *plan
	// bound is an upper bound of t's encoding, or unbounded (bound.go).
	bound int
}

var (
	customEncoder = reflect.TypeFor[msgpack.CustomEncoder]()
	customDecoder = reflect.TypeFor[msgpack.CustomDecoder]()
)

// nilable reports whether a value of t can be nil.
func nilable(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Interface, reflect.Func, reflect.Chan:
		return true
	}
	return false
}

func newTypeName(t reflect.Type, name string) *typeName {
	tn := &typeName{t: t, name: name, enc: t.Implements(customEncoder), nilable: nilable(t), ptr: t.Kind() == reflect.Pointer}
	elem := t
	if t.Kind() == reflect.Pointer {
		elem = t.Elem()
	}
	tn.dec = elem.Kind() != reflect.Pointer && reflect.PointerTo(elem).Implements(customDecoder) && !elem.Implements(customDecoder)
	tn.plan = newPlan(elem)
	tn.bound = maxEncoded(t, map[reflect.Type]bool{})
	return tn
}

func newCodec[M any]() *codec {
	t := reflect.TypeFor[M]()
	c := &codec{concrete: t.Kind() != reflect.Interface}
	if c.concrete {
		c.self = newTypeName(t, "")
		// A nil pointer M decodes as nil by msgpack's rules, unlike a
		// registered pointer type (see decodeWith): keep msgpack's path.
		if t.Kind() == reflect.Pointer {
			c.self.dec, c.self.plan = false, nil
		}
	}
	return c
}

// register adds the dynamic type of each message under its type name.
func (c *codec) register(def string, msgs []any) []*DefinitionError {
	if c.byName == nil {
		c.byName, c.names = map[string]*typeName{}, map[reflect.Type]*typeName{}
	}
	var probs []*DefinitionError
	for _, m := range msgs {
		t := reflect.TypeOf(m)
		if t == nil {
			probs = append(probs, &DefinitionError{Field: "WithMessages", Problem: "nil message"})
			continue
		}
		name := t.String()
		if other, ok := c.byName[name]; ok && other.t != t {
			probs = append(probs, &DefinitionError{Field: "WithMessages", Problem: fmt.Sprintf("two message types named %s", name)})
			continue
		}
		if field, bad := unencodable(t, name, map[reflect.Type]bool{}); field != "" {
			probs = append(probs, &DefinitionError{Field: field, Problem: fmt.Sprintf("type %s cannot be encoded", bad)})
			continue
		}
		tn := newTypeName(t, name)
		c.byName[name], c.names[t] = tn, tn
	}
	return probs
}

// portable reports why messages cannot cross nodes, or nil.
func (c *codec) portable() error {
	if c.concrete || len(c.byName) > 0 {
		return nil
	}
	return errors.New("the message type is an interface: list its message types with WithMessages so other nodes can decode them")
}

// typeOf returns m's type and name.
func (c *codec) typeOf(m any) (*typeName, error) {
	if c.concrete {
		return c.self, nil
	}
	t := reflect.TypeOf(m)
	tn := c.last.Load()
	if tn == nil || tn.t != t {
		if tn = c.names[t]; tn == nil {
			return nil, fmt.Errorf("%w: message type %T is not listed in WithMessages", ErrUndecodable, m)
		}
		c.last.Store(tn)
	}
	return tn, nil
}

// appender returns m's type when its plan encodes it by itself (pure):
// it can then be encoded straight into the batch that carries it (see
// host.Outbound.Enc).
func (c *codec) appender(m any) *typeName {
	tn, _ := c.typeOf(m)
	if tn == nil || tn.plan == nil || !tn.plan.pure {
		return nil
	}
	return tn
}

// AppendMessage implements host.MessageAppender for types with a pure
// plan, which needs no encoder.
func (tn *typeName) AppendMessage(dst []byte, m any) []byte {
	dst, _ = tn.appendPlan(dst, m, nil)
	return dst
}

// appendPlan appends m, of a type with a plan; a nil pointer as msgpack
// writes it. A pointer is read where it points. A struct (an interface's
// value, which cannot be addressed) is read through reflect by a pure
// plan, and otherwise copied into e's scratch value first; the copy stays
// in the pooled buffer until the next message of its type replaces it,
// as the bytes do.
func (tn *typeName) appendPlan(dst []byte, m any, e *encodeBuffer) ([]byte, error) {
	v := reflect.ValueOf(m)
	switch {
	case tn.ptr && v.IsNil():
		return append(dst, msgpcode.Nil), nil
	case tn.ptr:
		return tn.plan.appendMessage(dst, v.UnsafePointer(), e)
	case tn.plan.pure:
		return tn.plan.appendValue(dst, v), nil
	}
	s, p := e.scratch.of(tn.t)
	s.Set(v)
	return tn.plan.appendMessage(dst, p, e)
}

// encodeTo encodes m into b and returns m's type name.
func (c *codec) encodeTo(b *encodeBuffer, m any) (string, error) {
	tn, err := c.typeOf(m)
	if err != nil {
		return "", err
	}
	switch {
	case tn.plan != nil:
		b.w.b, err = tn.appendPlan(b.w.b, m, b)
	case !tn.enc:
		err = b.enc.Encode(m)
	case tn.nilable && reflect.ValueOf(m).IsNil():
		err = b.enc.EncodeNil()
	default:
		err = m.(msgpack.CustomEncoder).EncodeMsgpack(b.enc)
	}
	if err != nil {
		return "", fmt.Errorf("troupe: encode %T: %w", m, err)
	}
	return tn.name, nil
}

// encodeBuffer is a msgpack encoder writing into a reusable slice.
type encodeBuffer struct {
	enc *msgpack.Encoder
	w   appendWriter
	// scratch is what a struct message is copied into for its plan to
	// read it.
	scratch scratch
}

// scratch is an addressable value of one type, reused for the messages
// of that type that one goroutine encodes or decodes in turn.
type scratch struct {
	t  reflect.Type
	tn *typeName      // t's, when found by it (see ofName)
	v  reflect.Value  // addressable, of type t
	p  unsafe.Pointer // v's address: reflect.Value.Addr looks up a type each call
}

// of returns the scratch value of type t and its address.
func (s *scratch) of(t reflect.Type) (reflect.Value, unsafe.Pointer) {
	if s.t != t {
		s.t, s.tn, s.v = t, nil, reflect.New(t).Elem()
		s.p = s.v.Addr().UnsafePointer()
	}
	return s.v, s.p
}

// ofName is of(tn.t), checked by comparing pointers: comparing two
// reflect.Types is a call into the runtime per message.
func (s *scratch) ofName(tn *typeName) (reflect.Value, unsafe.Pointer) {
	if s.tn != tn {
		s.of(tn.t)
		s.tn = tn
	}
	return s.v, s.p
}

// appendWriter appends what is written to b; it is an io.ByteWriter so
// the encoder writes to it directly.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }
func (w *appendWriter) WriteByte(c byte) error      { w.b = append(w.b, c); return nil }
func (w *appendWriter) WriteString(s string) (int, error) {
	w.b = append(w.b, s...)
	return len(s), nil
}

var encodeBuffers = sync.Pool{New: func() any {
	b := &encodeBuffer{}
	b.enc = msgpack.NewEncoder(&b.w)
	return b
}}

func getEncodeBuffer() *encodeBuffer {
	b := encodeBuffers.Get().(*encodeBuffer)
	b.w.b = b.w.b[:0]
	return b
}

// putEncodeBuffer returns b to the pool, unless a large message grew it.
func putEncodeBuffer(b *encodeBuffer) {
	if cap(b.w.b) <= 64<<10 {
		encodeBuffers.Put(b)
	}
}

// decodeMessage decodes a message of definition type M named name.
func decodeMessage[M any](c *codec, h *host.Host, name string, body []byte) (M, error) {
	d := getBoundDecoder(h)
	m, err := decodeWith[M](d, c, name, body)
	putBoundDecoder(d)
	return m, err
}

// decodeWith decodes a message of definition type M named name with d.
// A struct is decoded into d's scratch value and copied out of it (the
// copy is the message's one allocation); a pointer's struct is allocated
// and decoded in place.
func decodeWith[M any](d *boundDecoder, c *codec, name string, body []byte) (M, error) {
	var m M
	tn := c.self
	if !c.concrete {
		tn = d.tn
		if d.nc != c || d.name != name {
			if tn = c.byName[name]; tn == nil {
				return m, fmt.Errorf("%w: message type %q is not registered here", ErrUndecodable, name)
			}
			// name as given, not the registered one: a stream of
			// envelopes passes the same string again, which compares
			// equal without reading its bytes.
			d.nc, d.name, d.tn = c, name, tn
		}
		name = tn.name
	}
	t := tn.t
	// A registered pointer type is decoded into a new value; a concrete
	// pointer M (no plan, no custom decoder) keeps msgpack's rules, where
	// nil decodes as a nil pointer.
	byPointer := tn.ptr && !c.concrete
	var v reflect.Value
	var p unsafe.Pointer
	var err error
	if byPointer {
		v = reflect.New(t.Elem())
		switch {
		case tn.plan != nil:
			err = d.decodePlan(tn.plan, body, v.UnsafePointer())
		case tn.dec:
			err = d.decodeCustom(body, v)
		default:
			err = d.decode(body, v.Elem())
		}
	} else {
		v, p = d.scratch.ofName(tn)
		switch {
		case tn.plan != nil:
			err = d.decodePlan(tn.plan, body, p)
		case tn.dec:
			err = d.decodeCustom(body, v.Addr())
		default:
			err = d.decode(body, v)
		}
	}
	if err != nil {
		if !byPointer {
			v.SetZero()
		}
		if c.concrete {
			return m, fmt.Errorf("%w: %T: %w", ErrUndecodable, m, err)
		}
		return m, fmt.Errorf("%w: %s: %w", ErrUndecodable, name, err)
	}
	var ok bool
	switch {
	case byPointer:
		m, ok = v.Interface().(M)
	case c.concrete:
		// The scratch value is of type M (c.self.t is M's type): p is a
		// *M (rule 1 of package unsafe). m is a copy: the scratch value
		// is reused.
		m, ok = *(*M)(p), true
		v.SetZero()
	default:
		m, ok = v.Interface().(M) // a copy, likewise
		v.SetZero()
	}
	if !ok {
		return m, fmt.Errorf("%w: %s does not implement the message type", ErrUndecodable, name)
	}
	return m, nil
}

// hostReader is a byte source that belongs to a system: refs decoded from
// it bind to that system (see Ref.DecodeMsgpack). It is an io.ByteScanner
// so the decoder reads it directly instead of wrapping it.
type hostReader struct {
	bytes.Reader
	h *host.Host
}

func (r *hostReader) Host() *host.Host { return r.h }

// boundDecoder is a decoder with its host-bound source, pooled together.
// It decodes a run of messages without resetting the decoder for each:
// only the source changes.
type boundDecoder struct {
	dec *msgpack.Decoder
	r   hostReader
	// scratch is the zero value that messages of its type are decoded
	// into and then copied out of: a run of them allocates no value to
	// decode into.
	scratch scratch
	// The message type decoded last, by codec and name: a run of tells
	// mostly holds one.
	nc   *codec
	name string
	tn   *typeName
}

var boundDecoders = sync.Pool{New: func() any {
	d := &boundDecoder{}
	d.dec = msgpack.NewDecoder(&d.r)
	return d
}}

func getBoundDecoder(h *host.Host) *boundDecoder {
	d := boundDecoders.Get().(*boundDecoder)
	d.r.h = h
	return d
}

func putBoundDecoder(d *boundDecoder) {
	d.r.h = nil
	d.r.Reset(nil)
	boundDecoders.Put(d)
}

// decode decodes body into v, binding the refs it holds to d's host.
func (d *boundDecoder) decode(body []byte, v reflect.Value) error {
	d.r.Reset(body)
	err := d.dec.DecodeValue(v)
	if err != nil {
		d.dec.Reset(&d.r) // drop whatever state the failure left
	}
	return err
}

// decodeCustom decodes body with the msgpack.CustomDecoder p (a pointer
// to a zero value); msgpack nil leaves the value zero, as msgpack does.
func (d *boundDecoder) decodeCustom(body []byte, p reflect.Value) error {
	return d.decodeCustomAt(body, p.Interface().(msgpack.CustomDecoder))
}

// decodeCustomAt is decodeCustom with the decoder in hand.
func (d *boundDecoder) decodeCustomAt(body []byte, cd msgpack.CustomDecoder) error {
	d.r.Reset(body)
	var err error
	if c, perr := d.dec.PeekCode(); perr == nil && c == msgpcode.Nil {
		err = d.dec.DecodeNil()
	} else {
		err = cd.DecodeMsgpack(d.dec)
	}
	if err != nil {
		d.dec.Reset(&d.r)
	}
	return err
}

// decodeBound decodes body into v, binding the refs it holds to h.
func decodeBound(h *host.Host, body []byte, v any) error {
	d := getBoundDecoder(h)
	d.r.Reset(body)
	err := d.dec.Decode(v)
	if err != nil {
		d.dec.Reset(&d.r)
	}
	putBoundDecoder(d)
	return err
}
