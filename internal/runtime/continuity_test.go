package runtime

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/codec"
	"github.com/troupe-go/troupe/internal/host"
)

// heldStore is a memStore whose writes after the first wait, each, until
// release gives way, saying on held that one waits.
type heldStore struct {
	*memStore
	n       atomic.Int32
	held    chan struct{}
	release chan struct{}
}

func (s *heldStore) Write(ctx context.Context, typ, key string, v []byte) error {
	if s.n.Add(1) > 1 {
		s.held <- struct{}{}
		<-s.release
	}
	return s.memStore.Write(ctx, typ, key, v)
}

type noteMsg interface{ noteMsg() }

// nAdd adds one, tells the actor itself a nNote, then answers the count.
type nAdd struct{}
type nNote struct{}

func (nAdd) noteMsg()  {}
func (nNote) noteMsg() {}

// A keyed ask's reply given after an output (which committed the state)
// leaves only once the record that keeps it is stored: were it to leave
// first, a crash before that write would let a retry run the handler
// again on the changed state.
func TestAKeyedReplyAfterAnOutputLeavesOnlyWithItsKeptAnswerStored(t *testing.T) {
	st := &heldStore{memStore: newMemStore(), held: make(chan struct{}, 4), release: make(chan struct{})}
	h := host.New(host.Settings{})
	h.Store = st
	t.Cleanup(func() { h.Close(context.Background()) })
	def := Define("n", func(c *tctx[int, noteMsg], m noteMsg) error {
		if _, ok := m.(nAdd); ok {
			c.Update(func(n int) int { return n + 1 })
			if err := c.Self().Tell(c.Context, nNote{}); err != nil {
				return err
			}
			Respond(c.Context, c.State())
		}
		return nil
	})
	def.spec.Durable = true
	def.spec.Codec = codec.New[noteMsg]()
	if probs := def.spec.Codec.Register("n", []any{nAdd{}, nNote{}}); len(probs) > 0 {
		t.Fatal(probs)
	}
	k := def.Instantiate(h).(*kind[int, noteMsg, tctx[int, noteMsg]])
	h.Register(k)
	out := askPay1(k)
	recv(t, st.held, "the write after the output's")
	select {
	case err := <-out:
		t.Fatalf("the keyed reply left (%v) while the write that keeps it waited", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(st.release)
	if err := recv(t, out, "the reply"); err != nil {
		t.Fatal(err)
	}
	v, _, _ := st.Read(context.Background(), "n", "a")
	_, _, kept, err := decodeRecord[int](nil, v)
	if err != nil || len(kept) != 1 || kept[0].key != "pay-1" || kept[0].kind != retainedReply {
		t.Fatalf("the stored record keeps %+v (%v), want the answer to pay-1", kept, err)
	}
}
