package membership

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"slices"
	"testing"

	"github.com/troupe-go/troupe/ring"
	"pgregory.net/rapid"
)

var testAddrs = []string{"10.0.0.1:7400", "10.0.0.2:7400", "10.0.0.3:7400"}

func genID() *rapid.Generator[ring.NodeID] {
	return rapid.Custom(func(t *rapid.T) ring.NodeID {
		return ring.NodeID{
			Addr:        rapid.SampledFrom(testAddrs).Draw(t, "addr"),
			Incarnation: rapid.Uint64Range(1, 3).Draw(t, "pinc"),
		}
	})
}

func genMemberFor(id *rapid.Generator[ring.NodeID]) *rapid.Generator[Member] {
	return rapid.Custom(func(t *rapid.T) Member {
		m := Member{
			ID:          id.Draw(t, "id"),
			Incarnation: rapid.Uint64Range(0, 4).Draw(t, "minc"),
			Status:      Status(rapid.IntRange(0, int(StatusLeft)).Draw(t, "status")),
			ActorTypes:  rapid.SliceOfN(rapid.SampledFrom([]string{"cart", "counter", "user"}), 0, 3).Draw(t, "types"),
			Accusers:    rapid.SliceOfN(rapid.SampledFrom(testAddrs), 0, 3).Draw(t, "accusers"),
			Joining:     rapid.Bool().Draw(t, "joining"),
		}
		normalize(&m)
		return m
	})
}

func genSameID() *rapid.Generator[Member] {
	return genMemberFor(rapid.Just(ring.NodeID{Addr: "10.0.0.1:7400", Incarnation: 1}))
}

func TestMergeIsCommutative(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := genSameID().Draw(t, "a"), genSameID().Draw(t, "b")
		if ab, ba := Merge(a, b), Merge(b, a); !ab.Equal(ba) {
			t.Fatalf("expected Merge(a,b) == Merge(b,a); got %+v and %+v", ab, ba)
		}
	})
}

func TestMergeIsAssociative(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b, c := genSameID().Draw(t, "a"), genSameID().Draw(t, "b"), genSameID().Draw(t, "c")
		l, r := Merge(Merge(a, b), c), Merge(a, Merge(b, c))
		if !l.Equal(r) {
			t.Fatalf("expected (a+b)+c == a+(b+c); got %+v and %+v", l, r)
		}
	})
}

func TestMergeIsIdempotent(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := genSameID().Draw(t, "a"), genSameID().Draw(t, "b")
		if got := Merge(a, a); !got.Equal(a) {
			t.Fatalf("expected Merge(a,a) == a; got %+v for %+v", got, a)
		}
		ab := Merge(a, b)
		if got := Merge(ab, b); !got.Equal(ab) {
			t.Fatalf("expected merging b again to change nothing; got %+v, want %+v", got, ab)
		}
	})
}

func TestMergeKeepsHighestIncarnation(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := genSameID().Draw(t, "a"), genSameID().Draw(t, "b")
		if got := Merge(a, b).Incarnation; got != max(a.Incarnation, b.Incarnation) {
			t.Fatalf("expected incarnation %d, the highest of either record; got %d", max(a.Incarnation, b.Incarnation), got)
		}
	})
}

func TestMergeLeftOverridesAnyIncarnation(t *testing.T) {
	id := ring.NodeID{Addr: "a:1", Incarnation: 7}
	left := Member{ID: id, Incarnation: 1, Status: StatusLeft}
	alive := Member{ID: id, Incarnation: 9, Status: StatusAlive, ActorTypes: []string{"cart"}}
	got := Merge(alive, left)
	if got.Status != StatusLeft || got.Incarnation != 9 {
		t.Fatalf("expected left at incarnation 9 (left wins, highest incarnation kept); got %v", got)
	}
}

func TestStaleAliveDoesNotResurrectDead(t *testing.T) {
	id := ring.NodeID{Addr: "a:1", Incarnation: 7}
	dead := Member{ID: id, Incarnation: 4, Status: StatusDead}
	for inc := uint64(0); inc <= 4; inc++ {
		stale := Member{ID: id, Incarnation: inc, Status: StatusAlive}
		if got := Merge(dead, stale); got.Status != StatusDead {
			t.Fatalf("expected alive at incarnation %d to leave dead@4 dead; got %v", inc, got)
		}
	}
	refute := Member{ID: id, Incarnation: 5, Status: StatusAlive}
	if got := Merge(dead, refute); got.Status != StatusAlive {
		t.Fatalf("expected the member's own alive@5 to refute dead@4; got %v", got)
	}
}

