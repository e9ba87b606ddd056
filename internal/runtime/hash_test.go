package runtime

import (
	"fmt"
	"testing"

	"github.com/troupe-go/troupe/internal/codec"
	"github.com/troupe-go/troupe/internal/host"
)

// hMsg is a message whose encoding depends on map order and on what the
// codec makes of values typed any.
type hMsg interface{ hMsg() }

type hPay struct {
	To     string
	Amount int
	Tags   map[string]any
	Extra  any
}

type hNote struct{ Lines []string }

func (hPay) hMsg()  {}
func (hNote) hMsg() {}

// hashKind returns a durable kind of message type M over codec c, for
// hashing only.
func hashKind[M any](t *testing.T, c *codec.Codec) *kind[int, M, tctx[int, M]] {
	t.Helper()
	h := host.New(host.Settings{})
	t.Cleanup(func() { h.Close(t.Context()) })
	def := Define("h", func(*tctx[int, M], M) error { return nil })
	def.spec.Durable = true
	def.spec.Codec = c
	return def.Instantiate(h).(*kind[int, M, tctx[int, M]])
}

// A request asked on its owner and the same request decoded from the
// wire (asked from another member) must hash alike, or a retry from
// another member would conflict with its own first attempt: the trip
// through the codec that the hash takes changes nothing the second time.
func TestARequestHashesAlikeAskedHereOrFromAnotherMember(t *testing.T) {
	ic := codec.New[hMsg]()
	if probs := ic.Register("h", []any{hPay{}, hNote{}}); len(probs) > 0 {
		t.Fatal(probs)
	}
	ik := hashKind[hMsg](t, ic)
	cc := codec.New[hPay]()
	if probs := cc.Register("h", []any{hPay{}}); len(probs) > 0 {
		t.Fatal(probs)
	}
	ck := hashKind[hPay](t, cc)
	pays := []hPay{
		{To: "acct-1", Amount: 5},
		{To: "acct-1", Amount: 5, Tags: map[string]any{"z": 1, "a": "x", "m": []any{int64(2), "y"}, "b": map[string]any{"k": 3.5}}, Extra: uint8(7)},
		{To: "acct-2", Amount: -1, Extra: map[string]any{"q": 1, "c": 2}},
	}
	seen := map[requestSum]int{}
	for i, p := range pays {
		is := sameFromTheWire(t, ik, ic, hMsg(p))
		cs := sameFromTheWire(t, ck, cc, p)
		for _, s := range []requestSum{is, cs} {
			if j, ok := seen[s]; ok && j != i {
				t.Fatalf("request %d hashes like request %d", i, j)
			}
			seen[s] = i
		}
	}
	// Another message type with the same values is another request.
	n := sameFromTheWire(t, ik, ic, hMsg(hNote{Lines: []string{"acct-1"}}))
	if _, ok := seen[n]; ok {
		t.Fatal("a note hashes like a payment")
	}
}

// sameFromTheWire returns m's request hash on k, failing t unless m
// encoded by c and decoded again (as another member's ask arrives)
// hashes the same.
func sameFromTheWire[M any](t *testing.T, k *kind[int, M, tctx[int, M]], c *codec.Codec, m M) requestSum {
	t.Helper()
	cl := &cell[int, M, tctx[int, M]]{k: k}
	want, err := cl.requestHash(m)
	if err != nil {
		t.Fatal(err)
	}
	b := codec.GetBuffer()
	defer codec.PutBuffer(b)
	name, err := c.EncodeTo(b, any(m))
	if err != nil {
		t.Fatal(err)
	}
	d, err := codec.DecodeMessage[M](c, k.h, name, b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	got, err := cl.requestHash(d)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("%+v decoded from the wire hashes to %x, asked here to %x", m, got, want)
	}
	return want
}

// A request's hash is what earlier releases stored: a change to it would
// turn every retry of a request kept before an upgrade into a conflict.
func TestARequestsHashIsTheOneEarlierReleasesStored(t *testing.T) {
	c := codec.New[hMsg]()
	if probs := c.Register("h", []any{hPay{}, hNote{}}); len(probs) > 0 {
		t.Fatal(probs)
	}
	k := hashKind[hMsg](t, c)
	got, err := (&cell[int, hMsg, tctx[int, hMsg]]{k: k}).requestHash(hPay{To: "acct-1", Amount: 5, Tags: map[string]any{"b": 2, "a": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := "571c7d8c5d7ad6a2cce1826bb1cabb8b"; fmt.Sprintf("%x", got) != want {
		t.Fatalf("the request hashes to %x, want %s", got, want)
	}
}
