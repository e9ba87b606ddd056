package actor

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

// TestCellTableMatchesAMap drives the table and a plain map with the same
// random puts and removes, including colliding hashes, and checks that
// every lookup agrees.
func TestCellTableMatchesAMap(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var tab cellTable[int, int]
		model := map[string]*cell[int, int]{}
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
					c := &cell[int, int]{key: key}
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
	var tab cellTable[int, int]
	b.ResetTimer()
	for i, k := range keys {
		tab.put(fixHash(uint64(i)*0x9e3779b97f4a7c15), &cell[int, int]{key: k})
	}
}