func TestStatusPrecedenceAtEqualIncarnation(t *testing.T) {
	id := ring.NodeID{Addr: "a:1", Incarnation: 1}
	order := []Status{StatusAlive, StatusLeaving, StatusSuspect, StatusDead, StatusLeft}
	for i := range order {
		for j := range order {
			got := Merge(Member{ID: id, Incarnation: 3, Status: order[i]}, Member{ID: id, Incarnation: 3, Status: order[j]})
			if want := order[max(i, j)]; got.Status != want {
				t.Errorf("expected %v+%v at one incarnation to give %v; got %v", order[i], order[j], want, got.Status)
			}
		}
	}
}

func TestOlderProcessAtSameAddressIsMarkedLeft(t *testing.T) {
	for _, newFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("newer-first=%v", newFirst), func(t *testing.T) {
			old := Member{ID: ring.NodeID{Addr: "a:1", Incarnation: 1}, Incarnation: 3, Status: StatusAlive}
			cur := Member{ID: ring.NodeID{Addr: "a:1", Incarnation: 2}, Status: StatusAlive}
			tab := NewTable()
			if newFirst {
				tab.Apply(cur)
				tab.Apply(old)
			} else {
				tab.Apply(old)
				tab.Apply(cur)
			}
			if got, _ := tab.Get(old.ID); got.Status != StatusLeft {
				t.Fatalf("expected the older process to be left; got %v", got)
			}
			if got, _ := tab.Get(cur.ID); got.Status != StatusAlive {
				t.Fatalf("expected the newer process to stay alive; got %v", got)
			}
		})
	}
}

// TestAnyDeliveryOrderConvergesToOneTable applies the same records to
// tables in random orders, with duplicates, and expects identical tables.
func TestAnyDeliveryOrderConvergesToOneTable(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		recs := rapid.SliceOfN(genMemberFor(genID()), 1, 30).Draw(t, "records")
		want := tableOf(recs)
		for k := range 3 {
			perm := rapid.Permutation(recs).Draw(t, fmt.Sprintf("order%d", k))
			dups := rapid.SliceOfN(rapid.SampledFrom(recs), 0, 5).Draw(t, fmt.Sprintf("dups%d", k))
			got := tableOf(append(perm, dups...))
			if !slices.EqualFunc(want, got, Member.Equal) {
				t.Fatalf("expected one table for every delivery order;\nfirst: %v\nother: %v", want, got)
			}
		}
	})
}

func tableOf(recs []Member) []Member {
	tab := NewTable()
	for _, r := range recs {
		tab.Apply(r)
	}
	return tab.Records()
}

func TestMemberRoundTripsThroughMsgpack(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := genMemberFor(genID()).Draw(t, "m")
		b, err := EncodeMember(m)
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		got, err := DecodeMember(b)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if !got.Equal(m) {
			t.Fatalf("expected %+v after a round trip; got %+v", m, got)
		}
	})
}

func TestMessageRoundTripsThroughMsgpack(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := Message{
			Type:      MessageType(rapid.IntRange(1, int(msgTypeEnd)-1).Draw(t, "type")),
			From:      genID().Draw(t, "from"),
			Records:   rapid.SliceOfN(genMemberFor(genID()), 0, 5).Draw(t, "records"),
			Neighbour: rapid.Bool().Draw(t, "nb"),
			Priority:  rapid.Bool().Draw(t, "prio"),
			Accept:    rapid.Bool().Draw(t, "accept"),
		}
		b, err := EncodeMessage(m)
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		got, err := DecodeMessage(b)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		m.Version = FormatVersion
		if got.Type != m.Type || got.From != m.From || got.Neighbour != m.Neighbour || got.Priority != m.Priority ||
			got.Accept != m.Accept || !slices.EqualFunc(got.Records, m.Records, Member.Equal) {
			t.Fatalf("expected %+v after a round trip; got %+v", m, got)
		}
	})
}

func TestMemberEncodingUsesFieldNames(t *testing.T) {
	b, err := EncodeMember(Member{ID: ring.NodeID{Addr: "a:1", Incarnation: 2}, Status: StatusSuspect})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"id", "addr", "inc", "minc", "status"} {
		if !bytes.Contains(b, []byte(name)) {
			t.Errorf("expected the encoding to carry the field name %q; got %q", name, b)
		}
	}
}

