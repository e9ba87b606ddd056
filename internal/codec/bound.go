package codec

import (
	"encoding"
	"reflect"

	"github.com/vmihailenco/msgpack/v5"
)

// A message limit is checked wherever a key lives, so a member measures
// the messages to its own keys too. Most message types are small and of
// fixed shape: numbers, bools and structs or arrays of them. For those
// the codec knows, from the type alone, an upper bound of the encoding,
// and a message whose bound is within the limit needs no encoding to be
// measured.

// unbounded marks a type whose encoding has no bound known from the type.
const unbounded = -1

var (
	msgpackMarshaler = reflect.TypeFor[msgpack.Marshaler]()
	binaryMarshaler  = reflect.TypeFor[encoding.BinaryMarshaler]()
	textMarshaler    = reflect.TypeFor[encoding.TextMarshaler]()
)

// encodes reports whether t, or its pointer, encodes itself.
func encodesItself(t reflect.Type) bool {
	for _, i := range []reflect.Type{customEncoder, msgpackMarshaler, binaryMarshaler, textMarshaler} {
		if t.Implements(i) || (t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(i)) {
			return true
		}
	}
	return false
}

// maxEncoded returns an upper bound, in bytes, of the msgpack encoding of
// any value of t, or unbounded.
func maxEncoded(t reflect.Type, seen map[reflect.Type]bool) int {
	if seen[t] || encodesItself(t) {
		return unbounded
	}
	switch t.Kind() {
	case reflect.Bool:
		return 1
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return 9
	case reflect.Array:
		e := maxEncoded(t.Elem(), seen)
		if e == unbounded || t.Len() > 1<<20 {
			return unbounded
		}
		return 5 + t.Len()*e
	case reflect.Pointer:
		seen[t] = true
		defer delete(seen, t)
		e := maxEncoded(t.Elem(), seen)
		if e == unbounded {
			return unbounded
		}
		return 1 + e
	case reflect.Struct:
		seen[t] = true
		defer delete(seen, t)
		n := 5 // map header
		for i := range t.NumField() {
			f := t.Field(i)
			e := maxEncoded(f.Type, seen)
			if e == unbounded {
				return unbounded
			}
			// Key: the field's name or its tag's, with a string header.
			n += 5 + len(f.Name) + len(f.Tag.Get("msgpack")) + e
		}
		return n
	}
	return unbounded
}

// Within reports whether m's encoding is known, from its type, to be at
// most limit bytes; false when it must be encoded to tell. An error
// reports a message type the codec cannot encode.
func (c *codec) Within(m any, limit int) (bool, error) {
	tn, err := c.typeOf(m)
	if err != nil {
		return false, err
	}
	return tn.bound != unbounded && tn.bound <= limit, nil
}

// ConcreteWithin reports whether the message type is concrete and every
// message of it encodes within limit bytes: Within without boxing a
// message to ask.
func (c *codec) ConcreteWithin(limit int) bool {
	return c.concrete && c.self.bound != unbounded && c.self.bound <= limit
}
