package codec

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/vmihailenco/msgpack/v5"
	"pgregory.net/rapid"
)

// The codec is checked against msgpack/v5 itself: for random types and
// random values, it writes the bytes msgpack.Marshal writes, and decoding
// either's bytes through the codec gives what msgpack.Unmarshal gives.

// diffLeaves are the field types of generated structs: every basic kind,
// named basic types, arrays, pointers, slices and maps, time.Time, refs
// and types with their own msgpack codec.
var diffLeaves = []reflect.Type{
	reflect.TypeFor[bool](), reflect.TypeFor[int](), reflect.TypeFor[int8](), reflect.TypeFor[int16](), reflect.TypeFor[int32](),
	reflect.TypeFor[int64](), reflect.TypeFor[uint](), reflect.TypeFor[uint8](), reflect.TypeFor[uint16](), reflect.TypeFor[uint32](),
	reflect.TypeFor[uint64](), reflect.TypeFor[float32](), reflect.TypeFor[float64](), reflect.TypeFor[string](), reflect.TypeFor[[]byte](),
	reflect.TypeFor[myString](), reflect.TypeFor[myInt](), reflect.TypeFor[myBytes](), reflect.TypeFor[Ref[codecMsg]](),
	reflect.TypeFor[time.Duration](), reflect.TypeFor[time.Time](), reflect.TypeFor[[]int](), reflect.TypeFor[[]string](),
	reflect.TypeFor[map[string]string](), reflect.TypeFor[map[string]int64](), reflect.TypeFor[*int](), reflect.TypeFor[*string](),
	reflect.TypeFor[[3]int8](), reflect.TypeFor[[2]string](), reflect.TypeFor[[0]int](), reflect.TypeFor[*PlanInnerE](),
	reflect.TypeFor[[]PlanInnerE](), reflect.TypeFor[customMsg](), reflect.TypeFor[*customPtr](), reflect.TypeFor[PlanInnerE](),
}

// genDiffStruct returns a random struct type: fields of diffLeaves,
// nested and embedded structs, tags that rename, skip and omit.
func genDiffStruct(t *rapid.T, depth int) reflect.Type {
	n := rapid.IntRange(0, 8).Draw(t, "fields")
	var fields []reflect.StructField
	embedded := map[string]bool{}
	for i := range n {
		f := reflect.StructField{Name: fmt.Sprintf("F%d", i)}
		switch k := rapid.IntRange(0, 9).Draw(t, "kind"); {
		case k == 0 && depth > 0:
			f.Type = genDiffStruct(t, depth-1)
		case k == 1 && depth > 0:
			f.Type = reflect.PointerTo(genDiffStruct(t, depth-1))
		case k == 2:
			f.Type = rapid.SampledFrom(embeddable).Draw(t, "embed")
			f.Name, f.Anonymous = f.Type.Name(), true
			if embedded[f.Name] {
				continue // StructOf refuses a type embedded twice
			}
			embedded[f.Name] = true
		default:
			f.Type = rapid.SampledFrom(diffLeaves).Draw(t, "leaf")
		}
		tag := rapid.SampledFrom([]string{"", "", "", `msgpack:"-"`, `msgpack:",omitempty"`, `msgpack:"x%d"`, `msgpack:"x%d,omitempty"`, `msgpack:"A"`}).Draw(t, "tag")
		if strings.Contains(tag, "%d") {
			tag = fmt.Sprintf(tag, i)
		}
		f.Tag = reflect.StructTag(tag)
		fields = append(fields, f)
	}
	return reflect.StructOf(fields)
}

// fillDiff sets v to a random value, as fill, and also fills arrays and
// times.
func fillDiff(t *rapid.T, v reflect.Value, label string) {
	switch {
	case v.CanInt() && rapid.IntRange(0, 2).Draw(t, label+" edge") == 0:
		// msgpack's size boundaries, truncated to the field's width.
		v.SetInt(rapid.SampledFrom([]int64{-33, -32, -31, -1, 0, 127, 128, -128, -129, 255, 256, -32768, -32769, 65535, 65536,
			math.MaxInt32, math.MaxInt32 + 1, math.MinInt32, math.MinInt32 - 1, math.MaxUint32, math.MaxUint32 + 1}).Draw(t, label))
	case v.CanUint() && rapid.IntRange(0, 2).Draw(t, label+" edge") == 0:
		v.SetUint(rapid.SampledFrom([]uint64{0, 127, 128, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1, math.MaxUint64}).Draw(t, label))
	case v.Type() == reflect.TypeFor[time.Time]():
		if !rapid.Bool().Draw(t, label+" zero") {
			v.Set(reflect.ValueOf(time.Unix(rapid.Int64Range(-1<<40, 1<<40).Draw(t, label+" s"), rapid.Int64Range(0, 999_999_999).Draw(t, label+" ns"))))
		}
	case v.Kind() == reflect.Array:
		for i := range v.Len() {
			fillDiff(t, v.Index(i), label)
		}
	case v.Kind() == reflect.Pointer:
		if rapid.Bool().Draw(t, label+" nil") {
			return
		}
		p := reflect.New(v.Type().Elem())
		fillDiff(t, p.Elem(), label)
		v.Set(p)
	case v.Kind() == reflect.Struct && v.Type() != reflect.TypeFor[Ref[codecMsg]]():
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillDiff(t, v.Field(i), label+"."+v.Type().Field(i).Name)
			}
		}
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Struct:
		if rapid.Bool().Draw(t, label+" nil") {
			return
		}
		n := rapid.IntRange(0, 3).Draw(t, label+" len")
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			fillDiff(t, s.Index(i), label)
		}
		v.Set(s)
	default:
		fill(t, v, label)
	}
}

