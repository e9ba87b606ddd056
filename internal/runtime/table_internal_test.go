package runtime

import (
	"fmt"
	"testing"
	"unsafe"

	"pgregory.net/rapid"
)

// TestCellTableMatchesAMap drives the table and a plain map with the same
// random puts and removes, including colliding hashes, and checks that
// every lookup agrees.
func TestCellTableMatchesAMap(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var tab cellTable[int, int, any]
		model := map[string]*cell[int, int, any]{}
		hashOf := func(key string) uint64 {
			// Few distinct hashes force long probe runs and wrap-around.
			return fixHash(uint64(len(key)*7919) % 13)
		}
		keys := rapid.SliceOfN(rapid.StringMatching(`[a-e]{0,6}`), 1, 40).Draw(rt, "keys")
		ops := rapid.SliceOfN(rapid.IntRange(0, 2*len(keys)-1), 1, 200).Draw(rt, "ops")
		for _, op := range ops {
			key := keys[op%len(keys)]
			h := hashOf(key)
			if op < len(keys) {
				if tab.get(h, key) == nil {
					c := &cell[int, int, any]{key: key}
					tab.put(h, c)
					model[key] = c
				}
			} else if c := model[key]; c != nil {
				if !tab.remove(h, c) {
					rt.Fatalf("remove(%q) found nothing", key)
				}
				delete(model, key)
			}
			if tab.n != len(model) {
				rt.Fatalf("table holds %d entries, model %d", tab.n, len(model))
			}
			for _, k := range keys {
				if got, want := tab.get(hashOf(k), k), model[k]; got != want {
					rt.Fatalf("get(%q) = %p, want %p", k, got, want)
				}
			}
		}
	})
}

func BenchmarkCellTableInsert(b *testing.B) {
	keys := make([]string, b.N)
	for i := range keys {
		keys[i] = fmt.Sprint("k", i)
	}
	var tab cellTable[int, int, any]
	b.ResetTimer()
	for i, k := range keys {
		tab.put(fixHash(uint64(i)*0x9e3779b97f4a7c15), &cell[int, int, any]{key: k})
	}
}

// TestCellTableReadersNeverSeeAWrongCell reads without the lock while a
// writer inserts, removes and resizes: a reader may miss a key, but never
// gets another key's cell.
func TestCellTableReadersNeverSeeAWrongCell(t *testing.T) {
	var tab cellTable[int, int, any]
	const keys = 512
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprint("key-", i)
	}
	hashOf := func(i int) uint64 { return fixHash(uint64(i%37) * 0x9e3779b97f4a7c15) } // collisions on purpose
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		cells := make([]*cell[int, int, any], keys)
		for round := 0; ; round++ {
			select {
			case <-stop:
				return
			default:
			}
			for i := range keys {
				if (i+round)%3 == 0 && cells[i] != nil {
					tab.remove(hashOf(i), cells[i])
					cells[i] = nil
				} else if cells[i] == nil {
					cells[i] = &cell[int, int, any]{key: names[i]}
					tab.put(hashOf(i), cells[i])
				}
			}
		}
	}()
	for range 200 {
		for i := range keys {
			if c := tab.get(hashOf(i), names[i]); c != nil && c.key != names[i] {
				t.Fatalf("get(%q) returned the cell of %q", names[i], c.key)
			}
		}
	}
	close(stop)
	<-done
}

// An idle actor's heap is mostly its cell: with an empty state it must
// stay in the 160-byte size class (the idle actor row of
// BENCHMARKS.md), or every idle actor grows by 16 B.
func TestCellSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(cell[struct{}, any, any]{}); n > 160 {
		t.Fatalf("cell is %d bytes, want <= 160", n)
	}
}
