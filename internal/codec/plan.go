package codec

import (
	"encoding"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strings"
	"unsafe"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// A plan encodes and decodes one plain struct message type without
// msgpack's reflection: the struct's fields, their offsets and kinds are
// found once, when the type is registered, and a message is then written
// and read field by field through pointers. The bytes are the ones
// msgpack writes for the type with the codec's options (a map keyed by
// field name, integers as msgpack's reflection sizes them), so either side
// may use either path.
//
// A plan follows msgpack's rules for which fields are encoded and under
// what name: exported fields, tag names (`msgpack:"name"`), `msgpack:"-"`,
// omitempty on fields of basic kinds, embedded plain structs inlined.
// Fields of basic kinds (bool, integers, floats, string, []byte), plain
// structs and types with their own msgpack codec (value-receiver
// EncodeMsgpack and pointer-receiver DecodeMsgpack, such as Ref) are
// handled by the plan; other fields (maps, pointers, interfaces, slices
// of other types, arrays, types with other marshalers such as time.Time)
// are encoded and decoded by msgpack's reflection one field at a time.
// A type that uses anything else msgpack offers (tag options other than
// omitempty, `_msgpack` settings, omitempty on a field that is not of a
// basic kind, embedded pointers, duplicate names, its own marshaler) has
// no plan: it keeps msgpack's path whole. Types registered with
// msgpack.Register are not seen by the plan: give them a CustomEncoder
// instead.
type plan struct {
	t      reflect.Type
	fields []planField // in msgpack's order
	// head is the map header when no field is omitempty: the same for
	// every message.
	head []byte
	omit bool // some field is omitempty
	// pure: every field is of a basic kind or a pure struct, so encoding
	// calls no other code and cannot fail.
	pure bool
	// embeds are the names of inlined embedded structs: msgpack decodes
	// a map under such a key into the embedded struct.
	embeds []planField
}

// planField is one encoded field.
type planField struct {
	name string
	key  []byte // name as a msgpack string
	// off is the field's offset in the outermost struct of the plan that
	// holds it (reflect's StructField.Offset, summed through embedded
	// structs), index its path there for reflect's FieldByIndex: the
	// tests check the two agree.
	off   uintptr
	index []int
	kind  fieldKind
	omit  bool // omitempty
	sub   *plan
	typ   reflect.Type
}

type fieldKind uint8

const (
	fieldBool fieldKind = iota
	fieldInt            // int and uint: msgpack sizes them by value
	fieldInt8           // the other sizes keep their width, as msgpack's reflection writes them
	fieldInt16
	fieldInt32
	fieldInt64
	fieldUint
	fieldUint8
	fieldUint16
	fieldUint32
	fieldUint64
	fieldFloat32
	fieldFloat64
	fieldString
	fieldBytes
	fieldStruct  // a plain struct: sub
	fieldCustom  // a type with its own msgpack codec
	fieldReflect // anything else: msgpack's reflection for this field
)

var (
	errArrayStruct = errors.New("msgpack: number of fields in array-encoded struct has changed")
	hookTypes      = []reflect.Type{
		customEncoder, customDecoder,
		reflect.TypeFor[msgpack.Marshaler](), reflect.TypeFor[msgpack.Unmarshaler](),
		reflect.TypeFor[encoding.BinaryMarshaler](), reflect.TypeFor[encoding.BinaryUnmarshaler](),
		reflect.TypeFor[encoding.TextMarshaler](), reflect.TypeFor[encoding.TextUnmarshaler](),
	}
	encodeHooks = []reflect.Type{hookTypes[0], hookTypes[2], hookTypes[4], hookTypes[6]}
	decodeHooks = []reflect.Type{hookTypes[1], hookTypes[3], hookTypes[5], hookTypes[7]}
	isZeroer    = reflect.TypeFor[interface{ IsZero() bool }]()
)

// hooked reports whether t or *t implements one of msgpack's hooks: it
// encodes or decodes by its own rules.
func hooked(t reflect.Type) bool {
	for _, h := range hookTypes {
		if t.Implements(h) || reflect.PointerTo(t).Implements(h) {
			return true
		}
	}
	return false
}

// addrEncoded reports whether a value of t may encode differently when
// addressable: a type within it (not behind a pointer, slice or map)
// encodes by a pointer-receiver method. msgpack encodes a message that is
// not addressable; a plan encodes fields through their address.
func addrEncoded(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return false
	}
	seen[t] = true
	for _, h := range encodeHooks {
		if !t.Implements(h) && reflect.PointerTo(t).Implements(h) {
			return true
		}
	}
	switch t.Kind() {
	case reflect.Struct:
		for i := range t.NumField() {
			if addrEncoded(t.Field(i).Type, seen) {
				return true
			}
		}
	case reflect.Array:
		return addrEncoded(t.Elem(), seen)
	}
	return false
}