// sameValue reports whether a and b (pointers to values of one type) are
// equal: reflect.DeepEqual, or, when a float is NaN, the same canonical
// msgpack bytes.
func sameValue(t fataler, a, b any) bool {
	if reflect.DeepEqual(a, b) {
		return true
	}
	return hasNaNDeep(reflect.ValueOf(a), map[uintptr]bool{}) && bytes.Equal(canonical(t, a), canonical(t, b))
}

// hasNaNDeep reports whether a float anywhere in v is NaN.
func hasNaNDeep(v reflect.Value, seen map[uintptr]bool) bool {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() || seen[v.Pointer()] {
			return false
		}
		seen[v.Pointer()] = true
		return hasNaNDeep(v.Elem(), seen)
	case reflect.Float32, reflect.Float64:
		return math.IsNaN(v.Float())
	case reflect.Struct:
		for i := range v.NumField() {
			if hasNaNDeep(v.Field(i), seen) {
				return true
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if hasNaNDeep(v.Index(i), seen) {
				return true
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			if hasNaNDeep(it.Key(), seen) || hasNaNDeep(it.Value(), seen) {
				return true
			}
		}
	}
	return false
}

// checkDiff encodes m (a registered message of c) with the codec and with
// msgpack, requires the same bytes, and decodes them with both: the
// codec's message must equal msgpack's. It then overwrites the bytes and
// requires the decoded message unchanged. It reports whether m's type
// took a plan.
func checkDiff(t fataler, c *codec, d *boundDecoder, m any) bool {
	t.Helper()
	b := getEncodeBuffer()
	defer putEncodeBuffer(b)
	name, err := c.encodeTo(b, m)
	if err != nil {
		t.Fatalf("codec encode %T: %v", m, err)
	}
	got := bytes.Clone(b.w.b)
	want, err := msgpack.Marshal(m)
	if err != nil {
		t.Fatalf("msgpack encode %T: %v", m, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%T %+v: the codec writes\n%x\nmsgpack\n%x", m, m, got, want)
	}
	typ := reflect.TypeOf(m)
	planned := c.names[typ].plan != nil
	if typ.Kind() == reflect.Pointer && reflect.ValueOf(m).IsNil() {
		return planned // a registered pointer type decodes nil as a zero value: see TestCodecCustomPathsKeepMsgpackNilRules
	}
	byMsgpack := reflect.New(typ)
	if err := referenceUnmarshal(want, byMsgpack.Interface()); err != nil {
		return planned // msgpack cannot read it back (a name given twice in a nested struct): nothing to compare
	}
	byCodec, err := decodeWith[any](d, c, name, got)
	if err != nil {
		t.Fatalf("%T: the codec cannot decode %x: %v", m, got, err)
	}
	codecPtr := reflect.New(typ)
	codecPtr.Elem().Set(reflect.ValueOf(byCodec))
	if !sameValue(t, codecPtr.Interface(), byMsgpack.Interface()) {
		t.Fatalf("%T: the codec decodes %+v, msgpack %+v", m, codecPtr.Elem(), byMsgpack.Elem())
	}
	before := canonical(t, codecPtr.Interface())
	for i := range got {
		got[i] = 0xc1 // never used by msgpack
	}
	if after := canonical(t, codecPtr.Interface()); !bytes.Equal(before, after) {
		t.Fatalf("%T: the decoded message changed with the bytes it was decoded from:\n%x\n%x", m, before, after)
	}
	return planned
}

// referenceUnmarshal is msgpack.Unmarshal with its panics as errors:
// msgpack/v5 v5.4.1 panics (reflect.Value.IsNil on a struct) decoding a nil
// into some embedded structs whose names clash, shapes the random types
// can take; the reference then has no answer to compare with.
func referenceUnmarshal(b []byte, v any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("msgpack panicked: %v", p)
		}
	}()
	return msgpack.Unmarshal(b, v)
}

