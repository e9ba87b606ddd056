package codec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/host"
	"github.com/vmihailenco/msgpack/v5"
	"pgregory.net/rapid"
)

// Plain struct types of the plan tests.
type (
	planInts struct {
		I   int
		I8  int8
		I16 int16
		I32 int32
		I64 int64
		U   uint
		U8  uint8
		U16 uint16
		U32 uint32
		U64 uint64
	}
	planBasics struct {
		B    bool
		F32  float32
		F64  float64
		S    string
		Raw  []byte
		Name myString
		Cnt  myInt
		Blob myBytes
	}
	myString string
	myInt    int16
	myBytes  []myByte
	myByte   byte

	planInner struct {
		A int
		B string
	}
	// planTags renames, skips and omits fields, and has unexported ones.
	planTags struct {
		Renamed int     `msgpack:"r"`
		Skipped string  `msgpack:"-"`
		OmitI   int     `msgpack:",omitempty"`
		OmitS   string  `msgpack:"os,omitempty"`
		OmitB   []byte  `msgpack:"ob,omitempty"`
		OmitF   float64 `msgpack:"of,omitempty"`
		hidden  int
		alsoHid string `msgpack:"h"`
		Kept    bool   `msgpack:" spaced , omitempty "`
		Dash    int    `msgpack:"a-b.c"`
		Last    uint8
		//lint:ignore U1000 the codec must skip it (reflection)
		unexpPair [2]int
	}
	// planNested has a nested struct, an inlined embedded one and the
	// Reply marker of requests.
	planNested struct {
		Reply[codecMsg, int]
		//lint:ignore U1000 an empty embedded struct, inlined by the codec
		planEmbedded
		Inner planInner
		Z     int
	}
	//lint:ignore U1000 embedded in planNested, seen by reflection only
	planEmbedded struct{}
	planInlined  struct {
		planInner // exported fields, through an unexported embedded type: not settable by msgpack
	}
	// planExportedEmbed is inlined: its fields come first.
	planExportedEmbed struct {
		PlanInnerE
		C int
	}
	PlanInnerE struct {
		A int
		B string
	}
	PlanOtherE struct{ A int }
	// planShadowed embeds a struct whose field A collides with its own:
	// msgpack encodes the embedded struct as a field of its own.
	planShadowed struct {
		A int
		PlanInnerE
	}
	planRef struct {
		To   Ref[codecMsg]
		From Ref[codecMsg]
		N    int
	}
	// planMixed has fields left to msgpack's reflection.
	planMixed struct {
		N     int
		M     map[string]int
		P     *planInner
		L     []planInner
		Any   any
		At    time.Time
		Arr   [3]byte
		Tags  []string
		After string
	}
)

type planCase struct {
	name string
	v    any // a pointer to the value
}

