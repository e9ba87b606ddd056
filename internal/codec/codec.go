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
	// asM converts a value to the message type, boxed as a *M (see
	// typeName.asM); made by newCodec, which knows M.
	asM func(v any) (any, bool)
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
	// For decoding without reflect.Value.Interface (a copy) and type
	// assertions (an itab lookup each), when t is a pointer or a type an
	// interface holds by pointer: asM is a *M holding a zero t, and cd a
	// *msgpack.CustomDecoder holding a nil pointer to t (when dec); a
	// message is a copy of one whose data word points to the decoded value
	// (see withData). Nil when t is held in the data word itself.
	asM, cd any
	// plan encodes and decodes t (a plain struct, or a pointer to one)
	// without msgpack's reflection; nil for other types.
	plan *plan
	// With asM: elem is the type of the values messages point to, and
	// slab an array of slabLen of them, allocated at once and handed out
	// one by one (see boundDecoder.alloc); slab is nil for values too
	// large to share an allocation.
	elem     reflect.Type
	elemSize uintptr
	slab     reflect.Type
	slabLen  int
}

// slabBytes bounds the memory one decoded message may keep alive
// through its slab: a small message is one allocation per slabMax
// messages instead of one each.
const (
	slabBytes = 1 << 10
	slabMax   = 64
)

// iface is the layout of every interface value: a type (or itab) word and
// a data word, which for the types the fast path takes points to the
// value.
type iface struct{ tab, data unsafe.Pointer }

// withData returns x with its data word replaced by p.
func withData[I any](x I, p unsafe.Pointer) I {
	(*iface)(unsafe.Pointer(&x)).data = p
	return x
}

// held reports whether an interface holds values of t by pointer: not a
// pointer-shaped type (which sits in the data word itself). It asks the
// runtime's rule two ways and says yes only when they agree.
func held(t reflect.Type) bool {
	var shaped func(reflect.Type) bool
	shaped = func(t reflect.Type) bool {
		switch t.Kind() {
		case reflect.Pointer, reflect.Map, reflect.Chan, reflect.Func, reflect.UnsafePointer:
			return true
		case reflect.Struct:
			return t.NumField() == 1 && shaped(t.Field(0).Type)
		case reflect.Array:
			return t.Len() == 1 && shaped(t.Elem())
		}
		return false
	}
	zero := reflect.Zero(t).Interface()
	return !shaped(t) && (*iface)(unsafe.Pointer(&zero)).data != nil
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
	tn := &typeName{t: t, name: name, enc: t.Implements(customEncoder), nilable: nilable(t)}
	elem := t
	if t.Kind() == reflect.Pointer {
		elem = t.Elem()
	}
	tn.dec = elem.Kind() != reflect.Pointer && reflect.PointerTo(elem).Implements(customDecoder) && !elem.Implements(customDecoder)
	// A value's plan reads it through the interface's data word: only
	// for types held there by pointer.
	if elem != t || held(t) {
		tn.plan = newPlan(elem)
	}
	return tn
}

func newCodec[M any]() *codec {
	t := reflect.TypeFor[M]()
	c := &codec{concrete: t.Kind() != reflect.Interface, asM: func(v any) (any, bool) {
		m, ok := v.(M)
		return &m, ok
	}}
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
		c.fast(tn)
		c.byName[name], c.names[t] = tn, tn
	}
	return probs
}

