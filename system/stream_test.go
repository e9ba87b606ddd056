package system_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
)

// A stream of tells to a key on another member arrives whole and in
// order, and what the handler keeps of each message stays as it was
// while later batches arrive: the receiver reuses the buffers of batches
// it handled, so a message that aliased one would change under the
// handler's feet.
type streamMsg interface{ streamMsg() }

type streamChunk struct {
	Seq  int
	Data []byte
	Text string
}

type streamCheck struct {
	actor.Reply[streamMsg, string]
}

func (streamChunk) streamMsg() {}
func (streamCheck) streamMsg() {}

// streamState keeps the count, the first problem seen, and every
// keepEvery-th message as it arrived.
type streamState struct {
	N       int
	Problem string
	Kept    []streamChunk
}

const keepEvery = 97

func streamData(seq int) ([]byte, string) {
	b := bytes.Repeat([]byte{byte(seq), byte(seq >> 8), byte(seq >> 16)}, 20)
	return b, fmt.Sprintf("chunk %d of the stream", seq)
}

var streamer = actor.Define("streamer", func(c *actor.Context[streamState, streamMsg], m streamMsg) error {
	switch m := m.(type) {
	case streamChunk:
		s := c.State()
		data, text := streamData(s.N)
		if s.Problem == "" && (m.Seq != s.N || !bytes.Equal(m.Data, data) || m.Text != text) {
			s.Problem = fmt.Sprintf("message %d arrived as seq %d, %d data bytes, text %q", s.N, m.Seq, len(m.Data), m.Text)
		}
		if m.Seq%keepEvery == 0 {
			s.Kept = append(slices.Clip(s.Kept), m)
		}
		s.N++
		c.SetState(s)
	case streamCheck:
		s := c.State()
		problem := s.Problem
		for _, k := range s.Kept {
			data, text := streamData(k.Seq)
			if problem == "" && (!bytes.Equal(k.Data, data) || k.Text != text) {
				problem = fmt.Sprintf("kept message %d changed after it arrived", k.Seq)
			}
		}
		return actor.Respond(c, m, fmt.Sprintf("%d %s", s.N, problem))
	}
	return nil
}, actor.WithMailbox(1<<16, actor.Wait)).WithMessages(streamChunk{}, streamCheck{})

func TestStreamOfTellsArrivesWholeWhileBatchBuffersAreReused(t *testing.T) {
	systems := startCluster(t, 2, streamer)
	key := keyPlacedOn(t, systems[0], systems[1], "streamer", "key-")
	// 200,000 tells and the check behind them take longer than
	// systemtest.Limit on a loaded machine under -race.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ref := streamer.Ref(systems[0], key)
	const n = 200_000 // some thousand batches of the transport's pooled size
	for i := range n {
		data, text := streamData(i)
		if err := ref.Tell(ctx, streamChunk{Seq: i, Data: data, Text: text}); err != nil {
			t.Fatalf("tell %d: %v", i, err)
		}
	}
	got, err := actor.Ask(ctx, ref, streamCheck{})
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%d ", n); got != want {
		t.Fatalf("got %q, want %q (count, then the first problem)", got, want)
	}
}