func planCases() []planCase {
	nan := math.NaN()
	return []planCase{
		{"zero ints", &planInts{}},
		{"small ints", &planInts{I: 1, I8: 2, I16: 3, I32: 4, I64: 5, U: 6, U8: 7, U16: 8, U32: 9, U64: 10}},
		{"negative ints", &planInts{I: -1, I8: -2, I16: -300, I32: -70000, I64: -1 << 40}},
		{"big ints", &planInts{I: math.MaxInt64, I8: math.MinInt8, I16: math.MaxInt16, I32: math.MinInt32, I64: math.MinInt64,
			U: math.MaxUint64, U8: math.MaxUint8, U16: math.MaxUint16, U32: math.MaxUint32, U64: math.MaxUint64}},
		{"int edges", &planInts{I: -32, I64: -33, U: 127}},
		{"int edges 2", &planInts{I: 128, I64: 256, U: 65536, U64: 1 << 32}},
		{"zero basics", &planBasics{}},
		{"basics", &planBasics{B: true, F32: 1.5, F64: -2.25, S: "hello", Raw: []byte{1, 2}, Name: "n", Cnt: -7, Blob: myBytes{9}}},
		{"nan", &planBasics{F32: float32(nan), F64: nan}},
		{"inf and -0", &planBasics{F32: float32(math.Inf(-1)), F64: math.Copysign(0, -1)}},
		{"empty not nil", &planBasics{Raw: []byte{}, Blob: myBytes{}}},
		{"long strings", &planBasics{S: strings.Repeat("x", 40), Raw: bytes.Repeat([]byte{7}, 300), Name: myString(strings.Repeat("y", 70000))}},
		{"str8", &planBasics{S: strings.Repeat("é", 100)}},
		{"tags zero", &planTags{}},
		{"tags", &planTags{Renamed: 1, Skipped: "no", OmitI: 2, OmitS: "s", OmitB: []byte{}, OmitF: nan, hidden: 3, alsoHid: "h", Kept: true, Dash: 4, Last: 5}},
		{"tags -0", &planTags{OmitF: math.Copysign(0, -1), OmitB: []byte{1}}},
		{"nested", &planNested{Inner: planInner{A: 1, B: "b"}, Z: 2}},
		{"exported embed", &planExportedEmbed{PlanInnerE: PlanInnerE{A: 1, B: "x"}, C: 2}},
		{"shadowed embed", &planShadowed{A: 1, PlanInnerE: PlanInnerE{A: 2, B: "y"}}},
		{"refs", &planRef{To: Ref[codecMsg]{typ: "t", key: "k"}, N: 3}},
		{"mixed zero", &planMixed{}},
		{"mixed", &planMixed{N: 1, M: map[string]int{"a": 1}, P: &planInner{A: 2}, L: []planInner{{A: 3}, {B: "c"}},
			Any: "s", At: time.Unix(1700000000, 5).UTC(), Arr: [3]byte{1, 2, 3}, Tags: []string{"x", ""}, After: "end"}},
	}
}

func planOf(t *testing.T, typ reflect.Type) *plan {
	t.Helper()
	pl := newPlan(typ)
	if pl == nil {
		t.Fatalf("%v has no plan", typ)
	}
	return pl
}

// planEncode encodes the struct v points to with pl.
func planEncode(pl *plan, v any) ([]byte, error) {
	b := getEncodeBuffer()
	defer putEncodeBuffer(b)
	out, err := pl.appendMessage(nil, reflect.ValueOf(v).UnsafePointer(), b)
	return bytes.Clone(out), err
}

// planDecode decodes body as a new value of pl's type, returning a
// pointer to it.
func planDecode(h *host.Host, pl *plan, body []byte) (any, error) {
	p := reflect.New(pl.t)
	d := getBoundDecoder(h)
	defer putBoundDecoder(d)
	err := d.decodePlan(pl, body, p.UnsafePointer())
	return p.Interface(), err
}

// fataler is what checkPlan needs of *testing.T and *rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// canonical encodes v with map keys sorted: two values are the same when
// their canonical bytes are (NaN included, nil and empty slices apart).
func canonical(t fataler, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetSortMapKeys(true)
	if err := enc.Encode(v); err != nil {
		t.Fatalf("canonical %T: %v", v, err)
	}
	return buf.Bytes()
}

