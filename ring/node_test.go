package ring

import "testing"

func TestNodeIDOrdersByAddressThenIncarnation(t *testing.T) {
	ids := []NodeID{{"a:1", 2}, {"a:1", 3}, {"b:1", 1}}
	for i := range ids {
		for j := range ids {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := ids[i].Compare(ids[j]); got != want {
				t.Errorf("expected %v.Compare(%v) = %d; got %d", ids[i], ids[j], want, got)
			}
		}
	}
}

func TestNodeIDZero(t *testing.T) {
	if !(NodeID{}).IsZero() {
		t.Error("expected the zero NodeID to report IsZero")
	}
	for _, id := range []NodeID{{Addr: "a:1"}, {Incarnation: 1}} {
		if id.IsZero() {
			t.Errorf("expected %v not to be zero", id)
		}
	}
}

func TestNodeIDStringIsAddrHashIncarnation(t *testing.T) {
	if got, want := (NodeID{"10.0.0.5:7400", 3}).String(), "10.0.0.5:7400#3"; got != want {
		t.Errorf("expected String = %q; got %q", want, got)
	}
}
