package remote

import (
	"bytes"
	"errors"
	"testing"

	"github.com/troupe-go/troupe/internal/fault"
)

// A stream of tells to one key takes the repeat fast path (decodeRepeat,
// tellAgain) after its first tell. The view can move between chunks of
// one segment: the tells decoded after it moved go where the new view
// says, not where the first tell went.
func TestRepeatedTellsFollowAViewChangeWithinASegment(t *testing.T) {
	ns := newTestNodes(t, "a:1", "b:1")
	a, b := ns[0], ns[1]
	a.setView(a)
	b.setView(a, b)
	key := keyWhere(t, func(k string) bool { return ownerIn(k, a, b) == b.id })
	tok := a.r.Token("counter", key)
	var prev tellHead
	var seg []byte
	const n = chunkItems + 40
	for range n {
		e := &envelope{kind: kindTell, typ: "counter", key: key, token: tok, name: "none", body: []byte{0x80}}
		seg = e.appendFramed(seg, &prev)
	}
	in := a.r.inboxFor(b.id)
	c := chunker{}
	rest := in.decode(seg, &c)
	if len(in.items) != chunkItems {
		t.Fatalf("first chunk: %d tells kept here, want %d (a owns every key in its view)", len(in.items), chunkItems)
	}
	if c.here == nil {
		t.Fatal("first chunk: expected the key remembered as served here")
	}
	in.release()
	// Now b owns the key: the rest of the segment, repeats all, must not
	// stay on a.
	a.setView(a, b)
	rest = in.decode(rest, &c)
	if len(rest) != 0 {
		t.Fatalf("%d bytes left undecoded", len(rest))
	}
	if len(in.items) != 0 {
		t.Fatalf("second chunk: %d tells kept on a after the key moved to b", len(in.items))
	}
	if c.here != nil {
		t.Fatal("second chunk: the key is still remembered as served here")
	}
	in.release()
}

// fixedBody is a message appender that encodes n bytes.
type fixedBody int

func (n fixedBody) AppendMessage(dst []byte, _ any) []byte {
	return append(dst, bytes.Repeat([]byte{0xc0}, int(n))...)
}

// A tell encoded straight into a batch meets the message limit by its
// body, as on every other path: a body of exactly the limit goes, one
// byte more fails with ErrMessageTooLarge and leaves the batch as it was.
func TestATellEncodedIntoTheBatchIsMeasuredByItsBody(t *testing.T) {
	ns := newTestNodes(t, "a:1", "b:1")
	a, b := ns[0], ns[1]
	const limit = 1000
	a.h.MaxMessage = limit
	o := a.r.outboxFor(b.id)
	o.running.Store(true) // no flusher: the lane keeps what is appended
	e := envelope{kind: kindTell, token: 1, typ: "counter", key: "k", name: "n"}
	if err := o.enqueueBody(1, &e, fixedBody(limit), nil, false, unsent{}); err != nil {
		t.Fatalf("a body of exactly the limit: %v", err)
	}
	l := &o.lanes[laneOf(1)]
	l.mu.Lock()
	before, prev := bytes.Clone(l.buf), l.prev
	l.mu.Unlock()
	e2 := envelope{kind: kindTell, token: 1, typ: "counter", key: "k", name: "n"}
	err := o.enqueueBody(1, &e2, fixedBody(limit+1), nil, false, unsent{})
	if !errors.Is(err, fault.ErrMessageTooLarge) {
		t.Fatalf("a body of the limit plus one: got %v, want ErrMessageTooLarge", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(before) == 0 || !bytes.Equal(l.buf, before) || l.prev != prev {
		t.Fatal("the refused tell changed the batch")
	}
}
