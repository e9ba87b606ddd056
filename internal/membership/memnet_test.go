package membership

import (
	"context"
	"testing"
	"time"

	"github.com/troupe-go/troupe/ring"
)

func ping(from string) Message {
	return Message{Type: MsgPing, From: ring.NodeID{Addr: from, Incarnation: 1}}
}

func TestMemNetworkDeliversAfterTheDelay(t *testing.T) {
	n := NewMemNetwork(MemOptions{MinDelay: 10 * time.Millisecond, MaxDelay: 10 * time.Millisecond})
	var got []time.Time
	n.Endpoint("b:1", func(string, Message) { got = append(got, n.Now()) })
	a := n.Endpoint("a:1", func(string, Message) {})
	start := n.Now()
	if err := a.Send(context.Background(), "b:1", ping("a:1")); err != nil {
		t.Fatal(err)
	}
	n.RunFor(time.Second)
	if len(got) != 1 || got[0].Sub(start) != 10*time.Millisecond {
		t.Fatalf("expected one delivery after 10ms; got %v", got)
	}
	if a.LastHeard("b:1") != (time.Time{}) {
		t.Fatal("expected a to have heard nothing from b")
	}
}

func TestMemNetworkPartitionDropsAcrossGroups(t *testing.T) {
	n := NewMemNetwork(MemOptions{})
	delivered := 0
	n.Endpoint("b:1", func(string, Message) { delivered++ })
	a := n.Endpoint("a:1", func(string, Message) {})
	n.Partition([]string{"a:1"}, []string{"b:1"})
	_ = a.Send(context.Background(), "b:1", ping("a:1"))
	n.RunFor(time.Second)
	if delivered != 0 {
		t.Fatal("expected no delivery across a partition")
	}
	n.Heal()
	_ = a.Send(context.Background(), "b:1", ping("a:1"))
	n.RunFor(time.Second)
	if delivered != 1 {
		t.Fatalf("expected delivery after healing; got %d", delivered)
	}
}

func TestMemNetworkPauseHoldsMessagesUntilResume(t *testing.T) {
	n := NewMemNetwork(MemOptions{})
	var order []string
	b := n.Endpoint("b:1", func(from string, m Message) { order = append(order, from) })
	a := n.Endpoint("a:1", func(string, Message) {})
	c := n.Endpoint("c:1", func(string, Message) {})
	b.Pause()
	_ = a.Send(context.Background(), "b:1", ping("a:1"))
	_ = c.Send(context.Background(), "b:1", ping("c:1"))
	n.RunFor(time.Second)
	if len(order) != 0 {
		t.Fatal("expected a paused endpoint to receive nothing")
	}
	b.Resume()
	n.RunFor(time.Millisecond)
	if len(order) != 2 || order[0] != "a:1" || order[1] != "c:1" {
		t.Fatalf("expected the held messages in arrival order after resume; got %v", order)
	}
	if b.LastHeard("a:1").IsZero() {
		t.Fatal("expected LastHeard to record the delivery")
	}
}

func TestMemNetworkClosedEndpointDrops(t *testing.T) {
	n := NewMemNetwork(MemOptions{})
	delivered := 0
	b := n.Endpoint("b:1", func(string, Message) { delivered++ })
	a := n.Endpoint("a:1", func(string, Message) {})
	b.Close()
	_ = a.Send(context.Background(), "b:1", ping("a:1"))
	n.RunFor(time.Second)
	if delivered != 0 || n.Stats().Dropped != 1 {
		t.Fatalf("expected the message to a closed endpoint dropped; delivered %d, stats %+v", delivered, n.Stats())
	}
}

func TestMemNetworkSendHonoursContext(t *testing.T) {
	n := NewMemNetwork(MemOptions{})
	a := n.Endpoint("a:1", func(string, Message) {})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.Send(ctx, "b:1", ping("a:1")); err == nil {
		t.Fatal("expected Send with a cancelled context to fail")
	}
}
