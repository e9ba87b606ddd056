package transport

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/faultnet"
	"github.com/troupe-go/troupe/ring"
	"github.com/troupe-go/troupe/wire"
)

// A member keeps a session per client only while the client may still
// use it: each restart of a client process is a new identity, so a
// session kept after its client left for good would pile up.

// sessionCount returns how many sessions tr holds.
func sessionCount(tr *Transport) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.sessions)
}

// hasSession reports whether tr holds a session for id.
func hasSession(tr *Transport, id ring.NodeID) bool {
	s, _ := tr.sessionFor(id, false)
	return s != nil
}

func TestSessionsOfClientsThatSaidGoodbyeAreForgotten(t *testing.T) {
	node := newTestNode(t, nil)
	const clients = 50
	for i := range clients {
		c, err := New(wire.Config{ClusterName: "test", Incarnation: uint64(1000 + i)})
		if err != nil {
			t.Fatal(err)
		}
		replies := make(chan []byte, 1)
		c.Handle(StreamApplication, HandlerFunc(func(_ ring.NodeID, p []byte) { replies <- p }))
		r, err := c.Send(context.Background(), node.t.Self(), StreamApplication, 1, []byte("ask"))
		if err != nil {
			t.Fatal(err)
		}
		if err := waitReceipt(t, r); err != nil {
			t.Fatalf("client %d's envelope: %v", i, err)
		}
		r, err = node.t.Send(context.Background(), c.Self(), StreamApplication, 1, []byte("reply"))
		if err != nil {
			t.Fatal(err)
		}
		if err := waitReceipt(t, r); err != nil {
			t.Fatalf("the reply to client %d: %v", i, err)
		}
		<-replies
		c.Close() // says goodbye
	}
	eventuallyf(t, func() bool { return sessionCount(node.t) == 0 }, func() string {
		return fmt.Sprintf("the node holds %d sessions after %d clients came and left: want 0", sessionCount(node.t), clients)
	})
	// A client that left is unknown: a send to it fails at once.
	gone := ring.NodeID{Incarnation: 1000}
	if _, err := node.t.Send(context.Background(), gone, StreamApplication, 1, []byte("late")); !errors.Is(err, wire.ErrPeerDead) {
		t.Fatalf("a send to a client that left: want wire.ErrPeerDead, got %v", err)
	}
}

func TestTheSessionOfAClientGonePastTheGraceIsForgottenAndAReturnStartsAfresh(t *testing.T) {
	fp := newFaultPair(t, 13, nil, keepalive(300*time.Millisecond))
	defer fp.close()
	node := fp.nodes[1]
	client := startFaultClient(t, fp, node, 78)
	before := sessionCount(node)
	// The client is cut off, without a goodbye: the node waits out the
	// resume grace, then forgets it.
	fp.fn.Partition("client", fp.addrs[1], faultnet.Refuse)
	fp.fn.CutAll()
	r, _ := node.Send(context.Background(), client.Self(), StreamApplication, 1, []byte("lost"))
	if err := waitReceipt(t, r); !errors.Is(err, wire.ErrPeerDead) {
		t.Fatalf("a client gone past the grace: want wire.ErrPeerDead, got %v", err)
	}
	// The client gives up on its side too, so that it comes back afresh
	// rather than with a session the node no longer holds.
	r, _ = client.Send(context.Background(), node.Self(), StreamApplication, 1, tagged(9, StreamApplication, 1, 1, 10))
	if err := waitReceipt(t, r); !errors.Is(err, wire.ErrPeerDead) {
		t.Fatalf("the client cut off past the grace: want wire.ErrPeerDead, got %v", err)
	}
	// The receipts fail a moment before the session goes, under its lock.
	eventuallyf(t, func() bool { return !hasSession(node, client.Self()) && sessionCount(node) == before-1 }, func() string {
		return fmt.Sprintf("the node holds %d sessions (%d before), the client's among them: %v; want the client's forgotten",
			sessionCount(node), before, hasSession(node, client.Self()))
	})
	// The same process comes back: its session starts afresh, both ways.
	fp.fn.Heal("client", fp.addrs[1])
	r, _ = client.Send(context.Background(), node.Self(), StreamApplication, 1, tagged(9, StreamApplication, 1, 2, 10))
	if err := waitReceipt(t, r); err != nil {
		t.Fatalf("the client's envelope after it came back: %v", err)
	}
	r, err := node.Send(context.Background(), client.Self(), StreamApplication, 1, []byte("welcome back"))
	if err != nil {
		t.Fatal(err)
	}
	if err := waitReceipt(t, r); err != nil {
		t.Fatalf("the reply to the client that came back: %v", err)
	}
}

func TestWhatWasQueuedForAClientWhoseFirstConnectionFailedFailsWhenItIsForgotten(t *testing.T) {
	node := newTestNode(t, nil)
	client := ring.NodeID{Incarnation: 77}
	// A session made for the client's first connection, which is being
	// accepted: a send to the client meanwhile is queued there.
	s, err := node.t.sessionFor(client, true)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.accepting++
	s.mu.Unlock()
	r, err := node.t.Send(context.Background(), client, StreamApplication, 1, []byte("reply"))
	if err != nil {
		t.Fatal(err)
	}
	// The connection's resume fails: nothing is left to keep.
	s.mu.Lock()
	s.accepting--
	s.forgetClientLocked()
	s.mu.Unlock()
	if hasSession(node.t, client) {
		t.Fatal("the session of a client whose first connection failed is still held: want it forgotten")
	}
	if err := waitReceipt(t, r); !errors.Is(err, wire.ErrPeerDead) {
		t.Fatalf("what was queued for the forgotten client: want wire.ErrPeerDead, got %v", err)
	}
}