// The bytes are pinned because every node of every version decodes them:
// a change to a field name or a type's encoding breaks mixed clusters.
func TestMessageEncodingIsPinned(t *testing.T) {
	m := Message{Type: MsgPing,
		From: ring.NodeID{Addr: "10.0.0.1:7400", Incarnation: 7},
		To:   ring.NodeID{Addr: "10.0.0.2:7400", Incarnation: 9},
		Records: []Member{{ID: ring.NodeID{Addr: "10.0.0.3:7400", Incarnation: 1 << 40}, Incarnation: 3, Status: StatusSuspect,
			ActorTypes: []string{"cart"}, Accusers: []string{"10.0.0.1:7400"}}}}
	b, err := EncodeMessage(m)
	if err != nil {
		t.Fatal(err)
	}
	const want = "85a176cc01a474797065cc03a466726f6d82a461646472ad31302e302e302e313a37343030a3696e63cf0000000000000007" +
		"a2746f82a461646472ad31302e302e302e323a37343030a3696e63cf0000000000000009" +
		"a77265636f7264739185a2696482a461646472ad31302e302e302e333a37343030a3696e63cf0000010000000000" +
		"a46d696e63cf0000000000000003a6737461747573cc02a5747970657391a463617274a8616363757365727391ad31302e302e302e313a37343030"
	if got := hex.EncodeToString(b); got != want {
		t.Errorf("expected the membership message encoding to stay\n%s\ngot\n%s", want, got)
	}
}

func TestDecodeRefusesNewerVersion(t *testing.T) {
	b, err := EncodeMessage(Message{Type: MsgPing, From: ring.NodeID{Addr: "a:1", Incarnation: 1}})
	if err != nil {
		t.Fatal(err)
	}
	// Re-encode with a version from the future.
	m, _ := DecodeMessage(b)
	m.Version = FormatVersion + 1
	raw, err := encodeRaw(m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeMessage(raw); !errorsIs(err, ErrUnsupportedVersion) {
		t.Fatalf("expected ErrUnsupportedVersion for version %d; got %v", FormatVersion+1, err)
	}
}

func TestDecodeRejectsUnknownStatus(t *testing.T) {
	b, err := EncodeMember(Member{ID: ring.NodeID{Addr: "a:1", Incarnation: 1}, Status: StatusLeft + 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeMember(b); !errorsIs(err, ErrMalformed) {
		t.Fatalf("expected ErrMalformed for an unknown status; got %v", err)
	}
}

func FuzzDecodeMessage(f *testing.F) {
	for _, m := range []Message{
		{Type: MsgPing, From: ring.NodeID{Addr: "a:1", Incarnation: 1}},
		{Type: MsgSync, From: ring.NodeID{Addr: "a:1", Incarnation: 1}, Records: []Member{
			{ID: ring.NodeID{Addr: "b:1", Incarnation: 2}, Incarnation: 3, Status: StatusSuspect, Accusers: []string{"a:1"}},
			{ID: ring.NodeID{Addr: "c:1", Incarnation: 2}, Status: StatusAlive, ActorTypes: []string{"cart"}},
		}},
	} {
		b, err := EncodeMessage(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMessage(b)
		if err != nil {
			return
		}
		again, err := EncodeMessage(m)
		if err != nil {
			t.Fatalf("expected a decoded message to encode again; got %v", err)
		}
		m2, err := DecodeMessage(again)
		if err != nil {
			t.Fatalf("expected a re-encoded message to decode; got %v", err)
		}
		if len(m2.Records) != len(m.Records) || m2.Type != m.Type || m2.From != m.From {
			t.Fatalf("expected a stable round trip; got %+v then %+v", m, m2)
		}
	})
}

func FuzzDecodeMember(f *testing.F) {
	b, err := EncodeMember(Member{ID: ring.NodeID{Addr: "a:1", Incarnation: 1}, Incarnation: 2, Status: StatusDead, Accusers: []string{"b:1", "c:1"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMember(b)
		if err != nil {
			return
		}
		if got := Merge(m, m); !got.Equal(m) {
			t.Fatalf("expected a decoded record to be normalized (Merge(m,m)==m); got %+v for %+v", got, m)
		}
	})
}
