package transport

import (
	"context"
	"errors"
	"github.com/troupe-go/troupe/internal/transport/flow"
	"testing"
	"time"

	"github.com/troupe-go/troupe/wire"
)

// A receipt makes its channel only when asked for it: one resolved
// before anybody asked still reports its outcome through Done, Err and
// Wait, and one asked for first is closed by the resolution. Only the
// first resolution counts.
func TestReceiptResolvesWhetherOrNotDoneWasAskedFor(t *testing.T) {
	boom := errors.New("boom")

	early := newReceipt()
	early.resolve(boom)
	early.resolve(nil)
	select {
	case <-early.Done():
	default:
		t.Fatal("Done of a receipt resolved before it was asked for is open")
	}
	if err := early.Err(); err != boom {
		t.Fatalf("Err = %v, want %v", err, boom)
	}
	if err := early.Wait(context.Background()); err != boom {
		t.Fatalf("Wait = %v, want %v", err, boom)
	}

	late := newReceipt()
	done := late.Done()
	if late.Err() != nil {
		t.Fatal("Err of an unresolved receipt is not nil")
	}
	select {
	case <-done:
		t.Fatal("Done of an unresolved receipt is closed")
	default:
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := late.Wait(ctx); err != context.Canceled {
		t.Fatalf("Wait with an ended context = %v, want %v", err, context.Canceled)
	}
	waited := make(chan error, 1)
	go func() { waited <- late.Wait(context.Background()) }()
	late.resolve(nil)
	late.resolve(boom)
	<-done
	if err := <-waited; err != nil {
		t.Fatalf("Wait = %v, want nil", err)
	}
	if late.Done() != done || late.Err() != nil {
		t.Fatal("a resolved receipt changed its channel or outcome")
	}
}

// An envelope that arrives in one frame is queued for its stream as a
// copy of the chunk (the frame buffer is reused), and one whose only
// frame is shorter than the envelope it announces is refused.
func TestAnEnvelopeInOneFrameIsCopiedAndMustBeWhole(t *testing.T) {
	s := connlessSession(t, wire.Config{ClusterName: "test"})
	h := Header{Version: ProtocolVersion, Type: FrameData, Flags: FlagFirst | FlagLast, Stream: StreamApplication}
	chunk := []byte("hello")
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.applyDataLocked(h, dataFrame{Envelope: 0, Total: 5}, chunk, time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	chunk[0] = 'j'
	if in := s.inbox[StreamApplication]; len(in) != 1 || string(in[0].payload) != "hello" || in[0].held != (flow.Held{Frame: 5, Envelope: 5}) {
		t.Fatalf("inbox %+v, want one delivery of %q holding 5 bytes", in, "hello")
	}
	err := s.applyDataLocked(h, dataFrame{Envelope: 1, Total: 9}, chunk, time.Now(), nil)
	if !errors.Is(err, ErrMalformedFrame) {
		t.Fatalf("a short single frame: %v, want %v", err, ErrMalformedFrame)
	}
}