// newPlan returns the plan of t, or nil when t keeps msgpack's path.
func newPlan(t reflect.Type) *plan {
	if t.Kind() != reflect.Struct || hooked(t) {
		return nil
	}
	p, ok := buildPlan(t, map[reflect.Type]bool{})
	if !ok {
		return nil
	}
	return p
}

// buildPlan follows msgpack's getFields for struct t.
func buildPlan(t reflect.Type, building map[reflect.Type]bool) (*plan, bool) {
	if building[t] {
		return nil, false // recursive through a field: not possible without a pointer, but be safe
	}
	building[t] = true
	defer delete(building, t)
	p := &plan{t: t}
	names := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, omit, ok := parseTag(f.Tag.Get("msgpack"))
		if !ok || f.Name == "_msgpack" {
			return nil, false
		}
		if name == "-" {
			continue
		}
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if f.Anonymous {
			switch {
			case f.Type.Kind() == reflect.Pointer:
				return nil, false
			case f.Type.Kind() == reflect.Struct && !hooked(f.Type):
				sub, ok := buildPlan(f.Type, building)
				if !ok {
					return nil, false
				}
				if !f.IsExported() && len(sub.fields) > 0 {
					// msgpack cannot set fields reached through an
					// unexported embedded struct: keep its path (and
					// its error).
					return nil, false
				}
				if !shadows(sub, names) {
					if omit || names[name] {
						return nil, false
					}
					for _, sf := range sub.fields {
						sf.off += f.Offset
						sf.index = append([]int{i}, sf.index...)
						p.fields = append(p.fields, sf)
						names[sf.name] = true
					}
					p.embeds = append(p.embeds, planField{name: name, off: f.Offset, index: []int{i}, kind: fieldStruct, sub: sub, typ: f.Type})
					names[name] = true
					continue
				}
			}
			if !f.IsExported() {
				return nil, false
			}
		}
		if names[name] {
			return nil, false // msgpack would write the name twice
		}
		pf, ok := newField(f.Type, building)
		if !ok || omit && pf.kind > fieldBytes {
			return nil, false
		}
		if omit && f.Type.Implements(isZeroer) {
			return nil, false // msgpack asks IsZero
		}
		pf.name, pf.off, pf.index, pf.omit = name, f.Offset, []int{i}, omit
		pf.key = appendString(nil, name)
		p.fields = append(p.fields, pf)
		p.omit = p.omit || omit
		names[name] = true
	}
	for _, e := range p.embeds {
		for _, f := range p.fields {
			if f.name == e.name {
				return nil, false // two meanings for one key when decoding
			}
		}
	}
	if !p.omit {
		p.head = appendMapLen(nil, len(p.fields))
	}
	p.pure = true
	for _, f := range p.fields {
		if f.kind > fieldBytes && (f.kind != fieldStruct || !f.sub.pure) {
			p.pure = false
		}
	}
	return p, true
}

// shadows reports whether an embedded struct's fields collide with names
// already taken: msgpack then encodes it as a field of its own.
func shadows(sub *plan, names map[string]bool) bool {
	for _, f := range sub.fields {
		if names[f.name] {
			return true
		}
	}
	return false
}

// parseTag reads a msgpack struct tag: its name and omitempty. ok is
// false for anything else, which the plan leaves to msgpack.
func parseTag(tag string) (name string, omit, ok bool) {
	if tag == "" {
		return "", false, true
	}
	parts := strings.Split(tag, ",")
	name = strings.TrimSpace(parts[0])
	for _, o := range parts[1:] {
		if strings.TrimSpace(o) != "omitempty" {
			return "", false, false
		}
		omit = true
	}
	for _, r := range name {
		if !(r == '_' || r == '-' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return "", false, false
		}
	}
	return name, omit, true
}

