package remote

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/host"
	"github.com/troupe-go/troupe/internal/runtime"
	"github.com/troupe-go/troupe/internal/transport"
	"github.com/troupe-go/troupe/ring"
)

// sendRecord is one envelope a recordingEndpoint passed on: its wire
// key, the key it follows (SendAfter), and the envelopes of its batch.
type sendRecord struct {
	key, after uint64
	follows    bool
	ctx        context.Context // Send's and SendAfter's
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

func (e *recordingEndpoint) note(ctx context.Context, st transport.StreamID, key, after uint64, follows bool, p []byte) {
	if st != transport.StreamApplication {
		return
	}
	rec := sendRecord{key: key, after: after, follows: follows, size: len(p), ctx: ctx}
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
	e.note(context.Background(), st, key, 0, false, p)
	return e.MemEndpoint.Post(to, st, key, p)
}

func (e *recordingEndpoint) Send(ctx context.Context, to ring.NodeID, st transport.StreamID, key uint64, p []byte) (*transport.Receipt, error) {
	e.note(ctx, st, key, 0, false, p)
	return e.MemEndpoint.Send(ctx, to, st, key, p)
}

func (e *recordingEndpoint) SendAfter(ctx context.Context, to ring.NodeID, st transport.StreamID, key, after uint64, p []byte) (*transport.Receipt, error) {
	e.note(ctx, st, key, after, true, p)
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

// recordOn starts members a and b, placing keys on both, with what the
// router of the member at addr sends recorded.
func recordOn(t *testing.T, net *transport.MemNetwork, addr string) (a, b *testNode, rec *recordingEndpoint) {
	t.Helper()
	ns := newTestNodesWith(t, net, func(ep *transport.MemEndpoint) transport.Endpoint {
		if ep.Self().Addr == addr {
			rec = &recordingEndpoint{MemEndpoint: ep}
			return rec
		}
		return ep
	}, "a:1", "b:1")
	a, b = ns[0], ns[1]
	a.setView(a, b)
	b.setView(a, b)
	return a, b, rec
}

// A large request whose asker stops waiting is taken off the link: the
// context it was sent with ends, and the transport drops what of it was
// not written.
func TestAWithdrawnLargeAskEndsTheSendOfItsRequest(t *testing.T) {
	net := transport.NewMemNetwork()
	a, b, rec := recordOn(t, net, "a:1")
	key := keyWhere(t, func(k string) bool { return ringOwner(a, b, "blob", k) == b.id })
	net.Partition("a:1", "b:1") // held on the way: never taken
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := actor.Ask(ctx, blob.Ref(a, key), blobEcho{Pad: noise(64 << 10)})
		done <- err
	}()
	var sent sendRecord
	pollUntil(t, "the request to be sent", func() bool {
		var ok bool
		sent, _, ok = rec.find(func(e *envelope) bool { return e.kind == kindAsk })
		return ok
	})
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the withdrawn ask was answered")
	}
	select {
	case <-sent.ctx.Done():
	default:
		t.Fatal("the request's send goes on after its asker stopped waiting; want its context ended, so the transport drops what was not written")
	}
	net.Heal("a:1", "b:1")
}

// A large reply on its way when the owner learns its ask was withdrawn is
// taken off the link: the context it was sent with ends, and the
// transport drops what of it was not written.
func TestAReplyOnItsWayWhenItsAskIsWithdrawnEndsItsSend(t *testing.T) {
	net := transport.NewMemNetwork()
	a, b, rec := recordOn(t, net, "b:1")
	gate := make(chan struct{})
	gated := actor.Define("gated", func(c *actor.Context[int, blobMsg], m blobMsg) error {
		if m, ok := m.(blobGet); ok {
			<-gate
			return actor.Respond(c, m, noise(m.Size))
		}
		return nil
	}).WithMessages(blobGet{})
	var ms []cluster.Member
	for _, n := range []*testNode{a, b} {
		n.h.Register(runtime.Instantiate(gated, n.h))
		ms = append(ms, cluster.Member{ID: n.id, Status: cluster.StatusAlive, ActorTypes: []string{"gated"}})
	}
	for _, n := range []*testNode{a, b} {
		n.r.Update(n.id, true, ms)
	}
	key := keyWhere(t, func(k string) bool { return ringOwner(a, b, "gated", k) == b.id })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := actor.Ask(ctx, gated.Ref(a, key), blobGet{Size: 64 << 10})
		done <- err
	}()
	pollUntil(t, "the handler to run", func() bool { return b.h.Kind("gated").(host.Mover).Active(key) })
	net.Partition("a:1", "b:1") // the reply is held on its way: never taken
	close(gate)
	var sent sendRecord
	var reply *envelope
	pollUntil(t, "the reply to be sent", func() bool {
		var ok bool
		sent, reply, ok = rec.find(func(e *envelope) bool { return e.kind == kindReply })
		return ok
	})
	// The asker's cancel, as it arrives.
	b.r.cancelServed(servedKey{from: a.id, id: reply.id})
	select {
	case <-sent.ctx.Done():
	default:
		t.Fatal("the reply's send goes on after the owner learned its ask was withdrawn; want its context ended, so the transport drops what was not written")
	}
	cancel()
	<-done
	net.Heal("a:1", "b:1")
}
