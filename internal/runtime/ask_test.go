package runtime

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/codec"
	"github.com/troupe-go/troupe/internal/host"
)

// An ask made in a handler with the handler's own Context ends at the
// deadline that Context reports, even when nothing cancels the Context:
// the ask the handler serves came from another node, whose cancel has
// not arrived.
func TestAskWithAHandlersContextEndsAtItsDeadline(t *testing.T) {
	h := host.New(host.Settings{})
	release := make(chan struct{})
	defer h.Close(context.Background())
	defer close(release) // before Close, which waits for the blocked handler
	stubborn := Define("stubborn", func(c *tctx[int, inlMsg], m inlMsg) error {
		<-release // ignores c
		Respond(c.Context, 0)
		return nil
	})
	sk := stubborn.Instantiate(h).(*kind[int, inlMsg, tctx[int, inlMsg]])
	h.Register(sk)
	type result struct {
		err     error
		elapsed time.Duration
	}
	inner := make(chan result, 1)
	relay := Define("relay", func(c *tctx[int, inlMsg], m inlMsg) error {
		t0 := time.Now()
		_, err := Ask[inlMsg, int](c.Context, sk.ref("s"), inlMsg{})
		inner <- result{err, time.Since(t0)}
		return nil
	})
	rk := relay.Instantiate(h).(*kind[int, inlMsg, tctx[int, inlMsg]])
	h.Register(rk)

	buf := codec.GetBuffer()
	defer codec.PutBuffer(buf)
	name, err := rk.def.Codec.EncodeTo(buf, inlMsg{})
	if err != nil {
		t.Fatal(err)
	}
	const d = 100 * time.Millisecond
	// Nobody withdraws it: its asker is another node that said nothing.
	in := host.Inbound{Key: "r", Name: name, Body: slices.Clone(buf.Bytes()), Deadline: time.Now().Add(d),
		Reply: host.ReplyFunc(func([]byte, error) {})}
	if _, err := rk.DeliverRemote(in); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-inner:
		if !errors.Is(r.err, context.DeadlineExceeded) {
			t.Fatalf("inner ask = %v, want an error matching context.DeadlineExceeded", r.err)
		}
	case <-time.After(d + 5*time.Second):
		t.Fatal("the inner ask did not end at the deadline its handler's Context reports")
	}
}