// checkPlan checks that pl encodes the value v points to as msgpack does,
// and that either side decodes the other's bytes to the same value.
func checkPlan(t fataler, h *host.Host, pl *plan, v any) {
	t.Helper()
	want, err := msgpack.Marshal(reflect.ValueOf(v).Elem().Interface())
	if err != nil {
		t.Fatalf("msgpack encode %T: %v", v, err)
	}
	got, err := planEncode(pl, v)
	if err != nil {
		t.Fatalf("plan encode %T: %v", v, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%T %+v: plan encodes\n%x\nmsgpack\n%x", v, v, got, want)
	}
	byPlan, err := planDecode(h, pl, want)
	if err != nil {
		t.Fatalf("plan decode %T: %v", v, err)
	}
	byMsgpack := reflect.New(pl.t).Interface()
	if err := msgpack.Unmarshal(got, byMsgpack); err != nil {
		t.Fatalf("msgpack decode %T: %v", v, err)
	}
	// Unexported and skipped fields do not travel: compare with what
	// msgpack decodes.
	if a, b := canonical(t, byPlan), canonical(t, byMsgpack); !bytes.Equal(a, b) {
		t.Fatalf("%T: plan decodes %+v, msgpack %+v", v, byPlan, byMsgpack)
	}
	if !reflect.DeepEqual(byPlan, byMsgpack) && !hasNaN(reflect.ValueOf(v)) {
		t.Fatalf("%T: plan decodes %#v, msgpack %#v", v, byPlan, byMsgpack)
	}
}

// hasNaN reports whether a float in v is NaN (DeepEqual then fails).
func hasNaN(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Pointer:
		return !v.IsNil() && hasNaN(v.Elem())
	case reflect.Float32, reflect.Float64:
		return v.Float() != v.Float()
	case reflect.Struct:
		for i := range v.NumField() {
			if hasNaN(v.Field(i)) {
				return true
			}
		}
	}
	return false
}

// testHost is a host with no kinds, for refs to decode against.
func testHost(t testing.TB) *host.Host {
	h := host.New(host.Settings{})
	t.Cleanup(func() { h.Close(context.Background()) })
	return h
}

func TestPlanEncodesAsMsgpackAndDecodesEitherWay(t *testing.T) {
	h := testHost(t)
	for _, c := range planCases() {
		t.Run(c.name, func(t *testing.T) {
			checkPlan(t, h, planOf(t, reflect.TypeOf(c.v).Elem()), c.v)
		})
	}
}

// The field kinds a plan takes itself and those it leaves to msgpack.
func TestPlanFieldKinds(t *testing.T) {
	pl := planOf(t, reflect.TypeFor[planMixed]())
	var kinds []fieldKind
	for _, f := range pl.fields {
		kinds = append(kinds, f.kind)
	}
	want := []fieldKind{fieldInt, fieldReflect, fieldReflect, fieldReflect, fieldReflect, fieldReflect, fieldReflect, fieldReflect, fieldString}
	if !reflect.DeepEqual(kinds, want) {
		t.Errorf("planMixed field kinds %v, want %v", kinds, want)
	}
	pr := planOf(t, reflect.TypeFor[planRef]())
	if pr.fields[0].kind != fieldCustom || pr.fields[1].kind != fieldCustom {
		t.Errorf("Ref fields: kinds %v %v, want fieldCustom", pr.fields[0].kind, pr.fields[1].kind)
	}
	pn := planOf(t, reflect.TypeFor[planNested]())
	if len(pn.fields) != 2 || pn.fields[0].name != "Inner" || pn.fields[0].kind != fieldStruct {
		t.Errorf("planNested fields %+v, want Inner (a struct) and Z: Reply inlined, adding none", pn.fields)
	}
	ps := planOf(t, reflect.TypeFor[planShadowed]())
	if len(ps.fields) != 2 || ps.fields[1].name != "PlanInnerE" || ps.fields[1].kind != fieldStruct {
		t.Errorf("planShadowed fields %+v, want A and PlanInnerE as a struct", ps.fields)
	}
}

// Types that use what the plan does not follow keep msgpack's path.
func TestPlanLeavesOtherTypesToMsgpack(t *testing.T) {
	type (
		asArray struct {
			//lint:ignore U1000 msgpack's option, read by reflection
			_msgpack struct{} `msgpack:",as_array"`
			A        int
		}
		alias struct {
			A int `msgpack:"a,alias:b"`
		}
		inline struct {
			PlanInnerE `msgpack:",inline"`
		}
		omitStruct struct {
			In planInner `msgpack:",omitempty"`
		}
		omitRef struct {
			To Ref[codecMsg] `msgpack:",omitempty"`
		}
		duplicate struct {
			A int
			B int `msgpack:"A"`
		}
		embeddedPtr struct {
			*PlanInnerE
		}
		quoted struct {
			A int `msgpack:"'a'"`
		}
		notMsgpack struct {
			A chan int
		}
	)
	for _, v := range []any{asArray{}, alias{}, inline{}, omitStruct{}, omitRef{}, duplicate{}, embeddedPtr{}, quoted{},
		notMsgpack{}, planInlined{}, time.Time{}, customMsg{}, customPtr{}, customNone{}, 0, "s", []int{}} {
		if pl := newPlan(reflect.TypeOf(v)); pl != nil {
			t.Errorf("%T has a plan, want msgpack's path", v)
		}
	}
}