// newField classifies a field of type t.
func newField(t reflect.Type, building map[reflect.Type]bool) (planField, bool) {
	if hooked(t) {
		if custom(t) {
			return planField{kind: fieldCustom, typ: t}, true
		}
		if addrEncoded(t, map[reflect.Type]bool{}) {
			return planField{}, false
		}
		return planField{kind: fieldReflect, typ: t}, true
	}
	k := fieldReflect
	switch t.Kind() {
	case reflect.Bool:
		k = fieldBool
	case reflect.Int:
		k = fieldInt
	case reflect.Int8:
		k = fieldInt8
	case reflect.Int16:
		k = fieldInt16
	case reflect.Int32:
		k = fieldInt32
	case reflect.Int64:
		k = fieldInt64
	case reflect.Uint:
		k = fieldUint
	case reflect.Uint8:
		k = fieldUint8
	case reflect.Uint16:
		k = fieldUint16
	case reflect.Uint32:
		k = fieldUint32
	case reflect.Uint64:
		k = fieldUint64
	case reflect.Float32:
		k = fieldFloat32
	case reflect.Float64:
		k = fieldFloat64
	case reflect.String:
		k = fieldString
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			k = fieldBytes
		}
	case reflect.Struct:
		sub, ok := buildPlan(t, building)
		if ok {
			return planField{kind: fieldStruct, typ: t, sub: sub}, true
		}
	case reflect.Uintptr, reflect.Complex64, reflect.Complex128, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return planField{}, false
	}
	if k == fieldReflect && addrEncoded(t, map[reflect.Type]bool{}) {
		return planField{}, false
	}
	return planField{kind: k, typ: t}, true
}

// custom reports whether t brings its own msgpack codec that a plan can
// call directly: a value-receiver EncodeMsgpack and a pointer-receiver
// DecodeMsgpack, which msgpack's reflection then uses too.
func custom(t reflect.Type) bool {
	if nilable(t) || !t.Implements(customEncoder) || !reflect.PointerTo(t).Implements(customDecoder) {
		return false
	}
	for _, h := range decodeHooks {
		if t.Implements(h) {
			return false // msgpack decodes t by the value's own hook
		}
	}
	return true
}

// appendMessage appends the encoding of the struct at p, a pointer to a
// value of pl.t.
//
// Fields are read at unsafe.Add(p, f.off): arithmetic within the one
// struct p points to (rule 3 of package unsafe), at an offset reflect
// gave. Each is read as a type of its kind's size and layout (rule 1:
// int16 as uint16, float64 as uint64, a named string as string).
func (pl *plan) appendMessage(dst []byte, p unsafe.Pointer, e *encodeBuffer) ([]byte, error) {
	if pl.omit {
		n := 0
		for i := range pl.fields {
			if f := &pl.fields[i]; !f.omit || !f.empty(unsafe.Add(p, f.off)) {
				n++
			}
		}
		dst = appendMapLen(dst, n)
	} else {
		dst = append(dst, pl.head...)
	}
	for i := range pl.fields {
		f := &pl.fields[i]
		fp := unsafe.Add(p, f.off)
		if f.omit && f.empty(fp) {
			continue
		}
		dst = append(dst, f.key...)
		var err error
		switch f.kind {
		case fieldBool:
			if *(*bool)(fp) {
				dst = append(dst, msgpcode.True)
			} else {
				dst = append(dst, msgpcode.False)
			}
		case fieldInt:
			dst = appendInt(dst, int64(*(*int)(fp)))
		case fieldInt8:
			dst = append(dst, msgpcode.Int8, *(*byte)(fp))
		case fieldInt16:
			dst = binary.BigEndian.AppendUint16(append(dst, msgpcode.Int16), *(*uint16)(fp))
		case fieldInt32:
			dst = binary.BigEndian.AppendUint32(append(dst, msgpcode.Int32), *(*uint32)(fp))
		case fieldInt64:
			dst = binary.BigEndian.AppendUint64(append(dst, msgpcode.Int64), *(*uint64)(fp))
		case fieldUint:
			dst = appendUint(dst, uint64(*(*uint)(fp)))
		case fieldUint8:
			dst = append(dst, msgpcode.Uint8, *(*byte)(fp))
		case fieldUint16:
			dst = binary.BigEndian.AppendUint16(append(dst, msgpcode.Uint16), *(*uint16)(fp))
		case fieldUint32:
			dst = binary.BigEndian.AppendUint32(append(dst, msgpcode.Uint32), *(*uint32)(fp))
		case fieldUint64:
			dst = binary.BigEndian.AppendUint64(append(dst, msgpcode.Uint64), *(*uint64)(fp))
		case fieldFloat32:
			dst = binary.BigEndian.AppendUint32(append(dst, msgpcode.Float), *(*uint32)(fp))
		case fieldFloat64:
			dst = binary.BigEndian.AppendUint64(append(dst, msgpcode.Double), *(*uint64)(fp))
		case fieldString:
			dst = appendString(dst, *(*string)(fp))
		case fieldBytes:
			dst = appendBytes(dst, *(*[]byte)(fp))
		case fieldStruct:
			dst, err = f.sub.appendMessage(dst, fp, e)
		case fieldCustom:
			e.w.b = dst
			// A *T holds T's value-receiver method: the call copies the
			// field as msgpack's reflection would.
			err = reflect.NewAt(f.typ, fp).Interface().(msgpack.CustomEncoder).EncodeMsgpack(e.enc)
			dst = e.w.b
		default:
			e.w.b = dst
			err = e.enc.EncodeValue(reflect.NewAt(f.typ, fp).Elem())
			dst = e.w.b
		}
		if err != nil {
			return dst, err
		}
	}
	return dst, nil
}

