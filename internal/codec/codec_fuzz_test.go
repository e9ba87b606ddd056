package codec

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/troupe-go/troupe/internal/fault"
	"github.com/vmihailenco/msgpack/v5"
)

// fuzzTypes are the message types the decoder fuzzers pick from: plain
// and pointer structs with plans, custom codecs, and a type left to
// msgpack. None holds a map: msgpack makes a map of the size the input
// claims, up to a million entries, which stalls the fuzzer.
var fuzzTypes = []any{plainMsg{}, &plainPtr{}, customMsg{}, &customPtr{}, customNone{}, directMsg{}, emptyMsg{}, fuzzCodecMsg{}, &fuzzCodecMsg{}}

// fuzzCodecMsg is fuzzMsg as a message of the test's interface type.
type fuzzCodecMsg fuzzMsg

func (fuzzCodecMsg) codecMsg() {}

// fuzzSeeds adds an encoding of each fuzz type, whole and cut, under
// each type's index.
func fuzzSeeds(f *testing.F) {
	values := []any{plainMsg{N: -3}, &plainPtr{S: "é"}, customMsg{N: 4}, &customPtr{S: []string{"a"}}, customNone{N: 5}, directMsg{}, emptyMsg{},
		fuzzCodecMsg{I: 1, S: "s", Raw: []byte{1}, P: &planInner{A: 2}}, &fuzzCodecMsg{B: true}}
	for i, v := range values {
		b, _ := msgpack.Marshal(v)
		f.Add(uint8(i), b)
		f.Add(uint8(i), b[:len(b)/2])
	}
	f.Add(uint8(0), []byte{0xc0})
	f.Add(uint8(7), []byte{0x92, 1})
}

// Any bytes under any registered name decode or fail with
// ErrUndecodable, never panic; what decodes, msgpack decodes the same.
// The decoder stays good for the next message.
func FuzzCodecDecode(f *testing.F) {
	fuzzSeeds(f)
	h := testHost(f)
	c := newCodec[codecMsg]()
	if probs := c.register("fuzz", fuzzTypes); len(probs) > 0 {
		f.Fatal(probs[0])
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		typ := reflect.TypeOf(fuzzTypes[int(which)%len(fuzzTypes)])
		d := getBoundDecoder(h)
		defer putBoundDecoder(d)
		got, err := decodeWith[codecMsg](d, c, typ.String(), body)
		errorsAreUndecodable(t, body, err)
		if err == nil && typ.Kind() != reflect.Pointer {
			want := reflect.New(typ)
			if err := msgpack.Unmarshal(body, want.Interface()); err != nil {
				t.Fatalf("%x as %v: the codec decodes %+v, msgpack fails: %v", body, typ, got, err)
			}
			gotPtr := reflect.New(typ)
			gotPtr.Elem().Set(reflect.ValueOf(got))
			if a, b := canonical(t, gotPtr.Interface()), canonical(t, want.Interface()); !bytes.Equal(a, b) {
				t.Fatalf("%x as %v: the codec decodes %+v, msgpack %+v", body, typ, got, want.Elem())
			}
		}
		if m, err := decodeWith[codecMsg](d, c, reflect.TypeFor[plainMsg]().String(), []byte{0x81, 0xa1, 'N', 7}); err != nil || m != (plainMsg{N: 7}) {
			t.Fatalf("after %x: the decoder decodes %+v, %v", body, m, err)
		}
	})
}

// A concrete message type's decoder: the same rules.
func FuzzCodecDecodeConcrete(f *testing.F) {
	fuzzSeeds(f)
	h := testHost(f)
	plain, custom := newCodec[fuzzCodecMsg](), newCodec[customMsg]()
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		d := getBoundDecoder(h)
		defer putBoundDecoder(d)
		if which%2 == 0 {
			_, err := decodeWith[fuzzCodecMsg](d, plain, "", body)
			errorsAreUndecodable(t, body, err)
		} else {
			_, err := decodeWith[customMsg](d, custom, "", body)
			errorsAreUndecodable(t, body, err)
		}
	})
}

// The reply decoder never panics, and what it decodes msgpack decodes
// the same (its errors become ErrUndecodable in slot.Reply).
func FuzzDecodeReply(f *testing.F) {
	fuzzSeeds(f)
	h := testHost(f)
	f.Fuzz(func(t *testing.T, _ uint8, body []byte) {
		var got, want fuzzMsg
		if err := decodeReply(h, body, &got); err != nil {
			return
		}
		if err := msgpack.Unmarshal(body, &want); err != nil {
			t.Fatalf("%x: the reply decodes %+v, msgpack fails: %v", body, got, err)
		}
		if a, b := canonical(t, &got), canonical(t, &want); !bytes.Equal(a, b) {
			t.Fatalf("%x: the reply decodes %+v, msgpack %+v", body, got, want)
		}
	})
}

// fuzzDeclared is a declared error type whose value carries fields of
// several kinds.
type fuzzDeclared struct {
	N    int
	S    string
	Tags []string
}

func (e *fuzzDeclared) Error() string { return "fuzz: declared " + e.S }

// A declared error's name, body and text come from the peer: any of them
// decodes to the declared value (wrapped when the text differs) or fails
// with ErrUndecodable, never panics.
func FuzzDeclaredErrorDecode(f *testing.F) {
	h := testHost(f)
	var es Errors
	if probs := es.Register("fuzz", []error{errDeclared, (*fuzzDeclared)(nil)}); len(probs) > 0 {
		f.Fatal(probs[0])
	}
	typeName := reflect.TypeFor[*fuzzDeclared]().String()
	for _, err := range []error{errDeclared, &fuzzDeclared{N: 3, S: "s", Tags: []string{"a"}}, fmt.Errorf("w: %w", &fuzzDeclared{})} {
		de, _ := es.Encode(err)
		f.Add(de.Name, de.Body, de.Text)
		f.Add(de.Name, de.Body[:len(de.Body)/2], de.Text)
	}
	f.Add("other", []byte{0xc0}, "")
	f.Fuzz(func(t *testing.T, name string, body []byte, text string) {
		got := es.Decode(h, &fault.DeclaredError{Name: name, Body: body, Text: text})
		if got == nil {
			t.Fatalf("%q %x %q: decoded to nil", name, body, text)
		}
		if errors.Is(got, ErrUndecodable) {
			return
		}
		var fd *fuzzDeclared
		switch {
		case name == errDeclared.Error() && errors.Is(got, errDeclared):
		case name == typeName && errors.As(got, &fd):
		default:
			t.Fatalf("%q %x %q: decoded to %v (%T), neither the declared error nor ErrUndecodable", name, body, text, got, got)
		}
		if got.Error() != text {
			t.Fatalf("%q: decoded with text %q, want the peer's %q", name, got.Error(), text)
		}
	})
}
