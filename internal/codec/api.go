package codec

import (
	"fmt"
	"io"
	"reflect"

	"github.com/troupe-go/troupe/internal/fault"
	"github.com/troupe-go/troupe/internal/host"
	"github.com/vmihailenco/msgpack/v5"
)

// ErrUndecodable is fault's, under the name this package's code uses.
var ErrUndecodable = fault.ErrUndecodable

// DefinitionError is fault's, under the name this package's code uses.
type DefinitionError = fault.DefinitionError

// Codec encodes the messages of one definition (see codec.go).
type Codec = codec

// New returns the codec of message type M.
func New[M any]() *Codec { return newCodec[M]() }

// Register registers the concrete message types msgs of definition def.
func (c *codec) Register(def string, msgs []any) []*DefinitionError { return c.register(def, msgs) }

// Portable reports why messages of the codec cannot cross nodes, or nil.
func (c *codec) Portable() error { return c.portable() }

// Concrete reports whether the definition's message type is itself a
// concrete type (not an interface of registered types).
func (c *codec) Concrete() bool { return c.concrete }

// Appender returns the appender of m's type if m encodes by its plan
// alone, else nil; Name is what the appender's type is known by.
func (c *codec) Appender(m any) *TypeName { return c.appender(m) }

// TypeName is a registered message type.
type TypeName = typeName

// Name is the name the type is known by across nodes.
func (t *typeName) Name() string { return t.name }

// EncodeTo appends m's encoding to b, returning its type's name.
func (c *codec) EncodeTo(b *Buffer, m any) (string, error) { return c.encodeTo(b, m) }

// Buffer is a pooled encoding buffer.
type Buffer = encodeBuffer

// GetBuffer returns a pooled buffer; give it back with PutBuffer.
func GetBuffer() *Buffer { return getEncodeBuffer() }

// PutBuffer returns b to the pool.
func PutBuffer(b *Buffer) { putEncodeBuffer(b) }

// Bytes is what b holds.
func (b *encodeBuffer) Bytes() []byte { return b.w.b }

// SetBytes makes p (b's bytes, maybe grown) b's storage again.
func (b *encodeBuffer) SetBytes(p []byte) { b.w.b = p }

// Writer appends what is written to it to b's bytes.
func (b *encodeBuffer) Writer() io.Writer { return &b.w }

// DecodeMessage decodes a message of type name for h.
func DecodeMessage[M any](c *Codec, h *host.Host, name string, body []byte) (M, error) {
	return decodeMessage[M](c, h, name, body)
}

// Decoder is a pooled decoder bound to a host.
type Decoder = boundDecoder

// GetDecoder returns a pooled decoder bound to h; give it back with
// PutDecoder.
func GetDecoder(h *host.Host) *Decoder { return getBoundDecoder(h) }

// PutDecoder returns d to the pool.
func PutDecoder(d *Decoder) { putBoundDecoder(d) }

// DecodeWith decodes a message of type name with d.
func DecodeWith[M any](d *Decoder, c *Codec, name string, body []byte) (M, error) {
	return decodeWith[M](d, c, name, body)
}

// AppendReply appends v's encoding, as msgpack.Marshal writes it, to b's
// bytes.
func AppendReply(b *Buffer, v any) ([]byte, error) { return appendReply(b, v) }

// ReplyWithin reports whether every reply of type R encodes within limit
// bytes, known from the type alone: false when a reply must be encoded to
// be measured.
func ReplyWithin[R any](limit int) bool { return replyWithin[R](limit) }

// DecodeReply decodes body into v, of the asker's reply type.
func DecodeReply[R any](h *host.Host, body []byte, v *R) error { return decodeReply(h, body, v) }

// Unencodable returns the path and type of the first part of t that the
// state codec cannot carry, or "".
func Unencodable(t reflect.Type, path string) (string, reflect.Type) {
	return unencodable(t, path, map[reflect.Type]bool{})
}

// unencodable returns the path and type of the first part of t that the
// state codec cannot carry: functions, channels and unsafe pointers.
func unencodable(t reflect.Type, path string, seen map[reflect.Type]bool) (string, reflect.Type) {
	if seen[t] {
		return "", nil
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Func, reflect.Chan, reflect.UnsafePointer, reflect.Complex64, reflect.Complex128:
		return path, t
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return unencodable(t.Elem(), path+"[]", seen)
	case reflect.Map:
		if p, bad := unencodable(t.Key(), path+"{key}", seen); p != "" {
			return p, bad
		}
		return unencodable(t.Elem(), path+"{}", seen)
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() || f.Tag.Get("msgpack") == "-" {
				continue
			}
			if p, bad := unencodable(f.Type, path+"."+f.Name, seen); p != "" {
				return p, bad
			}
		}
	}
	return "", nil
}

// DecodeState decodes a stored actor state into v, binding the refs it
// holds to h. A struct field the type no longer has, or bytes left over,
// are errors: a state whose type changed must not decode silently into
// zero fields.
func DecodeState(h *host.Host, body []byte, v any) error {
	r := &hostReader{h: h}
	r.Reset(body)
	dec := msgpack.NewDecoder(r)
	dec.DisallowUnknownFields(true)
	if err := dec.Decode(v); err != nil {
		return err
	}
	if n := r.Len(); n != 0 {
		return fmt.Errorf("%w: %d bytes after the state", ErrUndecodable, n)
	}
	return nil
}
