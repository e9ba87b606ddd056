package transport

import (
	"slices"
	"testing"
)

// A fifo keeps its entries in order across pushes, drops and the moves
// back to the start of its slice, and a queue of steady length stops
// growing its slice.
func TestFifoKeepsOrderAndReusesItsSlice(t *testing.T) {
	var q fifo[int]
	var want []int
	next := 0
	for round := range 2000 {
		for range 3 {
			q.push(next)
			want = append(want, next)
			next++
		}
		n := 3
		if round < 100 {
			n = 2 // grow to about a hundred entries first
		}
		q.drop(n)
		want = want[n:]
		if !slices.Equal(q.items(), want) || q.len() != len(want) {
			t.Fatalf("round %d: queue %v, want %v", round, q.items(), want)
		}
	}
	if c := cap(q.buf); c > 4*q.len() {
		t.Fatalf("capacity %d for %d entries: the slice kept growing", c, q.len())
	}
	q.drop(q.len())
	if q.len() != 0 || q.head != 0 {
		t.Fatalf("emptied queue: len %d head %d", q.len(), q.head)
	}
}
