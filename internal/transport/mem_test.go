package transport

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/troupe-go/troupe/ring"
	"github.com/troupe-go/troupe/wire"
)

type memRecorder struct {
	mu  sync.Mutex
	got []string
}

func (m *memRecorder) handler() Handler {
	return HandlerFunc(func(_ ring.NodeID, p []byte) {
		m.mu.Lock()
		m.got = append(m.got, string(p))
		m.mu.Unlock()
	})
}

func (m *memRecorder) list() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.got...)
}

func joinMem(t *testing.T, n *MemNetwork, addr string, inc uint64) (*MemEndpoint, *memRecorder) {
	t.Helper()
	e, err := n.Join(ring.NodeID{Addr: addr, Incarnation: inc})
	if err != nil {
		t.Fatal(err)
	}
	rec := &memRecorder{}
	e.Handle(StreamApplication, rec.handler())
	t.Cleanup(func() { e.Close() })
	return e, rec
}

func TestMemDeliversInOrderAndResolvesReceiptsAfterTheHandler(t *testing.T) {
	n := NewMemNetwork()
	a, _ := joinMem(t, n, "a:1", 1)
	b, rec := joinMem(t, n, "b:1", 1)
	var last *Receipt
	for i := range 50 {
		last, _ = a.Send(context.Background(), b.Self(), StreamApplication, 1, []byte(fmt.Sprint(i)))
	}
	if err := waitReceipt(t, last); err != nil {
		t.Fatal(err)
	}
	got := rec.list()
	if len(got) != 50 {
		t.Fatalf("got %d envelopes, want 50", len(got))
	}
	for i, s := range got {
		if s != fmt.Sprint(i) {
			t.Fatalf("envelope %d is %q", i, s)
		}
	}
}

func TestMemPartitionHoldsTrafficUntilHealed(t *testing.T) {
	n := NewMemNetwork()
	a, _ := joinMem(t, n, "a:1", 1)
	b, rec := joinMem(t, n, "b:1", 1)
	n.Partition("a:1", "b:1")
	r1, _ := a.Send(context.Background(), b.Self(), StreamApplication, 1, []byte("1"))
	r2, _ := a.Send(context.Background(), b.Self(), StreamApplication, 1, []byte("2"))
	if r1.Err() != nil || len(rec.list()) != 0 {
		t.Fatalf("traffic crossed a partition")
	}
	n.Heal("a:1", "b:1")
	waitReceipt(t, r1)
	if err := waitReceipt(t, r2); err != nil {
		t.Fatal(err)
	}
	if got := rec.list(); len(got) != 2 || got[0] != "1" || got[1] != "2" {
		t.Fatalf("after heal got %v, want [1 2]", got)
	}
}

func TestMemSendsHeldForARestartedPeerFail(t *testing.T) {
	n := NewMemNetwork()
	a, _ := joinMem(t, n, "a:1", 1)
	b, _ := joinMem(t, n, "b:1", 1)
	r, _ := a.Send(context.Background(), b.Self(), StreamApplication, 1, []byte("first"))
	waitReceipt(t, r)
	b.Close()
	held, _ := a.Send(context.Background(), b.Self(), StreamApplication, 1, []byte("lost"))
	joinMem(t, n, "b:1", 2)
	if err := waitReceipt(t, held); !errors.Is(err, wire.ErrPeerRestarted) {
		t.Fatalf("want wire.ErrPeerRestarted, got %v", err)
	}
	r, _ = a.Send(context.Background(), ring.NodeID{Addr: "b:1"}, StreamApplication, 1, []byte("new"))
	if err := waitReceipt(t, r); err != nil {
		t.Fatalf("a send to the new incarnation: %v", err)
	}
}

func TestMemPeerDeadFailsHeldSends(t *testing.T) {
	n := NewMemNetwork()
	a, _ := joinMem(t, n, "a:1", 1)
	b, _ := joinMem(t, n, "b:1", 1)
	n.Partition("a:1", "b:1")
	r, _ := a.Send(context.Background(), b.Self(), StreamApplication, 1, []byte("x"))
	a.PeerDead(b.Self())
	if err := waitReceipt(t, r); !errors.Is(err, wire.ErrPeerDead) {
		t.Fatalf("want wire.ErrPeerDead, got %v", err)
	}
}

func TestMemReportsSuspectWhilePartitionedAndUpAfterHeal(t *testing.T) {
	n := NewMemNetwork()
	a, _ := joinMem(t, n, "a:1", 1)
	b, _ := joinMem(t, n, "b:1", 1)
	var mu sync.Mutex
	var evs []PeerEvent
	a.OnPeerEvent(func(e PeerEvent) {
		mu.Lock()
		evs = append(evs, e)
		mu.Unlock()
	})
	r, _ := a.Send(context.Background(), b.Self(), StreamApplication, 1, []byte("1"))
	waitReceipt(t, r)
	n.Partition("a:1", "b:1")
	a.Send(context.Background(), b.Self(), StreamApplication, 1, []byte("2"))
	n.Heal("a:1", "b:1")
	a.Send(context.Background(), b.Self(), StreamApplication, 1, []byte("3"))
	mu.Lock()
	defer mu.Unlock()
	if len(evs) != 3 || !evs[0].Up || !evs[1].Suspect || !evs[2].Up {
		t.Fatalf("want up, suspect, up; got %+v", evs)
	}
}