// A registered message type gets its plan unless it has its own codec,
// and the codec then encodes and decodes through it.
func TestCodecUsesPlansForPlainStructs(t *testing.T) {
	c := newTestCodec(t)
	for _, m := range []any{plainMsg{}, &plainPtr{}, emptyMsg{}, directMsg{}} {
		if c.names[reflect.TypeOf(m)].plan == nil {
			t.Errorf("%T: no plan", m)
		}
	}
	for _, m := range []any{customMsg{}, &customPtr{}, customNone{}} {
		if c.names[reflect.TypeOf(m)].plan != nil {
			t.Errorf("%T: a plan, want its own codec or msgpack's path", m)
		}
	}
	if newCodec[plainMsg]().self.plan == nil {
		t.Error("concrete plainMsg: no plan")
	}
	if newCodec[*plainPtr]().self.plan != nil {
		t.Error("concrete *plainPtr: a plan, want msgpack's nil rule")
	}
	d := getBoundDecoder(nil)
	defer putBoundDecoder(d)
	// A body msgpack wrote with fields in another order and an unknown
	// key still decodes.
	body, _ := msgpack.Marshal(map[string]any{"Other": []int{1, 2}, "N": 5})
	got, err := decodeWith[codecMsg](d, c, reflect.TypeFor[plainMsg]().String(), body)
	if err != nil || got != (plainMsg{N: 5}) {
		t.Errorf("reordered body: %#v, %v", got, err)
	}
	for _, body := range [][]byte{{0x81, 0xa1, 'N'}, {0x81, 0xa1, 'N', 0xa1, 'x'}, {0x92, 1, 2}, {0xa1, 'N'}, {0x81, 0xa2, 'N'}} {
		if _, err := decodeWith[codecMsg](d, c, reflect.TypeFor[plainMsg]().String(), body); !errors.Is(err, ErrUndecodable) {
			t.Errorf("malformed %x: %v, want ErrUndecodable", body, err)
		}
	}
	if got, err := decodeWith[codecMsg](d, c, reflect.TypeFor[plainMsg]().String(), []byte{0x91, 7}); err != nil || got != (plainMsg{N: 7}) {
		t.Errorf("array form: %#v, %v", got, err)
	}
}

// Refs inside a plan-decoded message are bound to the decoding system,
// as msgpack's path binds them.
func TestPlanBindsRefsToTheDecodingHost(t *testing.T) {
	h := testHost(t)
	pl := planOf(t, reflect.TypeFor[planBound]())
	body, err := planEncode(pl, &planBound{To: Ref[codecMsg]{typ: "inline", key: "k"}, N: 1})
	if err != nil {
		t.Fatal(err)
	}
	d := getBoundDecoder(h)
	defer putBoundDecoder(d)
	var got, want planBound
	if err := d.decodePlan(pl, body, reflect.ValueOf(&got).UnsafePointer()); err != nil {
		t.Fatal(err)
	}
	if err := decodeBound(h, body, &want); err != nil {
		t.Fatal(err)
	}
	if got.To.to == nil || got != want {
		t.Errorf("decoded %#v, want the bound ref of msgpack's path %#v", got, want)
	}
}

type planBound struct {
	To Ref[codecMsg]
	N  int
}

