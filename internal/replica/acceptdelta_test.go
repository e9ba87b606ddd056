package replica

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/troupe-go/troupe/replication"
	"github.com/troupe-go/troupe/ring"
)

// bigValue is a 4 KiB value of one byte's pattern with the bytes at the
// given offsets changed to 0xff.
func bigValue(at ...int) []byte {
	v := make([]byte, 4096)
	for i := range v {
		v[i] = byte(i)
	}
	for _, i := range at {
		v[i] = 0xff
	}
	return v
}

// deltaSim returns three nodes at Majority sending deltas from
// largeDeltaMin bytes on, node 0 serving keyA, whose state was written
// with bigValue() and acknowledged by every replica.
func deltaSim(t *testing.T) *sim {
	t.Helper()
	s := newSim(t, 3, replication.Majority, []Key{keyA})
	s.withLargeValues()
	serve(t, s, 0)
	writeValue(t, s, 0, bigValue())
	s.flush()
	return s
}

// writeValue writes v as keyA's state at node i and returns the ticket.
func writeValue(t *testing.T, s *sim, i int, v []byte) Ticket {
	t.Helper()
	n := s.nodes[i]
	tk, err := n.core.Write(keyA, stateSlot, v, false)
	if err != nil {
		t.Fatalf("write at %s: %v", n.id, err)
	}
	n.ops[tk] = &simOp{}
	s.apply(n)
	return tk
}

// sentTo returns the messages in flight to node i.
func sentTo(s *sim, i int) []Message {
	var out []Message
	for _, m := range s.net {
		if m.To == s.nodes[i].id {
			out = append(out, m)
		}
	}
	return out
}

// storesValue fails t unless every node stores v as keyA's state.
func storesValue(t *testing.T, s *sim, v []byte) {
	t.Helper()
	for _, n := range s.nodes {
		if r, ok := n.core.Stored(keyA, stateSlot); !ok || !bytes.Equal(r.Value, v) {
			t.Fatalf("%s stores %d bytes that differ from the %d written", n.id, len(r.Value), len(v))
		}
	}
}

func TestAWriteGoesAsADeltaToTheReplicasThatAcknowledgedItsBase(t *testing.T) {
	s := deltaSim(t)
	base, _ := s.nodes[0].core.Current(keyA, stateSlot)
	v := bigValue(100)
	tk := writeValue(t, s, 0, v)
	for i := 1; i <= 2; i++ {
		ms := sentTo(s, i)
		if len(ms) != 1 || ms[0].Type != MsgAcceptDelta {
			t.Fatalf("replica %d was sent %+v, want one delta accept", i, ms)
		}
		if m := ms[0]; m.Version != base.Version || len(m.Delta) > 16 || m.Records[0].Value != nil {
			t.Fatalf("replica %d got a delta of base %d with %d bytes of edit and %d of value; want base %d, at most 16 and none",
				i, m.Version, len(m.Delta), len(m.Records[0].Value), base.Version)
		}
	}
	s.flush()
	if !released(s, 0, tk) {
		t.Fatal("a write sent as deltas was not released once every replica answered")
	}
	storesValue(t, s, v)
}

func TestAWriteGoesWholeToAReplicaThatMissedItsBase(t *testing.T) {
	s := deltaSim(t)
	// Replica 2 misses the next write: it holds the first, not the
	// second, which becomes the base of the third.
	s.nodes[2].paused = true
	writeValue(t, s, 0, bigValue(100))
	s.flush()
	s.net = nil
	s.nodes[2].paused = false
	v := bigValue(100, 200)
	writeValue(t, s, 0, v)
	if ms := sentTo(s, 1); len(ms) != 1 || ms[0].Type != MsgAcceptDelta {
		t.Fatalf("replica 1, which holds the base, was sent %+v, want a delta accept", ms)
	}
	if ms := sentTo(s, 2); len(ms) != 1 || ms[0].Type != MsgAccept || !bytes.Equal(ms[0].Records[0].Value, v) {
		t.Fatalf("replica 2, which missed the base, was sent %+v, want the whole record", ms)
	}
	s.flush()
	storesValue(t, s, v)
}