// Random struct types, registered as messages by value and by pointer,
// with random values: the codec and msgpack agree byte for byte and
// value for value.
func TestCodecMatchesMsgpackOnRandomTypes(t *testing.T) {
	d := getBoundDecoder(testHost(t))
	defer putBoundDecoder(d)
	planned, total := 0, 0
	rapid.Check(t, func(rt *rapid.T) {
		typ := genDiffStruct(rt, 2)
		c := newCodec[any]()
		if probs := c.register("diff", []any{reflect.Zero(typ).Interface(), reflect.Zero(reflect.PointerTo(typ)).Interface()}); len(probs) > 0 {
			rt.Fatalf("register %v: %v", typ, probs[0])
		}
		if b, err := msgpack.Marshal(reflect.New(typ).Interface()); err != nil || referenceUnmarshal(b, reflect.New(typ).Interface()) != nil {
			return // a type msgpack itself cannot round-trip
		}
		for range 3 {
			v := reflect.New(typ)
			fillDiff(rt, v.Elem(), "v")
			total++
			if checkDiff(rt, c, d, v.Elem().Interface()) {
				planned++
			}
			checkDiff(rt, c, d, v.Interface())
		}
		checkDiff(rt, c, d, reflect.Zero(reflect.PointerTo(typ)).Interface())
	})
	if planned < total/4 {
		t.Errorf("only %d of %d generated values took a plan", planned, total)
	}
}

// Random values of the test's registered message types (an interface
// message type: plain, pointer, custom and pointer-shaped types) and of
// concrete message types agree with msgpack.
func TestCodecMatchesMsgpackOnRegisteredTypes(t *testing.T) {
	d := getBoundDecoder(testHost(t))
	defer putBoundDecoder(d)
	c := newTestCodec(t)
	ac := newCodec[any]()
	if probs := ac.register("any", []any{plainMsg{}, &plainPtr{}, customMsg{}, &customPtr{}, directMsg{}, emptyMsg{},
		planInts{}, planBasics{}, planTags{}, planNested{}, planExportedEmbed{}, planShadowed{}, planRef{}, planMixed{}, &planMixed{}}); len(probs) > 0 {
		t.Fatal(probs[0])
	}
	rapid.Check(t, func(rt *rapid.T) {
		typ := rapid.SampledFrom([]reflect.Type{reflect.TypeFor[plainMsg](), reflect.TypeFor[*plainPtr](), reflect.TypeFor[customMsg](),
			reflect.TypeFor[*customPtr](), reflect.TypeFor[directMsg](), reflect.TypeFor[emptyMsg]()}).Draw(rt, "type")
		v := reflect.New(typ)
		fillDiff(rt, v.Elem(), "v")
		checkDiff(rt, c, d, v.Elem().Interface())
		checkDiff(rt, ac, d, v.Elem().Interface())
		typ = rapid.SampledFrom([]reflect.Type{reflect.TypeFor[planInts](), reflect.TypeFor[planBasics](), reflect.TypeFor[planTags](),
			reflect.TypeFor[planNested](), reflect.TypeFor[planExportedEmbed](), reflect.TypeFor[planShadowed](), reflect.TypeFor[planRef](),
			reflect.TypeFor[planMixed](), reflect.TypeFor[*planMixed]()}).Draw(rt, "plan type")
		v = reflect.New(typ)
		fillDiff(rt, v.Elem(), "v")
		checkDiff(rt, ac, d, v.Elem().Interface())
	})
	// Concrete message types: the definition's type itself, no name.
	rapid.Check(t, func(rt *rapid.T) {
		var m planBasics
		fillDiff(rt, reflect.ValueOf(&m).Elem(), "m")
		cc := newCodec[planBasics]()
		b := getEncodeBuffer()
		defer putEncodeBuffer(b)
		if _, err := cc.encodeTo(b, m); err != nil {
			rt.Fatal(err)
		}
		want, _ := msgpack.Marshal(m)
		if !bytes.Equal(b.w.b, want) {
			rt.Fatalf("concrete %+v: the codec writes %x, msgpack %x", m, b.w.b, want)
		}
		got, err := decodeWith[planBasics](d, cc, "", want)
		var byMsgpack planBasics
		if err != nil || msgpack.Unmarshal(want, &byMsgpack) != nil || !sameValue(rt, &got, &byMsgpack) {
			rt.Fatalf("concrete: the codec decodes %+v (%v), msgpack %+v", got, err, byMsgpack)
		}
	})
}