// Random values of the fixed types round-trip and match msgpack.
func TestPlanPropertyValues(t *testing.T) {
	for _, typ := range []reflect.Type{reflect.TypeFor[planInts](), reflect.TypeFor[planBasics](), reflect.TypeFor[planTags](),
		reflect.TypeFor[planNested](), reflect.TypeFor[planExportedEmbed](), reflect.TypeFor[planShadowed](), reflect.TypeFor[planMixed]()} {
		t.Run(typ.Name(), func(t *testing.T) {
			h := testHost(t)
			pl := planOf(t, typ)
			rapid.Check(t, func(rt *rapid.T) {
				v := reflect.New(typ)
				fill(rt, v.Elem(), "v")
				checkPlan(rt, h, pl, v.Interface())
			})
		})
	}
}

// Random struct types (fields of every kind the plan takes, tags,
// nested and embedded structs) and random values: where the type has a
// plan, it matches msgpack.
func TestPlanPropertyTypes(t *testing.T) {
	h := testHost(t)
	planned := 0
	rapid.Check(t, func(rt *rapid.T) {
		typ := genStruct(rt, 2)
		pl := newPlan(typ)
		if pl == nil {
			return
		}
		planned++
		for range 3 {
			v := reflect.New(typ)
			fill(rt, v.Elem(), "v")
			// Some types msgpack cannot read back (a name given twice in
			// a nested struct left to it): nothing to compare then.
			b, err := msgpack.Marshal(v.Interface())
			if err != nil || referenceUnmarshal(b, reflect.New(typ).Interface()) != nil {
				continue
			}
			checkPlan(rt, h, pl, v.Interface())
		}
	})
	if planned < 50 {
		t.Errorf("only %d generated types had a plan", planned)
	}
}

var leafTypes = []reflect.Type{
	reflect.TypeFor[bool](), reflect.TypeFor[int](), reflect.TypeFor[int8](), reflect.TypeFor[int16](), reflect.TypeFor[int32](),
	reflect.TypeFor[int64](), reflect.TypeFor[uint](), reflect.TypeFor[uint8](), reflect.TypeFor[uint16](), reflect.TypeFor[uint32](),
	reflect.TypeFor[uint64](), reflect.TypeFor[float32](), reflect.TypeFor[float64](), reflect.TypeFor[string](), reflect.TypeFor[[]byte](),
	reflect.TypeFor[myString](), reflect.TypeFor[myInt](), reflect.TypeFor[myBytes](), reflect.TypeFor[Ref[codecMsg]](),
	reflect.TypeFor[time.Duration](), reflect.TypeFor[[]int](), reflect.TypeFor[map[string]string](), reflect.TypeFor[*int](),
}

// embeddable are named struct types a generated struct may embed; none
// has methods, which StructOf does not promote reliably (Reply is
// embedded by the fixed types).
var embeddable = []reflect.Type{reflect.TypeFor[PlanInnerE](), reflect.TypeFor[PlanOtherE]()}

func genStruct(t *rapid.T, depth int) reflect.Type {
	n := rapid.IntRange(0, 8).Draw(t, "fields")
	var fields []reflect.StructField
	embedded := map[string]bool{}
	for i := range n {
		f := reflect.StructField{Name: fmt.Sprintf("F%d", i)}
		switch k := rapid.IntRange(0, 9).Draw(t, "kind"); {
		case k == 0 && depth > 0:
			f.Type = genStruct(t, depth-1)
		case k == 1:
			f.Type = rapid.SampledFrom(embeddable).Draw(t, "embed")
			f.Name, f.Anonymous = f.Type.Name(), true
			if embedded[f.Name] {
				continue // StructOf refuses a type embedded twice
			}
			embedded[f.Name] = true
		default:
			f.Type = rapid.SampledFrom(leafTypes).Draw(t, "leaf")
		}
		// Tag names are the field's own, or "A" (taken by the embeddable
		// types), to see embedded structs shadowed.
		tag := rapid.SampledFrom([]string{"", "", "", `msgpack:"-"`, `msgpack:",omitempty"`, `msgpack:"x%d"`, `msgpack:"x%d,omitempty"`, `msgpack:"A"`}).Draw(t, "tag")
		if strings.Contains(tag, "%d") {
			tag = fmt.Sprintf(tag, i)
		}
		f.Tag = reflect.StructTag(tag)
		fields = append(fields, f)
	}
	return reflect.StructOf(fields)
}