// appendValue appends the encoding of v, a struct of pl.t that need not
// be addressable (a message as an interface holds it), for a pure plan:
// fields are read through reflect, so the struct is not copied first.
// Floats are written as msgpack's reflection writes them.
func (pl *plan) appendValue(dst []byte, v reflect.Value) []byte {
	if pl.omit {
		n := 0
		for i := range pl.fields {
			if f := &pl.fields[i]; !f.omit || !f.emptyValue(fieldOf(v, f.index)) {
				n++
			}
		}
		dst = appendMapLen(dst, n)
	} else {
		dst = append(dst, pl.head...)
	}
	for i := range pl.fields {
		f := &pl.fields[i]
		fv := fieldOf(v, f.index)
		if f.omit && f.emptyValue(fv) {
			continue
		}
		dst = append(dst, f.key...)
		switch f.kind {
		case fieldBool:
			if fv.Bool() {
				dst = append(dst, msgpcode.True)
			} else {
				dst = append(dst, msgpcode.False)
			}
		case fieldInt:
			dst = appendInt(dst, fv.Int())
		case fieldInt8:
			dst = append(dst, msgpcode.Int8, byte(fv.Int()))
		case fieldInt16:
			dst = binary.BigEndian.AppendUint16(append(dst, msgpcode.Int16), uint16(fv.Int()))
		case fieldInt32:
			dst = binary.BigEndian.AppendUint32(append(dst, msgpcode.Int32), uint32(fv.Int()))
		case fieldInt64:
			dst = binary.BigEndian.AppendUint64(append(dst, msgpcode.Int64), uint64(fv.Int()))
		case fieldUint:
			dst = appendUint(dst, fv.Uint())
		case fieldUint8:
			dst = append(dst, msgpcode.Uint8, byte(fv.Uint()))
		case fieldUint16:
			dst = binary.BigEndian.AppendUint16(append(dst, msgpcode.Uint16), uint16(fv.Uint()))
		case fieldUint32:
			dst = binary.BigEndian.AppendUint32(append(dst, msgpcode.Uint32), uint32(fv.Uint()))
		case fieldUint64:
			dst = binary.BigEndian.AppendUint64(append(dst, msgpcode.Uint64), fv.Uint())
		case fieldFloat32:
			dst = binary.BigEndian.AppendUint32(append(dst, msgpcode.Float), math.Float32bits(float32(fv.Float())))
		case fieldFloat64:
			dst = binary.BigEndian.AppendUint64(append(dst, msgpcode.Double), math.Float64bits(fv.Float()))
		case fieldString:
			dst = appendString(dst, fv.String())
		case fieldBytes:
			dst = appendBytes(dst, fv.Bytes())
		case fieldStruct:
			dst = f.sub.appendValue(dst, fv)
		}
	}
	return dst
}

// fieldOf is v.FieldByIndex for a plan's path, which never crosses a
// pointer.
func fieldOf(v reflect.Value, index []int) reflect.Value {
	for _, i := range index {
		v = v.Field(i)
	}
	return v
}

// emptyValue is empty for a field read through reflect.
func (f *planField) emptyValue(fv reflect.Value) bool {
	switch f.kind {
	case fieldBool:
		return !fv.Bool()
	case fieldInt, fieldInt8, fieldInt16, fieldInt32, fieldInt64:
		return fv.Int() == 0
	case fieldUint, fieldUint8, fieldUint16, fieldUint32, fieldUint64:
		return fv.Uint() == 0
	case fieldFloat32, fieldFloat64:
		return fv.Float() == 0 // -0 too, not NaN
	case fieldString, fieldBytes:
		return fv.Len() == 0
	}
	return false
}

