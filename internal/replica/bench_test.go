package replica

import (
	"testing"

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