// fill sets v to a random value.
func fill(t *rapid.T, v reflect.Value, label string) {
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(rapid.Bool().Draw(t, label))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(rapid.OneOf(rapid.Int64(), rapid.Int64Range(-40, 300), rapid.SampledFrom([]int64{math.MinInt64, math.MaxInt64, -1 << 31, 1 << 31})).Draw(t, label))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(rapid.OneOf(rapid.Uint64(), rapid.Uint64Range(0, 300), rapid.SampledFrom([]uint64{math.MaxUint64, 1 << 32, 1 << 16})).Draw(t, label))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(rapid.OneOf(rapid.Float64(), rapid.SampledFrom([]float64{0, math.Copysign(0, -1), math.NaN(), math.Inf(1), 1e300})).Draw(t, label))
	case reflect.String:
		v.SetString(rapid.OneOf(rapid.String(), rapid.StringN(30, 300, -1)).Draw(t, label))
	case reflect.Slice:
		if rapid.IntRange(0, 4).Draw(t, label+" nil") == 0 {
			return
		}
		n := rapid.IntRange(0, 300).Draw(t, label+" len")
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			fill(t, s.Index(i), label)
		}
		v.Set(s)
	case reflect.Map:
		if rapid.Bool().Draw(t, label+" nil") {
			return
		}
		m := reflect.MakeMap(v.Type())
		// One key at most: msgpack writes a map's keys in random order.
		for range rapid.IntRange(0, 1).Draw(t, label+" len") {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fill(t, k, label)
			fill(t, e, label)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Pointer:
		if rapid.Bool().Draw(t, label+" nil") {
			return
		}
		p := reflect.New(v.Type().Elem())
		fill(t, p.Elem(), label)
		v.Set(p)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[Ref[codecMsg]]() {
			if rapid.Bool().Draw(t, label+" zero") {
				return
			}
			r := Ref[codecMsg]{typ: rapid.String().Draw(t, label+" type"), key: rapid.String().Draw(t, label+" key")}
			v.Set(reflect.ValueOf(r))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(t, v.Field(i), label+"."+v.Type().Field(i).Name)
			}
		}
	}
}

// fuzzMsg has a field of each kind the plan decodes, and some it leaves
// to msgpack.
type fuzzMsg struct {
	I   int
	I8  int8
	U16 uint16
	U64 uint64
	F32 float32
	F64 float64
	B   bool
	S   string `msgpack:"s,omitempty"`
	Raw []byte
	In  planInner
	To  Ref[codecMsg]
	// P is left to msgpack's reflection. (Not a map: msgpack makes a
	// map of the size the input claims, up to a million entries, which
	// stalls the fuzzer.)
	P *planInner
	PlanInnerE
}

// Malformed input gives an error, never a panic; what the plan decodes,
// msgpack decodes the same.
func FuzzPlanDecode(f *testing.F) {
	pl := newPlan(reflect.TypeFor[fuzzMsg]())
	if pl == nil {
		f.Fatal("fuzzMsg has no plan")
	}
	h := testHost(f)
	for _, v := range []fuzzMsg{{}, {I: -5, I8: 3, U16: 999, U64: math.MaxUint64, F32: 1.5, F64: math.NaN(), B: true, S: "s", Raw: []byte{1},
		In: planInner{A: 1, B: "b"}, To: Ref[codecMsg]{typ: "t", key: "k"}, P: &planInner{A: 3}, PlanInnerE: PlanInnerE{A: 2}}} {
		b, _ := msgpack.Marshal(v)
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte{0xc0})
	f.Add([]byte{0x90})
	f.Add([]byte{0x81, 0xa1, 'I', 0xcb})
	f.Add([]byte{0x81, 0xa3, 'R', 'a', 'w', 0xc6, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := planDecode(h, pl, body)
		if err != nil {
			return // an error, not a panic; decodeWith wraps it as ErrUndecodable
		}
		var want fuzzMsg
		if err := msgpack.Unmarshal(body, &want); err != nil {
			t.Fatalf("%x: the plan decodes %+v, msgpack fails: %v", body, got, err)
		}
		if a, b := canonical(t, got), canonical(t, &want); !bytes.Equal(a, b) {
			t.Fatalf("%x: the plan decodes %+v, msgpack %+v", body, got, want)
		}
	})
}