// empty reports whether the omitempty field at fp is omitted: a field of
// a basic kind, as msgpack's isEmptyValue sees it.
func (f *planField) empty(fp unsafe.Pointer) bool {
	switch f.kind {
	case fieldBool, fieldInt8, fieldUint8:
		return *(*byte)(fp) == 0
	case fieldInt16, fieldUint16:
		return *(*uint16)(fp) == 0
	case fieldInt32, fieldUint32:
		return *(*uint32)(fp) == 0
	case fieldInt, fieldUint:
		return *(*uint)(fp) == 0
	case fieldInt64, fieldUint64:
		return *(*uint64)(fp) == 0
	case fieldFloat32:
		return *(*float32)(fp) == 0 // -0 too, not NaN
	case fieldFloat64:
		return *(*float64)(fp) == 0
	case fieldString:
		return len(*(*string)(fp)) == 0
	case fieldBytes:
		return len(*(*[]byte)(fp)) == 0
	}
	return false
}

func appendMapLen(dst []byte, n int) []byte {
	switch {
	case n < 16:
		return append(dst, msgpcode.FixedMapLow|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(dst, msgpcode.Map16), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(dst, msgpcode.Map32), uint32(n))
}

// appendUint writes n in the fewest bytes, as msgpack's EncodeUint.
func appendUint(dst []byte, n uint64) []byte {
	switch {
	case n <= math.MaxInt8:
		return append(dst, byte(n))
	case n <= math.MaxUint8:
		return append(dst, msgpcode.Uint8, byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(dst, msgpcode.Uint16), uint16(n))
	case n <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(dst, msgpcode.Uint32), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(dst, msgpcode.Uint64), n)
}

// appendInt writes n in the fewest bytes, as msgpack's EncodeInt.
func appendInt(dst []byte, n int64) []byte {
	switch {
	case n >= 0:
		return appendUint(dst, uint64(n))
	case n >= -32:
		return append(dst, byte(n))
	case n >= math.MinInt8:
		return append(dst, msgpcode.Int8, byte(n))
	case n >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(dst, msgpcode.Int16), uint16(n))
	case n >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(dst, msgpcode.Int32), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(dst, msgpcode.Int64), uint64(n))
}

func appendString(dst []byte, s string) []byte {
	n := len(s)
	switch {
	case n < 32:
		dst = append(dst, msgpcode.FixedStrLow|byte(n))
	case n < 256:
		dst = append(dst, msgpcode.Str8, byte(n))
	case n <= math.MaxUint16:
		dst = binary.BigEndian.AppendUint16(append(dst, msgpcode.Str16), uint16(n))
	default:
		dst = binary.BigEndian.AppendUint32(append(dst, msgpcode.Str32), uint32(n))
	}
	return append(dst, s...)
}

func appendBytes(dst []byte, b []byte) []byte {
	n := len(b)
	switch {
	case b == nil:
		return append(dst, msgpcode.Nil)
	case n < 256:
		dst = append(dst, msgpcode.Bin8, byte(n))
	case n <= math.MaxUint16:
		dst = binary.BigEndian.AppendUint16(append(dst, msgpcode.Bin16), uint16(n))
	default:
		dst = binary.BigEndian.AppendUint32(append(dst, msgpcode.Bin32), uint32(n))
	}
	return append(dst, b...)
}

// planReader reads a message from a byte slice; fields the plan leaves to
// msgpack (and unknown keys) are read by d's decoder from the same bytes.
type planReader struct {
	b []byte
	i int
	d *boundDecoder
}

var errShort = fmt.Errorf("msgpack: %w", io.ErrUnexpectedEOF)

func (r *planReader) code() (byte, error) {
	if r.i >= len(r.b) {
		return 0, errShort
	}
	c := r.b[r.i]
	r.i++
	return c, nil
}

func (r *planReader) next(n int) ([]byte, error) {
	if n < 0 || len(r.b)-r.i < n {
		return nil, errShort
	}
	s := r.b[r.i : r.i+n : r.i+n]
	r.i += n
	return s, nil
}

// withMsgpack runs f with d's decoder reading the rest of the message,
// then moves past what it read.
func (r *planReader) withMsgpack(f func(*msgpack.Decoder) error) error {
	d := r.d
	d.r.Reset(r.b[r.i:])
	err := f(d.dec)
	r.i = len(r.b) - d.r.Len()
	if err != nil {
		d.dec.Reset(&d.r) // drop whatever state the failure left
	}
	return err
}