// A struct decoded by its plan holds copies: strings and bytes do not
// share the input's memory.
func TestCodecDecodedBytesAndStringsAreCopies(t *testing.T) {
	c := newCodec[any]()
	if probs := c.register("copies", []any{planBasics{}, &planBasics{}}); len(probs) > 0 {
		t.Fatal(probs[0])
	}
	d := getBoundDecoder(nil)
	defer putBoundDecoder(d)
	for _, m := range []any{planBasics{S: "string", Raw: []byte("raw"), Name: "name", Blob: myBytes("blob")}, &planBasics{S: "s", Raw: []byte{1}}} {
		body, _ := msgpack.Marshal(m)
		name := reflect.TypeOf(m).String()
		got, err := decodeWith[any](d, c, name, body)
		if err != nil {
			t.Fatal(err)
		}
		v := reflect.Indirect(reflect.ValueOf(got))
		lo, hi := uintptr(unsafe.Pointer(&body[0])), uintptr(unsafe.Pointer(&body[0]))+uintptr(len(body))
		for _, f := range []string{"S", "Raw", "Name", "Blob"} {
			fv := v.FieldByName(f)
			var p uintptr
			switch {
			case fv.Len() == 0:
				continue
			case fv.Kind() == reflect.String:
				p = uintptr(unsafe.Pointer(unsafe.StringData(fv.String())))
			default:
				p = fv.Pointer()
			}
			if p >= lo && p < hi {
				t.Errorf("%T.%s points into the input", m, f)
			}
		}
	}
}

// Every field a plan reads by offset is where reflect says it is, and of
// the size its kind reads: the invariant appendMessage and decode rely on
// for their unsafe.Add and pointer conversions.
func TestPlanFieldOffsetsMatchReflect(t *testing.T) {
	sizes := map[fieldKind]uintptr{
		fieldBool: 1, fieldInt: unsafe.Sizeof(int(0)), fieldInt8: 1, fieldInt16: 2, fieldInt32: 4, fieldInt64: 8,
		fieldUint: unsafe.Sizeof(uint(0)), fieldUint8: 1, fieldUint16: 2, fieldUint32: 4, fieldUint64: 8,
		fieldFloat32: 4, fieldFloat64: 8, fieldString: unsafe.Sizeof(""), fieldBytes: unsafe.Sizeof([]byte(nil)),
	}
	var check func(pl *plan)
	check = func(pl *plan) {
		for _, fs := range [][]planField{pl.fields, pl.embeds} {
			for _, f := range fs {
				sf := pl.t.FieldByIndex(f.index)
				off := uintptr(0)
				for i := range f.index {
					off += pl.t.FieldByIndex(f.index[:i+1]).Offset
				}
				if off != f.off || sf.Type != f.typ {
					t.Errorf("%v.%s: plan reads %v at %d, reflect has %v at %d", pl.t, f.name, f.typ, f.off, sf.Type, off)
				}
				if want, ok := sizes[f.kind]; ok && f.typ.Size() != want {
					t.Errorf("%v.%s: kind %d reads %d bytes of a %d-byte %v", pl.t, f.name, f.kind, want, f.typ.Size(), f.typ)
				}
				if f.off+f.typ.Size() > pl.t.Size() {
					t.Errorf("%v.%s: reads past the struct", pl.t, f.name)
				}
				if f.sub != nil {
					check(f.sub)
				}
			}
		}
	}
	for _, c := range planCases() {
		check(planOf(t, reflect.TypeOf(c.v).Elem()))
	}
	check(planOf(t, reflect.TypeFor[fuzzMsg]()))
	rapid.Check(t, func(rt *rapid.T) {
		if pl := newPlan(genDiffStruct(rt, 2)); pl != nil {
			check(pl)
		}
	})
}

// errorsAreUndecodable is what every decoder failure must be.
func errorsAreUndecodable(t *testing.T, body []byte, err error) {
	if err != nil && !errors.Is(err, ErrUndecodable) {
		t.Fatalf("%x: error %v is not ErrUndecodable", body, err)
	}
}

// A zero uint8 is written as msgpack writes it (cc 00) by every path the
// codec takes: a generated struct, a registered message with a plan, and
// a pointer to it. The random tests once found the codec writing cc 01.
func TestCodecWritesZeroUint8AsMsgpack(t *testing.T) {
	d := getBoundDecoder(nil)
	defer putBoundDecoder(d)
	gen := reflect.StructOf([]reflect.StructField{{Name: "F0", Type: reflect.TypeFor[uint8]()}})
	c := newCodec[any]()
	if probs := c.register("uint8", []any{reflect.Zero(gen).Interface(), planInts{}, &planInts{}}); len(probs) > 0 {
		t.Fatal(probs[0])
	}
	ints := planInts{I: -33, I8: -33, I16: -33, I32: -33, I64: -33}
	for _, m := range []any{reflect.Zero(gen).Interface(), ints, &ints} {
		if !checkDiff(t, c, d, m) {
			t.Errorf("%T took msgpack's path, not a plan", m)
		}
	}
}
