package runtime

import (
	"testing"

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
