package remote

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/transport"
	"github.com/troupe-go/troupe/ring"
)

// sendRecord is one envelope a recordingEndpoint passed on: its wire
// key, the key it follows (SendAfter), and the envelopes of its batch.
type sendRecord struct {
	key, after uint64
	follows    bool
	envs       []envelope
	size       int
}

// recordingEndpoint records what the router sends on the application
// stream.
type recordingEndpoint struct {
	*transport.MemEndpoint
	mu    sync.Mutex
	sends []sendRecord
}

func (e *recordingEndpoint) note(st transport.StreamID, key, after uint64, follows bool, p []byte) {
	if st != transport.StreamApplication {
		return
	}
	rec := sendRecord{key: key, after: after, follows: follows, size: len(p)}
	splitBatch(p, func(b []byte) {
		if env, err := decodeEnvelope(b); err == nil {
			rec.envs = append(rec.envs, cloneEnvelope(&env))
		} else {
			rec.envs = append(rec.envs, envelope{kind: b[1]}) // a continued tell
		}
	})
	e.mu.Lock()
	e.sends = append(e.sends, rec)
	e.mu.Unlock()
}

func (e *recordingEndpoint) Post(to ring.NodeID, st transport.StreamID, key uint64, p []byte) error {
	e.note(st, key, 0, false, p)
	return e.MemEndpoint.Post(to, st, key, p)
}

func (e *recordingEndpoint) Send(ctx context.Context, to ring.NodeID, st transport.StreamID, key uint64, p []byte) (*transport.Receipt, error) {
	e.note(st, key, 0, false, p)
	return e.MemEndpoint.Send(ctx, to, st, key, p)
}

func (e *recordingEndpoint) SendAfter(ctx context.Context, to ring.NodeID, st transport.StreamID, key, after uint64, p []byte) (*transport.Receipt, error) {
	e.note(st, key, after, true, p)
	return e.MemEndpoint.SendAfter(ctx, to, st, key, after, p)
}

// find returns the send whose batch holds an envelope for which match
// holds, and that envelope.
func (e *recordingEndpoint) find(match func(*envelope) bool) (sendRecord, *envelope, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range e.sends {
		for i := range s.envs {
			if match(&s.envs[i]) {
				return s, &s.envs[i], true
			}
		}
	}
	return sendRecord{}, nil, false
}

// A message larger than a frame goes alone, under a wire key of its own
// key that follows its lane: the lane's later messages, to other keys, do
// not queue behind it, and the small messages to its key that follow it go
// under its key, so they arrive after it.
func TestALargeMessageGoesAloneAndOnlyItsKeysMessagesFollowIt(t *testing.T) {
	net := transport.NewMemNetwork()
	var rec *recordingEndpoint
	ns := newTestNodesWith(t, net, func(ep *transport.MemEndpoint) transport.Endpoint {
		if rec == nil {
			rec = &recordingEndpoint{MemEndpoint: ep}
			return rec
		}
		return ep
	}, "a:1", "b:1")
	a, b := ns[0], ns[1]
	a.setView(a, b)
	b.setView(a, b)
	large := keyWhere(t, func(k string) bool { return ringOwner(a, b, "blob", k) == b.id && a.r.Token("blob", k)%numLanes == 3 })
	small := keyWhere(t, func(k string) bool {
		return ringOwner(a, b, "counter", k) == b.id && a.r.Token("counter", k)%numLanes == 3
	})
	// Held on the way, the large tell's receipt stays open: its key's
	// next message must follow it.
	net.Partition("a:1", "b:1")
	if err := blob.Ref(a, large).Tell(ctxT(t), blobPut{N: 1, Pad: make([]byte, 64<<10)}); err != nil {
		t.Fatal(err)
	}
	if err := blob.Ref(a, large).Tell(ctxT(t), blobPut{N: 2}); err != nil {
		t.Fatal(err)
	}
	if err := counter.Ref(a, small).Tell(ctxT(t), add{N: 5}); err != nil {
		t.Fatal(err)
	}
	asked := make(chan error, 1)
	go func() {
		got, err := actor.Ask(ctxT(t), counter.Ref(a, small), get{})
		if err == nil && got != 5 {
			t.Errorf("counter %s = %d, want 5", small, got)
		}
		asked <- err
	}()
	pollUntil(t, "the ask to be sent", func() bool {
		_, _, ok := rec.find(func(e *envelope) bool { return e.kind == kindAsk })
		return ok
	})
	lane := uint64(3 + 1)
	bigSend, _, ok := rec.find(func(e *envelope) bool { return len(e.body) > 60<<10 })
	switch {
	case !ok:
		t.Fatal("the large tell was not sent")
	case len(bigSend.envs) != 1:
		t.Fatalf("the large tell went in a batch of %d envelopes; want it alone", len(bigSend.envs))
	case bigSend.key == lane || !bigSend.follows || bigSend.after != lane:
		t.Fatalf("the large tell went under wire key %d (following %v key %d); want a key of its own that follows its lane's key %d", bigSend.key, bigSend.follows, bigSend.after, lane)
	}
	next, _, ok := rec.find(func(e *envelope) bool { return e.typ == "blob" && len(e.body) < 100 && e.kind == kindTell })
	if !ok || next.key != bigSend.key {
		t.Fatalf("the small tell to the large one's key went under wire key %d (found %v); want %d, behind the large one", next.key, ok, bigSend.key)
	}
	for _, kind := range []uint8{kindTell, kindAsk} {
		s, _, ok := rec.find(func(e *envelope) bool { return e.typ == "counter" && e.kind == kind })
		if !ok || s.key == bigSend.key || s.size > 1<<10 {
			t.Fatalf("a small envelope (kind %d) to another key of the lane went under wire key %d in %d bytes; want its lane's key, away from the large one (%d)", kind, s.key, s.size, bigSend.key)
		}
	}
	net.Heal("a:1", "b:1")
	if err := <-asked; err != nil {
		t.Fatal(err)
	}
	got, err := actor.Ask(ctxT(t), blob.Ref(a, large), blobList{})
	if err != nil || !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("blob %s saw %v (%v); want [1 2]: the small tell after the large one", large, got, err)
	}
}

// ringOwner returns the owner of typ/key in a ring of the members.
func ringOwner(a, b *testNode, typ, key string) ring.NodeID {
	o, _ := ring.New([]ring.NodeID{a.id, b.id}).Owner(ring.KeyToken(typ, key), 2, nil)
	return o
}
