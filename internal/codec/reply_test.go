package codec

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
	"pgregory.net/rapid"
)

// A reply to an ask from another node is encoded as msgpack.Marshal
// writes it, whatever its type: through a plan for plain structs, by
// msgpack otherwise; and the asker's side decodes it as msgpack does.
func TestReplyEncodesAsMsgpack(t *testing.T) {
	h := testHost(t)
	check := func(t fataler, v any) {
		t.Helper()
		want, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatalf("msgpack encode %T: %v", v, err)
		}
		b := getEncodeBuffer()
		got, err := appendReply(b, v)
		got = bytes.Clone(got)
		putEncodeBuffer(b)
		if err != nil {
			t.Fatalf("reply encode %T: %v", v, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%T %+v: reply encodes\n%x\nmsgpack\n%x", v, v, got, want)
		}
	}
	for _, c := range planCases() {
		check(t, reflect.ValueOf(c.v).Elem().Interface()) // a plain struct
		check(t, c.v)                                     // a pointer: msgpack's path
	}
	for _, v := range []any{nil, 7, "s", []int{1}, map[string]int{"a": 1}, struct{ P *int }{}} {
		check(t, v)
	}
	var r planBasics
	if err := decodeReply(h, []byte{0xc0}, &r); err != nil {
		t.Fatalf("decode nil reply: %v", err)
	}
	for _, typ := range []reflect.Type{reflect.TypeFor[planInts](), reflect.TypeFor[planBasics](), reflect.TypeFor[planNested](), reflect.TypeFor[planMixed]()} {
		t.Run(typ.Name(), func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				v := reflect.New(typ)
				fill(rt, v.Elem(), "v")
				check(rt, v.Elem().Interface())
			})
		})
	}
}

func TestReplyDecodesAsMsgpack(t *testing.T) {
	h := testHost(t)
	rapid.Check(t, func(rt *rapid.T) {
		v := reflect.New(reflect.TypeFor[planMixed]())
		fill(rt, v.Elem(), "v")
		body, err := msgpack.Marshal(v.Interface())
		if err != nil {
			rt.Fatalf("encode: %v", err)
		}
		var byReply, byMsgpack planMixed
		if err := decodeReply(h, body, &byReply); err != nil {
			rt.Fatalf("reply decode: %v", err)
		}
		if err := msgpack.Unmarshal(body, &byMsgpack); err != nil {
			rt.Fatalf("msgpack decode: %v", err)
		}
		if a, b := canonical(rt, &byReply), canonical(rt, &byMsgpack); !bytes.Equal(a, b) {
			rt.Fatalf("reply decodes %+v, msgpack %+v", byReply, byMsgpack)
		}
	})
}

func TestReplyWithinKnowsBoundedTypesOnly(t *testing.T) {
	type pair struct{ A, B int64 }
	if !ReplyWithin[int](9) || ReplyWithin[int](8) {
		t.Error("int: want within 9 bytes, not within 8")
	}
	if !ReplyWithin[pair](64) {
		t.Error("a struct of two int64: want a bound within 64 bytes")
	}
	if ReplyWithin[[]byte](1<<30) || ReplyWithin[string](1<<30) || ReplyWithin[any](1<<30) {
		t.Error("a type without a bound counts as within")
	}
}
