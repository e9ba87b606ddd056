package noderecord

import (
	"testing"

	"pgregory.net/rapid"
)

func TestDecideFollowsTheOrderingRule(t *testing.T) {
	stored := &Record{Incarnation: "a", Seq: 5}
	cases := []struct {
		name   string
		stored *Record
		update Record
		want   Decision
	}{
		{"no record", nil, Record{Incarnation: "a", Seq: 0}, Inserted},
		{"new incarnation, lower seq", stored, Record{Incarnation: "b", Seq: 0}, Restarted},
		{"new incarnation, higher seq", stored, Record{Incarnation: "b", Seq: 9}, Restarted},
		{"greater seq", stored, Record{Incarnation: "a", Seq: 6}, Advanced},
		{"same seq", stored, Record{Incarnation: "a", Seq: 5, Ready: true}, Duplicate},
		{"smaller seq", stored, Record{Incarnation: "a", Seq: 4}, Stale},
	}
	for _, c := range cases {
		got := Decide(c.stored, c.update)
		if got != c.want {
			t.Errorf("%s: Decide = %v, want %v", c.name, got, c.want)
		}
		if got.Accepted() != (c.want <= Advanced) {
			t.Errorf("%s: %v.Accepted() = %v", c.name, got, got.Accepted())
		}
	}
}

// Whatever order one incarnation's heartbeats arrive in, a store that
// applies Decide ends at the greatest sequence and accepts a strictly
// increasing subsequence: status never moves backward.
func TestDecideNeverMovesAnIncarnationBackward(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		seqs := rapid.SliceOfN(rapid.Uint64Range(0, 20), 1, 40).Draw(t, "seqs")
		var stored *Record
		var top uint64
		for _, s := range seqs {
			top = max(top, s)
			u := Record{Incarnation: "a", Seq: s}
			d := Decide(stored, u)
			if d.Accepted() {
				if stored != nil && s <= stored.Seq {
					t.Fatalf("accepted seq %d after %d", s, stored.Seq)
				}
				stored = &u
			}
		}
		if stored.Seq != top {
			t.Fatalf("ended at seq %d, want the greatest, %d", stored.Seq, top)
		}
	})
}