// Tells of types whose plan calls no other code are encoded straight
// into the batch, by the codec's type through host.Outbound.Enc; others
// bring their body.
func TestPurePlansEncodeIntoTheBatch(t *testing.T) {
	c := newTestCodec(t)
	for _, m := range []codecMsg{plainMsg{N: 5}, &plainPtr{S: "x"}, (*plainPtr)(nil), emptyMsg{}} {
		tn := c.appender(m)
		if tn == nil {
			t.Errorf("%T: not encoded into the batch", m)
			continue
		}
		_, want := encodeMsg(t, c, m)
		if got := (host.Outbound{Enc: tn, Msg: m}).Encoded().Body; !bytes.Equal(got, want) {
			t.Errorf("%T %v: appended %x, encodeTo %x", m, m, got, want)
		}
	}
	for _, m := range []codecMsg{customMsg{}, &customPtr{}, customNone{}, directMsg{}} {
		if c.appender(m) != nil {
			t.Errorf("%T: encoded into the batch, want its own body", m)
		}
	}
	for _, typ := range []reflect.Type{reflect.TypeFor[planRef](), reflect.TypeFor[planMixed](), reflect.TypeFor[planNested]()} {
		if pl := planOf(t, typ); pl.pure != (typ == reflect.TypeFor[planNested]()) {
			t.Errorf("%v: pure %v", typ, pl.pure)
		}
	}
}

// Unknown keys are skipped whatever their values hold, as msgpack skips
// them, and a hostile length under one fails without allocating it.
func TestPlanSkipsUnknownKeys(t *testing.T) {
	h := testHost(t)
	pl := planOf(t, reflect.TypeFor[planInner]())
	values := []any{nil, true, -1, 200, -200, 70000, -70000, 1 << 40, float32(1.5), 2.5, "s", strings.Repeat("x", 300),
		strings.Repeat("y", 70000), []byte{1}, bytes.Repeat([]byte{2}, 70000), []any{1, "a", []any{}}, make([]int, 20),
		map[string]any{"a": map[string]int{"b": 1}}, map[int]int{1: 2, 3: 4}, time.Unix(1, 0), time.Unix(1<<40, 5),
		msgpack.RawMessage{0xd4, 1, 2}, msgpack.RawMessage{0xd5, 1, 2, 3}, msgpack.RawMessage{0xd8, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
		msgpack.RawMessage{0xc7, 2, 9, 1, 2}, msgpack.RawMessage{0xc8, 0, 1, 9, 1}, msgpack.RawMessage{0xc9, 0, 0, 0, 1, 9, 1}}
	for _, v := range values {
		body, err := msgpack.Marshal(map[string]any{"A": 1, "unknown": v, "B": "b"})
		if err != nil {
			t.Fatal(err)
		}
		got, err := planDecode(h, pl, body)
		if err != nil || *got.(*planInner) != (planInner{A: 1, B: "b"}) {
			t.Errorf("with %T %v under an unknown key: %+v, %v", v, v, got, err)
		}
	}
	for _, body := range [][]byte{{0x81, 0xa1, 'x', 0xc6, 0x7f, 0xff, 0xff, 0xff}, {0x81, 0xa1, 'x', 0xdd, 0xff, 0xff, 0xff, 0xff, 0x01},
		{0x81, 0xa1, 'x', 0xdf, 0xff, 0xff, 0xff, 0xff}, {0x81, 0xa1, 'x', 0xc1}, {0x81, 0xa1, 'x', 0xc9, 0xff, 0xff, 0xff, 0xff, 1}} {
		if _, err := planDecode(h, pl, body); err == nil {
			t.Errorf("%x: no error", body)
		}
	}
}