// decodePlan decodes body into the zero struct at p, a pointer to a value
// of pl.t, with plan pl. Fields are written as appendMessage reads them
// (rules 3 and 1 of package unsafe).
func (d *boundDecoder) decodePlan(pl *plan, body []byte, p unsafe.Pointer) error {
	r := planReader{b: body, d: d}
	return pl.decode(&r, p)
}

// decode reads a struct as msgpack's decodeStructValue does: a map keyed
// by field name (unknown keys skipped), nil, or an array of all fields.
func (pl *plan) decode(r *planReader, p unsafe.Pointer) error {
	c, err := r.code()
	if err != nil {
		return err
	}
	n, err := r.mapLen(c)
	if err != nil {
		n, aerr := r.arrayLen(c)
		if aerr != nil {
			return err
		}
		if n <= 0 {
			reflect.NewAt(pl.t, p).Elem().SetZero()
			return nil
		}
		if n != len(pl.fields) {
			return errArrayStruct
		}
		for i := range pl.fields {
			f := &pl.fields[i]
			if err := f.decode(r, unsafe.Add(p, f.off)); err != nil {
				return err
			}
		}
		return nil
	}
	if n == -1 {
		reflect.NewAt(pl.t, p).Elem().SetZero()
		return nil
	}
	for k := range n {
		// Most maps hold the fields in the plan's order, keyed as it
		// keys them: compare the encoded key whole.
		if k < len(pl.fields) {
			f := &pl.fields[k]
			if end := r.i + len(f.key); end <= len(r.b) && string(r.b[r.i:end]) == string(f.key) {
				r.i = end
				if err := f.decode(r, unsafe.Add(p, f.off)); err != nil {
					return err
				}
				continue
			}
		}
		name, err := r.key()
		if err != nil {
			return err
		}
		f := pl.field(name, k)
		if f == nil {
			if err := r.skip(); err != nil {
				return err
			}
			continue
		}
		if err := f.decode(r, unsafe.Add(p, f.off)); err != nil {
			return err
		}
	}
	return nil
}

// field returns the field named name, the k-th key of the map: most
// likely the k-th field.
func (pl *plan) field(name []byte, k int) *planField {
	if k < len(pl.fields) && string(name) == pl.fields[k].name {
		return &pl.fields[k]
	}
	for i := range pl.fields {
		if string(name) == pl.fields[i].name {
			return &pl.fields[i]
		}
	}
	for i := range pl.embeds {
		if string(name) == pl.embeds[i].name {
			return &pl.embeds[i]
		}
	}
	return nil
}

// skip moves past one value, accepting what msgpack's Skip does. It
// counts the values still to skip instead of recursing into arrays and
// maps, and checks lengths against the input before moving: a hostile
// length costs neither stack nor memory (msgpack's Skip reads into a
// buffer of up to a megabyte first).
func (r *planReader) skip() error {
	for pending := 1; pending > 0; pending-- {
		c, err := r.code()
		if err != nil {
			return err
		}
		var n int // bytes to move past after c and its length
		switch {
		case c <= msgpcode.PosFixedNumHigh || c >= msgpcode.NegFixedNumLow:
		case c >= msgpcode.FixedMapLow && c <= msgpcode.FixedMapHigh:
			pending += 2 * int(c&msgpcode.FixedMapMask)
		case c >= msgpcode.FixedArrayLow && c <= msgpcode.FixedArrayHigh:
			pending += int(c & msgpcode.FixedArrayMask)
		case c >= msgpcode.FixedStrLow && c <= msgpcode.FixedStrHigh:
			n = int(c & msgpcode.FixedStrMask)
		default:
			switch c {
			case msgpcode.Nil, msgpcode.False, msgpcode.True:
			case msgpcode.Uint8, msgpcode.Int8:
				n = 1
			case msgpcode.Uint16, msgpcode.Int16:
				n = 2
			case msgpcode.Uint32, msgpcode.Int32, msgpcode.Float:
				n = 4
			case msgpcode.Uint64, msgpcode.Int64, msgpcode.Double:
				n = 8
			case msgpcode.Bin8, msgpcode.Bin16, msgpcode.Bin32, msgpcode.Str8, msgpcode.Str16, msgpcode.Str32:
				if n, err = r.bytesLen(c); err != nil {
					return err
				}
			case msgpcode.Array16, msgpcode.Array32:
				m, err := r.arrayLen(c)
				if err != nil {
					return err
				}
				pending += m
			case msgpcode.Map16, msgpcode.Map32:
				m, err := r.mapLen(c)
				if err != nil {
					return err
				}
				pending += 2 * m
			case msgpcode.FixExt1, msgpcode.FixExt2, msgpcode.FixExt4, msgpcode.FixExt8, msgpcode.FixExt16:
				n = 1 + 1<<(c-msgpcode.FixExt1) // the type byte and 1, 2, 4, 8 or 16 bytes
			case msgpcode.Ext8, msgpcode.Ext16, msgpcode.Ext32:
				b, err := r.next(1 << (c - msgpcode.Ext8))
				if err != nil {
					return err
				}
				for _, x := range b {
					n = n<<8 | int(x)
				}
				n++ // the type byte
			default:
				return fmt.Errorf("msgpack: unknown code %x", c)
			}
		}
		if _, err := r.next(n); err != nil {
			return err
		}
	}
	return nil
}

