package replica

import (
	"fmt"
	"slices"
	"testing"

	"github.com/troupe-go/troupe/ring"

	"github.com/troupe-go/troupe/replication"
)

// BenchmarkMajorityWrite measures the core's own cost of one write on a
// three-replica set at Majority: the owner's Write, every replica's
// accept and every answer, all delivered in memory (no encoding, no
// store).
func BenchmarkMajorityWrite(b *testing.B) {
	s := newSim(b, 3, replication.Majority, []Key{keyA})
	s.acquire(s.nodes[0], keyA)
	s.flush()
	n := s.nodes[0]
	value := make([]byte, 64)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := n.core.Write(keyA, stateSlot, value, false); err != nil {
			b.Fatal(err)
		}
		rd := n.core.Ready()
		s.net = append(s.net, rd.Messages...)
		for len(s.net) > 0 {
			m := s.net[0]
			s.net = s.net[1:]
			to := s.node(m.To)
			to.core.Step(m)
			s.net = append(s.net, to.core.Ready().Messages...)
		}
	}
}

// BenchmarkEncodeDecodeAccept measures one accept message of a 64-byte
// state through the binary format and back.
func BenchmarkEncodeDecodeAccept(b *testing.B) {
	m := sampleMessages()[2]
	m.Records[0].Value = make([]byte, 64)
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendEncode(buf[:0], m)
		if _, err := Decode(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMajorityWriteManyKeys is BenchmarkMajorityWrite over 10,000
// keys written in turn, as a loaded node sees them: the core's per-key
// maps no longer fit in cache, so each lookup costs a miss.
func BenchmarkMajorityWriteManyKeys(b *testing.B) {
	ids := []ring.NodeID{{Addr: "n0", Incarnation: 1}, {Addr: "n1", Incarnation: 1}, {Addr: "n2", Incarnation: 1}}
	cores := map[ring.NodeID]*Core{}
	for _, id := range ids {
		cores[id] = New(id, Counting)
	}
	var net []Message
	deliver := func() {
		for len(net) > 0 {
			m := net[0]
			net = net[1:]
			to := cores[m.To]
			to.Step(m)
			net = append(net, to.Ready().Messages...)
		}
	}
	owner := cores[ids[0]]
	keys := make([]Key, 10000)
	for i := range keys {
		keys[i] = Key{Type: "counter", ID: fmt.Sprintf("key-%d", i)}
		if err := owner.Acquire(keys[i], ids, replication.Majority); err != nil {
			b.Fatal(err)
		}
		net = append(net, owner.Ready().Messages...)
		deliver()
	}
	value := make([]byte, 64)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := owner.Write(keys[i%len(keys)], stateSlot, value, false); err != nil {
			b.Fatal(err)
		}
		i++
		net = append(net, owner.Ready().Messages...)
		deliver()
	}
}

// BenchmarkDelta64KiB measures what a delta adds to a write of a 64 KiB
// state of which 8 bytes changed: the owner's diff of the two values and
// one replica's application of the edit (which allocates the new value).
//
//	go test ./internal/replica -run X -bench Delta64KiB
func BenchmarkDelta64KiB(b *testing.B) {
	base := make([]byte, 64<<10)
	for i := range base {
		base[i] = byte(i * 31)
	}
	v := slices.Clone(base)
	copy(v[40000:], "changed!")
	var edit []byte
	b.SetBytes(int64(len(v)))
	b.ReportAllocs()
	for b.Loop() {
		var ok bool
		edit, ok = appendDelta(edit[:0], base, v, len(v)/2)
		if !ok {
			b.Fatal("no delta")
		}
		if _, err := applyDelta(base, edit); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(edit)), "edit-bytes")
}

// BenchmarkFence measures a source's answer to one fence of a range of
// 1/256 of the ring while it holds 10,000 keys: the scan for the highest
// term promised in the range, and the floor raised (to the same floor
// after the first, as a fence sent again is).
func BenchmarkFence(b *testing.B) {
	src := New(nodeB, Counting)
	for i := range 10000 {
		k := Key{Type: "counter", ID: fmt.Sprint(i)}
		src.Step(Message{Type: MsgPrepare, From: nodeA, To: nodeB, Key: k, Epoch: Epoch{Term: 3, Node: nodeA}})
	}
	src.Ready()
	rng := ring.Range{Start: 0, End: ring.Token(^uint64(0) / 256)}
	b.ReportAllocs()
	for b.Loop() {
		src.Step(Message{Type: MsgFence, From: nodeX, To: nodeB, Range: rng, Round: 1, Epoch: Epoch{Term: 4}})
		src.Ready()
	}
}
