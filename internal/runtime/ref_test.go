package runtime

import (
	"testing"
	"unsafe"

	"github.com/troupe-go/troupe/internal/codec"
)

// refMsg carries a ref, as messages that name other actors do.
type refMsg struct {
	To Ref[inlMsg]
	N  int
}

// A ref decoded from a message for a system is bound to that system's
// kind of its type, by the codec's plan as by msgpack's path.
func TestDecodedRefsAreBoundToTheReceivingSystem(t *testing.T) {
	f := newInlineFixture(t)
	c := codec.New[refMsg]()
	buf := codec.GetBuffer()
	defer codec.PutBuffer(buf)
	name, err := c.EncodeTo(buf, refMsg{To: MakeRef[inlMsg]("inline", "k"), N: 1})
	if err != nil {
		t.Fatal(err)
	}
	got, err := codec.DecodeMessage[refMsg](c, f.k.h, name, buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	want := RefOf(f.k.h, f.k.def, "k")
	if got.To != want || got.N != 1 {
		t.Errorf("decoded %#v, want the ref bound to the receiving system %#v", got, want)
	}
	unknown, err := codec.DecodeMessage[refMsg](c, f.k.h, name, mustEncode(t, c, refMsg{To: MakeRef[inlMsg]("elsewhere", "k")}))
	if err != nil {
		t.Fatal(err)
	}
	if unknown.To.to != nil {
		t.Errorf("a ref of a type the system does not host decoded bound: %#v", unknown.To)
	}
}

func mustEncode(t *testing.T, c *codec.Codec, m refMsg) []byte {
	t.Helper()
	buf := codec.GetBuffer()
	defer codec.PutBuffer(buf)
	if _, err := c.EncodeTo(buf, m); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// A Ref stays within four words: Go copies a larger struct through memory
// at every call that takes it by value (Tell's, Ask's), which cost a local
// tell 10 to 15 ns.
func TestRefIsFourWords(t *testing.T) {
	if n := unsafe.Sizeof(Ref[inlMsg]{}); n > 4*unsafe.Sizeof(uintptr(0)) {
		t.Errorf("Ref takes %d bytes, want at most four words", n)
	}
}

// An unbound ref keeps its type name in front of its key: the two must
// come apart as they went in, whatever bytes they hold.
func TestUnboundRefsKeepTheirTypeAndKeyApart(t *testing.T) {
	for _, c := range []struct{ typ, key string }{{"t", "k"}, {"", "k"}, {"t", ""}, {"", ""}, {"ab", "c"}, {"a", "bc"}, {"a/b", "/"}} {
		r := MakeRef[inlMsg](c.typ, c.key)
		if r.Type() != c.typ || r.Key() != c.key {
			t.Errorf("MakeRef(%q, %q) gives type %q, key %q", c.typ, c.key, r.Type(), r.Key())
		}
	}
	if MakeRef[inlMsg]("ab", "c") == MakeRef[inlMsg]("a", "bc") {
		t.Errorf("unbound refs of ab/c and a/bc compare equal")
	}
	if MakeRef[inlMsg]("", "") != (Ref[inlMsg]{}) {
		t.Errorf("the unbound ref of an empty type and key is not the zero Ref")
	}
}
