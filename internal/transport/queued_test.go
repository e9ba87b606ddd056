package transport

import (
	"testing"

	"github.com/troupe-go/troupe/internal/transport/flow"
)

// The queued table answers only for the handle it was given: a slot the
// scheduler reuses, under a new generation, is not the old receipt's.
func TestQueuedTableHandles(t *testing.T) {
	sched, err := flow.NewScheduler(flow.Config{
		MaxFrame: 1024,
		Streams:  []flow.StreamConfig{{ID: 0, Class: flow.ClassData, Window: 1 << 16}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var q queuedTable
	h1, err := sched.Enqueue(0, 1, make([]byte, 10))
	if err != nil {
		t.Fatal(err)
	}
	h2, err := sched.Enqueue(0, 2, make([]byte, 10))
	if err != nil {
		t.Fatal(err)
	}
	r1, r2 := &Receipt{}, &Receipt{}
	q.put(h1, r1)
	q.put(h2, r2)
	if q.n != 2 || q.get(h1) != r1 || q.get(h2) != r2 {
		t.Fatalf("n %d, get(h1) %p want %p, get(h2) %p want %p", q.n, q.get(h1), r1, q.get(h2), r2)
	}
	if sched.Cancel(h1) != flow.CancelDropped {
		t.Fatal("cancel of an unwritten envelope did not drop it")
	}
	q.remove(h1)
	q.remove(h1) // twice: no effect
	if q.n != 1 || q.get(h1) != nil {
		t.Fatalf("after remove: n %d, get(h1) %p", q.n, q.get(h1))
	}
	h3, err := sched.Enqueue(0, 3, make([]byte, 10)) // reuses h1's slot
	if err != nil {
		t.Fatal(err)
	}
	if h3.Slot() != h1.Slot() || h3 == h1 {
		t.Fatalf("h3 %v, h1 %v: want the same slot, another generation", h3, h1)
	}
	r3 := &Receipt{}
	q.put(h3, r3)
	if q.get(h1) != nil || q.get(h3) != r3 || q.n != 2 {
		t.Fatalf("get(h1) %p, get(h3) %p want %p, n %d", q.get(h1), q.get(h3), r3, q.n)
	}
	q.remove(h1) // stale handle: leaves h3's entry alone
	if q.get(h3) != r3 || q.n != 2 {
		t.Fatalf("a stale remove dropped the slot's new entry")
	}
	q.clear()
	if q.n != 0 || q.get(h2) != nil || q.get(h3) != nil {
		t.Fatal("clear left entries")
	}
}