func TestSmallValuesLargeChangesAndDeltasOffGoWhole(t *testing.T) {
	for _, tc := range []struct {
		what     string
		deltaMin int
		v        []byte
	}{
		{"deltas off", 0, bigValue(100)},
		{"a value below the threshold", largeDeltaMin, bigValue(100)[:largeDeltaMin-1]},
		{"an edit of half the value or more", largeDeltaMin, bytes.Repeat([]byte{7}, 4096)},
	} {
		t.Run(tc.what, func(t *testing.T) {
			s := deltaSim(t)
			s.nodes[0].core.SetDeltaMin(tc.deltaMin)
			writeValue(t, s, 0, tc.v)
			for _, m := range s.net {
				if m.Type != MsgAccept || !bytes.Equal(m.Records[0].Value, tc.v) {
					t.Fatalf("with %s a replica was sent %v, want the whole record", tc.what, m.Type)
				}
			}
			s.flush()
			storesValue(t, s, tc.v)
		})
	}
}

// A replica that lost the base it acknowledged (its store lost the record)
// answers the delta with a nack, and the owner sends the record whole at
// once, without waiting for a tick; also when the replica restarted
// receiving its ranges, whose answers count toward nothing.
func TestANackGetsTheRecordWholeAtOnce(t *testing.T) {
	for _, receiving := range []bool{false, true} {
		t.Run(fmt.Sprintf("receiving=%v", receiving), func(t *testing.T) {
			s := deltaSim(t)
			r := s.nodes[1]
			delete(r.stored, recordKey{keyA, stateSlot})
			if receiving {
				r.storedReceiving = []ring.Range{{}}
			}
			s.crash(r)
			v := bigValue(100)
			tk := writeValue(t, s, 0, v)
			if ms := sentTo(s, 1); len(ms) != 1 || ms[0].Type != MsgAcceptDelta {
				t.Fatalf("the replica that acknowledged the base was sent %+v, want a delta accept", ms)
			}
			s.deliver(slicesIndexTo(s, 1), false)
			nack := sentTo(s, 0)
			if len(nack) != 1 || nack[0].Type != MsgAcceptNack || nack[0].Counted == receiving {
				t.Fatalf("a replica without the base answered %+v, want a nack counted %v", nack, !receiving)
			}
			if _, ok := r.core.Stored(keyA, stateSlot); ok {
				t.Fatal("a replica without the base stored something from the delta")
			}
			s.deliver(slicesIndexTo(s, 0), false)
			if ms := sentTo(s, 1); len(ms) != 1 || ms[0].Type != MsgAccept || !bytes.Equal(ms[0].Records[0].Value, v) {
				t.Fatalf("after the nack the owner sent %+v, want the whole record at once", ms)
			}
			s.flush()
			if !released(s, 0, tk) {
				t.Fatal("the write was not released")
			}
			storesValue(t, s, v)
		})
	}
}

// slicesIndexTo returns the index of the first message in flight to node i.
func slicesIndexTo(s *sim, i int) int {
	for j, m := range s.net {
		if m.To == s.nodes[i].id {
			return j
		}
	}
	return -1
}

// A delta accept that is lost is sent again whole: a retransmission does
// not rely on what the replica acknowledged since.
func TestRetransmissionsSendTheRecordWhole(t *testing.T) {
	s := deltaSim(t)
	v := bigValue(100)
	tk := writeValue(t, s, 0, v)
	s.net = nil
	owner := s.nodes[0]
	s.tick(owner)
	s.tick(owner)
	if len(s.net) != 2 {
		t.Fatalf("two ticks after the write was lost the owner sent %d messages, want 2", len(s.net))
	}
	for _, m := range s.net {
		if m.Type != MsgAccept || !bytes.Equal(m.Records[0].Value, v) {
			t.Fatalf("a retransmission was a %v, want the whole record", m.Type)
		}
	}
	s.flush()
	if !released(s, 0, tk) {
		t.Fatal("the write was not released after its retransmission")
	}
	storesValue(t, s, v)
}

