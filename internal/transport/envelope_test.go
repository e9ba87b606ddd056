package transport

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/troupe-go/troupe/ring"
)

type pingV1 struct {
	Seq  uint64 `msgpack:"seq"`
	From string `msgpack:"from"`
}

// pingV2 is pingV1 after a release added a field.
type pingV2 struct {
	Seq   uint64            `msgpack:"seq"`
	From  string            `msgpack:"from"`
	Extra map[string]string `msgpack:"extra"`
}

type other struct {
	N int `msgpack:"n"`
}

func registryWith[T any](t *testing.T, name string) *Registry {
	t.Helper()
	r := NewRegistry()
	if err := Register[T](r, name); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestEnvelopeRoundTripsAsAValueNotAPointer(t *testing.T) {
	r := registryWith[pingV1](t, "troupe.ping")
	for _, in := range []any{pingV1{Seq: 3, From: "a"}, &pingV1{Seq: 3, From: "a"}} {
		b, err := r.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		out, err := r.Unmarshal(b)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := out.(pingV1); !ok || got != (pingV1{Seq: 3, From: "a"}) {
			t.Fatalf("marshal %T: want pingV1 value back, got %T %+v", in, out, out)
		}
	}
}

func TestEnvelopeAddingAFieldIsCompatibleBothWays(t *testing.T) {
	old, nu := registryWith[pingV1](t, "troupe.ping"), registryWith[pingV2](t, "troupe.ping")
	b, _ := nu.Marshal(pingV2{Seq: 9, From: "b", Extra: map[string]string{"k": "v"}})
	got, err := Decode[pingV1](old, b)
	if err != nil || got != (pingV1{Seq: 9, From: "b"}) {
		t.Fatalf("old reader of new envelope: got %+v, %v", got, err)
	}
	b, _ = old.Marshal(pingV1{Seq: 4, From: "c"})
	got2, err := Decode[pingV2](nu, b)
	if err != nil || got2.Seq != 4 || got2.From != "c" || got2.Extra != nil {
		t.Fatalf("new reader of old envelope: got %+v, %v", got2, err)
	}
}

func TestEnvelopeCarriesTheStableNameNotTheGoName(t *testing.T) {
	r := registryWith[pingV1](t, "troupe.ping")
	b, _ := r.Marshal(pingV1{})
	if name, err := r.TypeName(b); err != nil || name != "troupe.ping" {
		t.Fatalf("want name troupe.ping, got %q, %v", name, err)
	}
}

func TestEnvelopeUnknownTypesFailExplicitly(t *testing.T) {
	r := registryWith[pingV1](t, "troupe.ping")
	if _, err := r.Marshal(other{}); !errors.Is(err, ErrUnknownType) {
		t.Fatalf("marshal of an unregistered type: want ErrUnknownType, got %v", err)
	}
	r2 := registryWith[other](t, "troupe.other")
	b, _ := r2.Marshal(other{N: 1})
	if _, err := r.Unmarshal(b); !errors.Is(err, ErrUnknownType) {
		t.Fatalf("unmarshal of an unregistered name: want ErrUnknownType, got %v", err)
	}
	if err := Register[other](r, "troupe.other"); err != nil {
		t.Fatal(err)
	}
	if _, err := Decode[pingV1](r, b); !errors.Is(err, ErrUnknownType) {
		t.Fatalf("Decode of another registered type: want ErrUnknownType, got %v", err)
	}
}

func TestRegisterRefusesDuplicatesAndNonStructs(t *testing.T) {
	r := registryWith[pingV1](t, "troupe.ping")
	if err := Register[other](r, "troupe.ping"); !errors.Is(err, ErrDuplicateType) {
		t.Errorf("same name twice: want ErrDuplicateType, got %v", err)
	}
	if err := Register[pingV1](r, "troupe.ping2"); !errors.Is(err, ErrDuplicateType) {
		t.Errorf("same type twice: want ErrDuplicateType, got %v", err)
	}
	if err := Register[int](r, "troupe.int"); err == nil {
		t.Errorf("a non-struct type must be refused")
	}
}

// FuzzEnvelope decodes arbitrary bytes: no panic, and whatever decodes
// re-encodes to an equal value.
func FuzzEnvelope(f *testing.F) {
	r := NewRegistry()
	_ = Register[pingV2](r, "troupe.ping")
	_ = Register[other](r, "troupe.other")
	b, _ := r.Marshal(pingV2{Seq: 1, From: "x", Extra: map[string]string{"a": "b"}})
	f.Add(b)
	b, _ = r.Marshal(other{N: -5})
	f.Add(b)
	f.Add([]byte{0x92, 0xa1, 'x', 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := r.Unmarshal(b)
		if err != nil {
			return
		}
		again, err := r.Marshal(v)
		if err != nil {
			t.Fatalf("decoded %T does not encode: %v", v, err)
		}
		v2, err := r.Unmarshal(again)
		if err != nil || !reflect.DeepEqual(v, v2) {
			t.Fatalf("envelope does not round-trip: %+v vs %+v (%v)", v, v2, err)
		}
	})
}

// Small envelopes in one frame share a slab (applyWholeLocked): each
// payload holds its own bytes, kept after its handler returned, and a
// handler appending to its payload copies instead of writing over the
// next envelope's.
func TestSmallPayloadsCutFromASlabStayApart(t *testing.T) {
	a, b := newTestNode(t, nil), newTestNode(t, nil)
	const n = 300 // more than a slab holds
	got := make(chan []byte, n)
	b.t.Handle(StreamApplication, HandlerFunc(func(_ ring.NodeID, p []byte) { got <- p }))
	want := func(i int) []byte {
		p := make([]byte, 1+i%slabMax)
		for j := range p {
			p[j] = byte(i + j)
		}
		return p
	}
	for i := range n {
		if _, err := a.t.Send(context.Background(), b.t.Self(), StreamApplication, 1, want(i)); err != nil {
			t.Fatal(err)
		}
	}
	var kept [][]byte
	for i := range n {
		select {
		case p := <-got:
			kept = append(kept, p)
		case <-time.After(10 * time.Second):
			t.Fatalf("envelope %d never arrived", i)
		}
	}
	for _, p := range kept {
		_ = append(p, 0xff, 0xff) // must not reach the next payload
	}
	for i, p := range kept {
		if !bytes.Equal(p, want(i)) {
			t.Fatalf("payload %d = %x, want %x", i, p, want(i))
		}
	}
}

// Envelopes sent with Post arrive as Send's do, in order per key, while
// their receipts serve again once credited; Shutdown waits for those
// still pending.
func TestPostedEnvelopesArriveInOrderAndShutdownWaitsForThem(t *testing.T) {
	a, b := newTestNode(t, nil), newTestNode(t, nil)
	const n = 2000
	got := make(chan []byte, n)
	b.t.Handle(StreamApplication, HandlerFunc(func(_ ring.NodeID, p []byte) { got <- p }))
	for i := range n {
		p := []byte{byte(i), byte(i >> 8)}
		if err := a.t.Post(b.t.Self(), StreamApplication, 1, p); err != nil {
			t.Fatal(err)
		}
		if i == n/2 {
			// Half of them credited meanwhile, their receipts reused.
			for j := range n/2 + 1 {
				select {
				case p := <-got:
					if int(p[0])|int(p[1])<<8 != j {
						t.Fatalf("envelope %d arrived as %d", j, int(p[0])|int(p[1])<<8)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("envelope %d never arrived", j)
				}
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := a.t.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	for j := n/2 + 1; j < n; j++ {
		select {
		case p := <-got:
			if int(p[0])|int(p[1])<<8 != j {
				t.Fatalf("envelope %d arrived as %d", j, int(p[0])|int(p[1])<<8)
			}
		default:
			t.Fatalf("envelope %d not delivered when Shutdown returned", j)
		}
	}
}