// key reads a map key as msgpack's decodeStringTemp does.
func (r *planReader) key() ([]byte, error) {
	c, err := r.code()
	if err != nil {
		return nil, err
	}
	n, err := r.bytesLen(c)
	if err != nil || n <= 0 {
		return nil, err
	}
	return r.next(n)
}

func (f *planField) decode(r *planReader, fp unsafe.Pointer) error {
	switch f.kind {
	case fieldStruct:
		return f.sub.decode(r, fp)
	case fieldCustom:
		if r.i < len(r.b) && r.b[r.i] == msgpcode.Nil {
			r.i++
			reflect.NewAt(f.typ, fp).Elem().SetZero()
			return nil
		}
		return r.withMsgpack(reflect.NewAt(f.typ, fp).Interface().(msgpack.CustomDecoder).DecodeMsgpack)
	case fieldReflect:
		v := reflect.NewAt(f.typ, fp).Elem()
		return r.withMsgpack(func(d *msgpack.Decoder) error { return d.DecodeValue(v) })
	}
	c, err := r.code()
	if err != nil {
		return err
	}
	switch f.kind {
	case fieldBool:
		switch c {
		case msgpcode.Nil, msgpcode.False:
			*(*bool)(fp) = false
		case msgpcode.True:
			*(*bool)(fp) = true
		default:
			return fmt.Errorf("msgpack: invalid code=%x decoding bool", c)
		}
	case fieldInt, fieldInt8, fieldInt16, fieldInt32, fieldInt64:
		n, err := r.int(c)
		if err != nil {
			return err
		}
		switch f.kind {
		case fieldInt:
			*(*int)(fp) = int(n)
		case fieldInt8:
			*(*int8)(fp) = int8(n)
		case fieldInt16:
			*(*int16)(fp) = int16(n)
		case fieldInt32:
			*(*int32)(fp) = int32(n)
		default:
			*(*int64)(fp) = n
		}
	case fieldUint, fieldUint8, fieldUint16, fieldUint32, fieldUint64:
		n, err := r.uint(c)
		if err != nil {
			return err
		}
		switch f.kind {
		case fieldUint:
			*(*uint)(fp) = uint(n)
		case fieldUint8:
			*(*uint8)(fp) = uint8(n)
		case fieldUint16:
			*(*uint16)(fp) = uint16(n)
		case fieldUint32:
			*(*uint32)(fp) = uint32(n)
		default:
			*(*uint64)(fp) = n
		}
	case fieldFloat32:
		if c == msgpcode.Float {
			b, err := r.next(4)
			if err != nil {
				return err
			}
			*(*uint32)(fp) = binary.BigEndian.Uint32(b)
			return nil
		}
		n, err := r.int(c)
		if err != nil {
			return fmt.Errorf("msgpack: invalid code=%x decoding float32", c)
		}
		*(*float32)(fp) = float32(n)
	case fieldFloat64:
		switch c {
		case msgpcode.Float:
			b, err := r.next(4)
			if err != nil {
				return err
			}
			*(*float64)(fp) = float64(math.Float32frombits(binary.BigEndian.Uint32(b)))
		case msgpcode.Double:
			b, err := r.next(8)
			if err != nil {
				return err
			}
			*(*uint64)(fp) = binary.BigEndian.Uint64(b)
		default:
			n, err := r.int(c)
			if err != nil {
				return fmt.Errorf("msgpack: invalid code=%x decoding float64", c)
			}
			*(*float64)(fp) = float64(n)
		}
	case fieldString:
		n, err := r.bytesLen(c)
		if err != nil {
			return err
		}
		if n <= 0 {
			*(*string)(fp) = ""
			return nil
		}
		b, err := r.next(n)
		if err != nil {
			return err
		}
		*(*string)(fp) = string(b)
	case fieldBytes:
		n, err := r.bytesLen(c)
		if err != nil {
			return err
		}
		if n == -1 {
			*(*[]byte)(fp) = nil
			return nil
		}
		b, err := r.next(n)
		if err != nil {
			return err
		}
		*(*[]byte)(fp) = append(make([]byte, 0, n), b...)
	}
	return nil
}

