package continuity

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(s int) time.Time { return epoch.Add(time.Duration(s) * time.Second) }

// Past either bound the index gives up its oldest records first, and
// only as many as bring it back within both.
func TestAnIndexOverItsBoundsGivesUpItsOldestRecords(t *testing.T) {
	x := newIndex()
	x.add("c", at(3), at(100), 10)
	x.add("a", at(1), at(100), 10)
	x.add("b", at(2), at(100), 10)
	x.add("d", at(4), at(100), 10)
	if got := keys(x.over(Bounds{MaxRecords: 2, MaxBytes: 1000})); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("over 2 records: evicted %v, want the two oldest [a b]", got)
	}
	x.add("e", at(5), at(100), 25)
	if got := keys(x.over(Bounds{MaxRecords: 10, MaxBytes: 30})); !slices.Equal(got, []string{"c", "d"}) {
		t.Fatalf("over 30 bytes: evicted %v, want [c d], the oldest until 25 bytes are left", got)
	}
	if u := x.usage(); u != (Usage{Records: 1, Bytes: 25}) {
		t.Fatalf("usage %+v, want the one record of 25 bytes", u)
	}
}

// A forget of a record that ended at another time (an earlier record
// under the key, or a stale message) leaves the key's current record
// counted, and an older end does not replace a newer one.
func TestAnIndexCountsTheLatestRecordOfAKey(t *testing.T) {
	x := newIndex()
	x.add("k", at(2), at(100), 10)
	x.remove("k", at(1))
	x.add("k", at(1), at(100), 99)
	if u := x.usage(); u != (Usage{Records: 1, Bytes: 10}) {
		t.Fatalf("after a stale forget and a stale end: %+v, want the record that ended at 2 (10 bytes)", u)
	}
	x.add("k", at(3), at(100), 20)
	x.remove("k", at(3))
	if u := x.usage(); u != (Usage{}) {
		t.Fatalf("after the current record's forget: %+v, want nothing counted", u)
	}
}

// The heap-based index agrees with a naive model (a map scanned for its
// oldest entry) on every sequence of ends, forgets and bounds.
func TestAnIndexAgreesWithANaiveModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		type rec struct {
			ended, expires time.Time
			size           int64
		}
		x, model := newIndex(), map[string]rec{}
		for i := range rapid.IntRange(1, 200).Draw(t, "steps") {
			key := fmt.Sprint("k", rapid.IntRange(0, 15).Draw(t, "key"))
			ended := at(rapid.IntRange(0, 30).Draw(t, "ended"))
			switch rapid.IntRange(0, 3).Draw(t, "op") {
			case 0:
				size := int64(rapid.IntRange(1, 50).Draw(t, "size"))
				expires := ended.Add(time.Duration(rapid.IntRange(0, 30).Draw(t, "retain")) * time.Second)
				x.add(key, ended, expires, size)
				if old, ok := model[key]; !ok || !ended.Before(old.ended) {
					model[key] = rec{ended, expires, size}
				}
			case 3:
				now := at(rapid.IntRange(0, 60).Draw(t, "now"))
				var want []string
				for k, r := range model {
					if !r.expires.After(now) {
						want = append(want, k)
						delete(model, k)
					}
				}
				got := keys(x.expired(now))
				slices.Sort(got) // the order: checked by the next test
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Fatalf("step %d: expired at %v gave %v, the model %v", i, now, got, want)
				}
			case 1:
				x.remove(key, ended)
				if old, ok := model[key]; ok && old.ended.Equal(ended) {
					delete(model, key)
				}
			case 2:
				b := Bounds{MaxRecords: rapid.IntRange(1, 16).Draw(t, "max records"), MaxBytes: int64(rapid.IntRange(1, 400).Draw(t, "max bytes"))}
				var want []string
				for {
					var bytes int64
					oldest := ""
					for k, r := range model {
						bytes += r.size
						if o, ok := model[oldest]; !ok || r.ended.Before(o.ended) || (r.ended.Equal(o.ended) && k < oldest) {
							oldest = k
						}
					}
					if len(model) == 0 || (len(model) <= b.MaxRecords && bytes <= b.MaxBytes) {
						break
					}
					want = append(want, oldest)
					delete(model, oldest)
				}
				if got := keys(x.over(b)); !slices.Equal(got, want) {
					t.Fatalf("step %d: over %+v evicted %v, the model %v", i, b, got, want)
				}
			}
			var bytes int64
			for _, r := range model {
				bytes += r.size
			}
			if u := x.usage(); u != (Usage{Records: len(model), Bytes: bytes}) {
				t.Fatalf("step %d: usage %+v, the model %d records of %d bytes", i, u, len(model), bytes)
			}
		}
	})
}

// Records leave by the end of their retention, the earliest first,
// whatever order they ended in, and the next end is the timer's.
func TestAnIndexGivesUpTheRecordsPastTheirRetention(t *testing.T) {
	x := newIndex()
	x.add("long", at(1), at(50), 10)
	x.add("short", at(2), at(5), 10)
	x.add("mid", at(3), at(9), 10)
	if next, ok := x.nextExpiry(); !ok || !next.Equal(at(5)) {
		t.Fatalf("next expiry %v, %v; want %v", next, ok, at(5))
	}
	if got := keys(x.expired(at(4))); len(got) != 0 {
		t.Fatalf("expired at 4: %v, want none", got)
	}
	if got := keys(x.expired(at(9))); !slices.Equal(got, []string{"short", "mid"}) {
		t.Fatalf("expired at 9: %v, want [short mid]", got)
	}
	// An end of the key again moves its retention with it.
	x.add("long", at(4), at(6), 10)
	if got := keys(x.expired(at(10))); !slices.Equal(got, []string{"long"}) {
		t.Fatalf("expired at 10: %v, want [long]", got)
	}
	if _, ok := x.nextExpiry(); ok || x.usage() != (Usage{}) {
		t.Fatalf("an empty index: next expiry %v, usage %+v", ok, x.usage())
	}
}

func keys(es []entry) []string {
	out := make([]string, 0, len(es))
	for _, e := range es {
		out = append(out, e.key)
	}
	return out
}
