package codec

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// Message types of the codec tests: plain structs go through msgpack's
// reflection, the custom ones through their own methods.
type (
	codecMsg   interface{ codecMsg() }
	plainMsg   struct{ N int }
	plainPtr   struct{ S string }
	customMsg  struct{ N int }
	customPtr  struct{ S []string }
	customNone struct{ N int } // encodes by its method, decodes by reflection
	// An interface holds these in its data word itself, not by pointer.
	directMsg struct{ P *int }
	emptyMsg  struct{}
)

func (plainMsg) codecMsg()   {}
func (*plainPtr) codecMsg()  {}
func (customMsg) codecMsg()  {}
func (*customPtr) codecMsg() {}
func (customNone) codecMsg() {}
func (directMsg) codecMsg()  {}
func (emptyMsg) codecMsg()   {}

// customCalls counts the custom methods' calls, to see they ran.
var customCalls struct{ enc, dec int }

// The custom codecs write what msgpack would for the struct (a map keyed
// by field name), so either side may use either path.
func (m customMsg) EncodeMsgpack(enc *msgpack.Encoder) error {
	customCalls.enc++
	return enc.Encode(map[string]int{"N": m.N})
}

func (m *customMsg) DecodeMsgpack(dec *msgpack.Decoder) error {
	customCalls.dec++
	var v map[string]int
	if err := dec.Decode(&v); err != nil {
		return err
	}
	m.N = v["N"]
	return nil
}

func (m *customPtr) EncodeMsgpack(enc *msgpack.Encoder) error {
	customCalls.enc++
	return enc.Encode(map[string][]string{"S": m.S})
}

func (m *customPtr) DecodeMsgpack(dec *msgpack.Decoder) error {
	customCalls.dec++
	var v map[string][]string
	if err := dec.Decode(&v); err != nil {
		return err
	}
	m.S = v["S"]
	return nil
}

func (m customNone) EncodeMsgpack(enc *msgpack.Encoder) error {
	customCalls.enc++
	return enc.Encode(map[string]int{"N": m.N})
}

func newTestCodec(t *testing.T) *codec {
	t.Helper()
	c := newCodec[codecMsg]()
	if probs := c.register("test", []any{plainMsg{}, &plainPtr{}, customMsg{}, &customPtr{}, customNone{}, directMsg{}, emptyMsg{}}); len(probs) > 0 {
		t.Fatal(probs[0])
	}
	return c
}

func encodeMsg(t *testing.T, c *codec, m any) (string, []byte) {
	t.Helper()
	b := getEncodeBuffer()
	defer putEncodeBuffer(b)
	name, err := c.encodeTo(b, m)
	if err != nil {
		t.Fatalf("encode %T: %v", m, err)
	}
	return name, bytes.Clone(b.w.b)
}