// fast prepares tn for decoding without reflection's copies and
// assertions, when its type allows.
func (c *codec) fast(tn *typeName) {
	t, elem := tn.t, tn.t
	if t.Kind() == reflect.Pointer {
		elem = t.Elem()
		if elem.Kind() == reflect.Pointer {
			return
		}
	} else if !held(t) {
		return
	}
	asM, ok := c.asM(reflect.Zero(t).Interface())
	if !ok {
		return // not a message type: decodeWith says so
	}
	if tn.dec {
		cd := reflect.Zero(reflect.PointerTo(elem)).Interface().(msgpack.CustomDecoder)
		tn.cd = &cd
	}
	tn.asM, tn.elem, tn.elemSize = asM, elem, elem.Size()
	if size := tn.elemSize; size > 0 && size <= slabBytes/2 {
		tn.slabLen = min(slabMax, int(slabBytes/size))
		tn.slab = reflect.ArrayOf(tn.slabLen, elem)
	}
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
			return nil, fmt.Errorf("troupe: message type %T is not listed in WithMessages", m)
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
// plan.
func (tn *typeName) AppendMessage(dst []byte, m any) []byte {
	dst, _ = tn.appendPlan(dst, m, nil)
	return dst
}

// appendPlan appends m, of a type with a plan, read through the
// interface's data word (the struct, or the pointer to it); a nil pointer
// as msgpack writes it.
func (tn *typeName) appendPlan(dst []byte, m any, e *encodeBuffer) ([]byte, error) {
	p := (*iface)(unsafe.Pointer(&m)).data
	if p == nil {
		return append(dst, msgpcode.Nil), nil
	}
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
func decodeWith[M any](d *boundDecoder, c *codec, name string, body []byte) (M, error) {
	var m M
	if c.concrete {
		v := d.scratchOf(c.self.t)
		var err error
		if c.self.plan != nil {
			err = d.decodePlan(c.self.plan, body, v.Addr().UnsafePointer())
		} else if c.self.dec {
			err = d.decodeCustom(body, v.Addr())
		} else {
			err = d.decode(body, v)
		}
		m = *(*M)(v.Addr().UnsafePointer())
		v.SetZero()
		if err != nil {
			return m, fmt.Errorf("%w: %T: %w", ErrUndecodable, m, err)
		}
		return m, nil
	}
	tn := d.tn
	if d.nc != c || d.name != name {
		if tn = c.byName[name]; tn == nil {
			return m, fmt.Errorf("%w: message type %q is not registered here", ErrUndecodable, name)
		}
		// The registered name, not name: that may alias a network buffer.
		d.nc, d.name, d.tn = c, tn.name, tn
	}
	t := tn.t
	if pm, ok := tn.asM.(*M); ok {
		// Decode into a new value and make the message point to it.
		p := d.alloc(tn)
		var err error
		if tn.plan != nil {
			err = d.decodePlan(tn.plan, body, p)
		} else if tn.dec {
			err = d.decodeCustomAt(body, withData(*tn.cd.(*msgpack.CustomDecoder), p))
		} else {
			err = d.decode(body, reflect.NewAt(tn.elem, p).Elem())
		}
		if err != nil {
			return m, fmt.Errorf("%w: %s: %w", ErrUndecodable, name, err)
		}
		return withData(*pm, p), nil
	}
	var v reflect.Value
	var err error
	if t.Kind() == reflect.Pointer {
		v = reflect.New(t.Elem())
		if tn.plan != nil {
			err = d.decodePlan(tn.plan, body, v.UnsafePointer())
		} else if tn.dec {
			err = d.decodeCustom(body, v)
		} else {
			err = d.decode(body, v.Elem())
		}
	} else {
		v = d.scratchOf(t)
		if tn.dec {
			err = d.decodeCustom(body, v.Addr())
		} else {
			err = d.decode(body, v)
		}
	}
	if err != nil {
		if t.Kind() != reflect.Pointer {
			v.SetZero()
		}
		return m, fmt.Errorf("%w: %s: %w", ErrUndecodable, name, err)
	}
	m, ok := v.Interface().(M) // a copy: the scratch value is reused
	if t.Kind() != reflect.Pointer {
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
	// scratch is a zero value of type st, addressable, that messages of
	// that type are decoded into and then copied out of: a run of them
	// allocates no value to decode into.
	st      reflect.Type
	scratch reflect.Value
	// The message type decoded last, by codec and name: a run of tells
	// mostly holds one.
	nc   *codec
	name string
	tn   *typeName
	// slab holds the values alloc hands out for slabOf: slabNext is the
	// index of the next one.
	slabOf   *typeName
	slab     unsafe.Pointer
	slabNext int
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

// alloc returns a new zero value of tn.elem. Small values come from a
// slab shared with the next messages of the type decoded here: one
// allocation for many, at the price of a message keeping up to
// slabBytes alive while it is referenced.
func (d *boundDecoder) alloc(tn *typeName) unsafe.Pointer {
	if tn.slab == nil {
		return reflect.New(tn.elem).UnsafePointer()
	}
	if d.slabOf != tn || d.slabNext == tn.slabLen {
		d.slabOf, d.slab, d.slabNext = tn, reflect.New(tn.slab).UnsafePointer(), 0
	}
	// Within the array: a pointer past its end could point into the
	// next object.
	p := unsafe.Add(d.slab, uintptr(d.slabNext)*tn.elemSize)
	d.slabNext++
	return p
}

// scratchOf returns the zero scratch value of type t.
func (d *boundDecoder) scratchOf(t reflect.Type) reflect.Value {
	if d.st != t {
		d.st, d.scratch = t, reflect.New(t).Elem()
	}
	return d.scratch
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
