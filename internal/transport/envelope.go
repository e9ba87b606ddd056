package transport

import (
	"bytes"
	"fmt"
	"reflect"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// maxTypeName bounds the length of a registered type name.
const maxTypeName = 256

// Registry maps envelope types to stable names. An envelope is encoded as
// a two-element msgpack array: the type name, then the value as a msgpack
// map keyed by field name (the `msgpack:"..."` tag, else the Go field
// name). Decoding matches fields by name and ignores names it does not
// know, so a sender may add a field without breaking older receivers, and a
// receiver may add one that older senders leave at its zero value. Go type
// names never reach the wire: renaming a Go type is safe, renaming a
// registered name is not.
//
// A Registry is safe for concurrent use; register types before traffic
// flows.
type Registry struct {
	mu     sync.RWMutex
	byName map[string]reflect.Type
	byType map[reflect.Type]string
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{byName: map[string]reflect.Type{}, byType: map[reflect.Type]string{}}
}

// Register binds the struct type T to name. Values decode as T, never as
// *T; Marshal accepts both T and *T. It fails with ErrDuplicateType if the
// name or the type is already registered.
func Register[T any](r *Registry, name string) error {
	t := reflect.TypeFor[T]()
	if t.Kind() != reflect.Struct {
		return fmt.Errorf("troupe: register %q: %v is not a struct type", name, t)
	}
	if name == "" || len(name) > maxTypeName {
		return fmt.Errorf("troupe: register %v: name must be 1 to %d bytes", t, maxTypeName)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.byName[name]; ok {
		return fmt.Errorf("%w: name %q", ErrDuplicateType, name)
	}
	if old, ok := r.byType[t]; ok {
		return fmt.Errorf("%w: %v is already %q", ErrDuplicateType, t, old)
	}
	r.byName[name] = t
	r.byType[t] = name
	return nil
}

// Marshal encodes a registered value (T or *T) as an envelope body.
func (r *Registry) Marshal(v any) ([]byte, error) {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer && !rv.IsNil() {
		rv = rv.Elem()
	}
	r.mu.RLock()
	name, ok := r.byType[rv.Type()]
	r.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w: Go type %T", ErrUnknownType, v)
	}
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	if err := enc.EncodeArrayLen(2); err != nil {
		return nil, err
	}
	if err := enc.EncodeString(name); err != nil {
		return nil, err
	}
	if err := enc.EncodeValue(rv); err != nil {
		return nil, fmt.Errorf("troupe: encode %q: %w", name, err)
	}
	return buf.Bytes(), nil
}

// TypeName returns the registered name an encoded envelope carries,
// without decoding the value.
func (r *Registry) TypeName(b []byte) (string, error) {
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	name, err := decodeHead(dec)
	return name, err
}

func decodeHead(dec *msgpack.Decoder) (string, error) {
	n, err := dec.DecodeArrayLen()
	if err != nil || n != 2 {
		return "", fmt.Errorf("%w: envelope is not a [name, value] pair", ErrMalformedFrame)
	}
	name, err := dec.DecodeString()
	if err != nil || len(name) > maxTypeName {
		return "", fmt.Errorf("%w: bad envelope type name", ErrMalformedFrame)
	}
	return name, nil
}

// Unmarshal decodes an envelope into a new value of its registered type
// (a T, not a *T). An unregistered name fails with ErrUnknownType.
func (r *Registry) Unmarshal(b []byte) (any, error) {
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	name, err := decodeHead(dec)
	if err != nil {
		return nil, err
	}
	r.mu.RLock()
	t, ok := r.byName[name]
	r.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownType, name)
	}
	pv := reflect.New(t)
	if err := dec.DecodeValue(pv); err != nil {
		return nil, fmt.Errorf("%w: envelope %q: %v", ErrMalformedFrame, name, err)
	}
	return pv.Elem().Interface(), nil
}

// Decode decodes an envelope that must hold a T; any other registered type
// fails with ErrUnknownType.
func Decode[T any](r *Registry, b []byte) (T, error) {
	var zero T
	v, err := r.Unmarshal(b)
	if err != nil {
		return zero, err
	}
	t, ok := v.(T)
	if !ok {
		return zero, fmt.Errorf("%w: envelope holds %T, want %T", ErrUnknownType, v, zero)
	}
	return t, nil
}