// Every message comes back equal, through one decoder reused for all of
// them in turn (as a run of tells is decoded), and encodes as msgpack
// encodes the struct, whichever path it took.
func TestCodecRoundTripsPlainAndCustomMessages(t *testing.T) {
	c := newTestCodec(t)
	seven := 7
	msgs := []codecMsg{plainMsg{N: 1}, customMsg{N: 2}, &plainPtr{S: "x"}, &customPtr{S: []string{"a", "b"}},
		customMsg{N: 3}, customNone{N: 4}, plainMsg{N: 5}, customMsg{}, &customPtr{}, directMsg{P: &seven}, directMsg{}, emptyMsg{}}
	d := getBoundDecoder(nil)
	defer putBoundDecoder(d)
	var enc, dec int
	for _, m := range msgs {
		before := customCalls
		name, body := encodeMsg(t, c, m)
		got, err := decodeWith[codecMsg](d, c, name, body)
		enc, dec = enc+customCalls.enc-before.enc, dec+customCalls.dec-before.dec
		if want, _ := msgpack.Marshal(m); !bytes.Equal(body, want) {
			t.Errorf("%T encodes as %x, msgpack as %x", m, body, want)
		}
		if err != nil {
			t.Fatalf("decode %T: %v", m, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("got %#v, want %#v", got, m)
		}
	}
	// customMsg x3, customPtr x2, customNone x1 encoded by their methods;
	// customMsg x3 and customPtr x2 decoded by theirs.
	if enc != 6 || dec != 5 {
		t.Errorf("custom methods called to encode %d and decode %d times, want 6 and 5", enc, dec)
	}
}

// A decoded message is a copy: decoding the next one into the reused
// scratch value does not change it.
func TestCodecDecodedMessagesDoNotShareTheScratchValue(t *testing.T) {
	c := newTestCodec(t)
	d := getBoundDecoder(nil)
	defer putBoundDecoder(d)
	var got []codecMsg
	for _, m := range []codecMsg{customMsg{N: 1}, customMsg{N: 2}, plainMsg{N: 3}, plainMsg{N: 4}} {
		name, body := encodeMsg(t, c, m)
		v, err := decodeWith[codecMsg](d, c, name, body)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	want := []codecMsg{customMsg{N: 1}, customMsg{N: 2}, plainMsg{N: 3}, plainMsg{N: 4}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// msgpack nil decodes as the zero value without calling the custom
// decoder, and a nil pointer encodes as msgpack nil without calling the
// custom encoder, as msgpack itself does.
func TestCodecCustomPathsKeepMsgpackNilRules(t *testing.T) {
	c := newTestCodec(t)
	d := getBoundDecoder(nil)
	defer putBoundDecoder(d)
	nilBody := []byte{0xc0}
	before := customCalls
	got, err := decodeWith[codecMsg](d, c, reflect.TypeFor[customMsg]().String(), nilBody)
	if err != nil || got != (customMsg{}) {
		t.Errorf("nil as customMsg: %#v, %v", got, err)
	}
	got, err = decodeWith[codecMsg](d, c, reflect.TypeFor[*customPtr]().String(), nilBody)
	if p, ok := got.(*customPtr); err != nil || !ok || p == nil || p.S != nil {
		t.Errorf("nil as *customPtr: %#v, %v", got, err)
	}
	_, body := encodeMsg(t, c, (*customPtr)(nil))
	if !bytes.Equal(body, nilBody) {
		t.Errorf("a nil *customPtr encodes as %x, want c0", body)
	}
	if customCalls != before {
		t.Errorf("custom methods called for nil: %+v -> %+v", before, customCalls)
	}
}

func TestCodecRefusesWhatItCannotDecode(t *testing.T) {
	c := newTestCodec(t)
	d := getBoundDecoder(nil)
	defer putBoundDecoder(d)
	if _, err := decodeWith[codecMsg](d, c, "nobody", []byte{0x80}); !errors.Is(err, ErrUndecodable) {
		t.Errorf("unknown name: %v", err)
	}
	name, _ := encodeMsg(t, c, customMsg{N: 1})
	if _, err := decodeWith[codecMsg](d, c, name, []byte{0x81}); !errors.Is(err, ErrUndecodable) {
		t.Errorf("truncated custom body: %v", err)
	}
	// The decoder is still good after the failures.
	name, body := encodeMsg(t, c, customMsg{N: 7})
	if got, err := decodeWith[codecMsg](d, c, name, body); err != nil || got != (customMsg{N: 7}) {
		t.Errorf("after failures: %#v, %v", got, err)
	}
}

// A concrete message type has no name and takes the same paths.
func TestCodecConcreteMessageTypes(t *testing.T) {
	d := getBoundDecoder(nil)
	defer putBoundDecoder(d)
	cc := newCodec[customMsg]()
	_, body := encodeMsg(t, cc, customMsg{N: 9})
	if got, err := decodeWith[customMsg](d, cc, "", body); err != nil || got.N != 9 {
		t.Errorf("concrete custom: %#v, %v", got, err)
	}
	pc := newCodec[plainMsg]()
	_, body = encodeMsg(t, pc, plainMsg{N: 8})
	if got, err := decodeWith[plainMsg](d, pc, "", body); err != nil || got.N != 8 {
		t.Errorf("concrete plain: %#v, %v", got, err)
	}
	ptr := newCodec[*customPtr]()
	if got, err := decodeWith[*customPtr](d, ptr, "", []byte{0xc0}); err != nil || got != nil {
		t.Errorf("concrete pointer, msgpack nil: %#v, %v (want nil, as msgpack decodes it)", got, err)
	}
}

// Decoded messages are values of their own: each is its own allocation
// (none keeps another's memory alive), in a run of one type, with other
// types between them, and for pointer types.
func TestCodecDecodedRunsKeepEachValue(t *testing.T) {
	c := newTestCodec(t)
	d := getBoundDecoder(nil)
	defer putBoundDecoder(d)
	var got, want []codecMsg
	for i := range 300 {
		m := codecMsg(plainMsg{N: i})
		if i%50 == 7 {
			m = &plainPtr{S: fmt.Sprint(i)}
		}
		name, body := encodeMsg(t, c, m)
		v, err := decodeWith[codecMsg](d, c, name, body)
		if err != nil {
			t.Fatal(err)
		}
		got, want = append(got, v), append(want, m)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}