// A replica applies a delta only onto exactly its base (same epoch, same
// version, in the slot): otherwise, or when the edit does not apply, it
// nacks and stores nothing; a record it holds that is as new as the
// delta's covers it.
func TestAReplicaAppliesADeltaOnlyOntoItsExactBase(t *testing.T) {
	owner := ring.NodeID{Addr: "o", Incarnation: 1}
	e := Epoch{Term: 3, Node: owner}
	base := Record{Key: keyA, Kind: KindState, Epoch: e, Version: 4, Value: bigValue()}
	v := bigValue(7)
	edit, ok := appendDelta(nil, base.Value, v, len(v)/2)
	if !ok {
		t.Fatal("no delta for a one-byte change")
	}
	delta := Message{Type: MsgAcceptDelta, From: owner, Key: keyA, Epoch: e, Version: 4, Delta: edit,
		Records: []Record{{Kind: KindState, Epoch: e, Version: 6}}}
	for _, tc := range []struct {
		what   string
		held   []Record
		edit   []byte
		answer MsgType
		stored []byte
	}{
		{"the base", []Record{base}, edit, MsgAccepted, v},
		{"nothing", nil, edit, MsgAcceptNack, nil},
		{"another version of the epoch", []Record{{Key: keyA, Kind: KindState, Epoch: e, Version: 5, Value: base.Value}}, edit, MsgAcceptNack, base.Value},
		{"the base's version at an older epoch", []Record{{Key: keyA, Kind: KindState, Epoch: Epoch{Term: 2, Node: owner}, Version: 4, Value: base.Value}}, edit, MsgAcceptNack, base.Value},
		{"the base in another slot", []Record{{Key: keyA, Kind: KindContinuity, Name: "r", Epoch: e, Version: 4, Value: base.Value}}, edit, MsgAcceptNack, nil},
		{"the base, with an edit that does not apply", []Record{base}, []byte{0xff, 0x7f}, MsgAcceptNack, base.Value},
		{"the delta's record already", []Record{{Key: keyA, Kind: KindState, Epoch: e, Version: 6, Value: v}}, edit, MsgAccepted, v},
	} {
		t.Run(tc.what, func(t *testing.T) {
			c := New(ring.NodeID{Addr: "r", Incarnation: 1}, Counting)
			c.Restore(tc.held...)
			m := delta
			m.To, m.Delta = c.Self(), tc.edit
			c.Step(m)
			rd := c.Ready()
			var answers []Message
			for _, a := range rd.Messages {
				if a.Type != MsgRefuse {
					answers = append(answers, a)
				}
			}
			if len(answers) != 1 || answers[0].Type != tc.answer || answers[0].Version != 6 {
				t.Fatalf("holding %s the replica answered %+v, want %v of version 6", tc.what, rd.Messages, tc.answer)
			}
			r, _ := c.Stored(keyA, stateSlot)
			if !bytes.Equal(r.Value, tc.stored) {
				t.Fatalf("holding %s the replica stores %d bytes, want %d", tc.what, len(r.Value), len(tc.stored))
			}
			persisted := false
			for _, p := range rd.Persist {
				if p.Kind == KindState {
					persisted = true
					if p.Version != 6 || p.Epoch != e || !bytes.Equal(p.Value, v) {
						t.Fatalf("the replica persisted version %d at %v with %d bytes, want the whole record of version 6", p.Version, p.Epoch, len(p.Value))
					}
				}
			}
			if want := tc.what == "the base"; persisted != want {
				t.Fatalf("holding %s the replica persisted a record: %v, want %v", tc.what, persisted, want)
			}
		})
	}
}