// int reads an integer after code c as msgpack's DecodeInt64: nil is 0,
// and a value too wide for the field is truncated, as reflection's SetInt
// does.
func (r *planReader) int(c byte) (int64, error) {
	if c <= msgpcode.PosFixedNumHigh || c >= msgpcode.NegFixedNumLow {
		return int64(int8(c)), nil
	}
	var n int
	switch c {
	case msgpcode.Nil:
		return 0, nil
	case msgpcode.Uint8, msgpcode.Int8:
		n = 1
	case msgpcode.Uint16, msgpcode.Int16:
		n = 2
	case msgpcode.Uint32, msgpcode.Int32:
		n = 4
	case msgpcode.Uint64, msgpcode.Int64:
		n = 8
	default:
		return 0, fmt.Errorf("msgpack: invalid code=%x decoding int64", c)
	}
	b, err := r.next(n)
	if err != nil {
		return 0, err
	}
	switch c {
	case msgpcode.Uint8:
		return int64(b[0]), nil
	case msgpcode.Int8:
		return int64(int8(b[0])), nil
	case msgpcode.Uint16:
		return int64(binary.BigEndian.Uint16(b)), nil
	case msgpcode.Int16:
		return int64(int16(binary.BigEndian.Uint16(b))), nil
	case msgpcode.Uint32:
		return int64(binary.BigEndian.Uint32(b)), nil
	case msgpcode.Int32:
		return int64(int32(binary.BigEndian.Uint32(b))), nil
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}

// uint reads an unsigned integer as msgpack's DecodeUint64: negative
// values wrap.
func (r *planReader) uint(c byte) (uint64, error) {
	n, err := r.int(c)
	if err != nil {
		return 0, fmt.Errorf("msgpack: invalid code=%x decoding uint64", c)
	}
	return uint64(n), nil
}

// bytesLen reads a string or binary length as msgpack's bytesLen: -1 for
// nil.
func (r *planReader) bytesLen(c byte) (int, error) {
	if c >= msgpcode.FixedStrLow && c <= msgpcode.FixedStrHigh {
		return int(c & msgpcode.FixedStrMask), nil
	}
	switch c {
	case msgpcode.Nil:
		return -1, nil
	case msgpcode.Str8, msgpcode.Bin8:
		b, err := r.next(1)
		if err != nil {
			return 0, err
		}
		return int(b[0]), nil
	case msgpcode.Str16, msgpcode.Bin16:
		return r.be16()
	case msgpcode.Str32, msgpcode.Bin32:
		return r.be32()
	}
	return 0, fmt.Errorf("msgpack: invalid code=%x decoding string/bytes length", c)
}

// be16 and be32 read a big-endian length of 2 or 4 bytes.
func (r *planReader) be16() (int, error) {
	b, err := r.next(2)
	if err != nil {
		return 0, err
	}
	return int(binary.BigEndian.Uint16(b)), nil
}

func (r *planReader) be32() (int, error) {
	b, err := r.next(4)
	if err != nil {
		return 0, err
	}
	return int(binary.BigEndian.Uint32(b)), nil
}

func (r *planReader) mapLen(c byte) (int, error) {
	if c >= msgpcode.FixedMapLow && c <= msgpcode.FixedMapHigh {
		return int(c & msgpcode.FixedMapMask), nil
	}
	switch c {
	case msgpcode.Nil:
		return -1, nil
	case msgpcode.Map16:
		return r.be16()
	case msgpcode.Map32:
		return r.be32()
	}
	return 0, fmt.Errorf("msgpack: invalid code=%x decoding map length", c)
}

func (r *planReader) arrayLen(c byte) (int, error) {
	if c >= msgpcode.FixedArrayLow && c <= msgpcode.FixedArrayHigh {
		return int(c & msgpcode.FixedArrayMask), nil
	}
	switch c {
	case msgpcode.Array16:
		return r.be16()
	case msgpcode.Array32:
		return r.be32()
	}
	return 0, fmt.Errorf("msgpack: invalid code=%x decoding array length", c)
}
