package transport

import (
	"bytes"
	"testing"

	"github.com/troupe-go/troupe/wire"
)

// A connection that a resume superseded may still be reading a chunk into
// the spare bytes of an envelope's buffer, outside the session's lock,
// when the resumed connection is sent that chunk again: the two must not
// be given the same bytes, or the old reader's late write lands in the
// buffer the envelope is delivered (and later pooled) in. The resumed
// one gets a buffer of its own holding what the envelope had; a chunk
// read to its end frees the envelope for the next connection's chunks
// in place.
func TestAChunkTargetIsNeverSharedWithASupersededReader(t *testing.T) {
	lim := wire.Limits{MaxFrame: wire.DefaultMaxFrame, MaxMessage: wire.DefaultMaxMessage}
	s := &session{t: &Transport{cfg: wire.Config{Limits: lim}, bufs: newBufPool(classSize(lim.MaxMessage), 1<<20)}}
	const st = StreamApplication
	s.started[st] = -1 // nothing started yet
	first := Header{Type: FrameData, Stream: st, Flags: FlagFirst}
	p, dst := s.chunkTargetLocked(first, dataFrame{Envelope: 0, Total: 30}, 10, 1)
	if p == nil || dst != nil {
		t.Fatalf("first chunk: %v, %v; want a planned envelope without a buffer", p, dst)
	}
	dst = p.allocChunk(s.t.bufs, 10)
	copy(dst, "0123456789")
	p.buf = p.buf[:10] // applied: the envelope holds its first chunk
	p.filledLocked(1)
	s.partial[st] = map[uint64]*partialEnv{0: p}

	next := Header{Type: FrameData, Stream: st}
	_, old := s.chunkTargetLocked(next, dataFrame{Envelope: 0, Offset: 10}, 10, 1)
	// Generation 1 reads into old, outside the lock, when a resume makes
	// generation 2, which is sent the same chunk.
	_, cur := s.chunkTargetLocked(next, dataFrame{Envelope: 0, Offset: 10}, 10, 2)
	if &old[0] == &cur[0] {
		t.Fatal("the resumed connection was given the bytes the superseded one is reading into")
	}
	copy(old, "xxxxxxxxxx") // the late write of the superseded reader
	copy(cur, "abcdefghij")
	p.buf = p.buf[:20]
	p.filledLocked(1) // its frame is fenced off: nothing of it applies
	p.filledLocked(2)
	if got := string(p.buf); got != "0123456789abcdefghij" {
		t.Fatalf("the envelope holds %q, want its first chunk and the resumed connection's", got)
	}
	// With no read under way the next chunk goes in place.
	_, again := s.chunkTargetLocked(next, dataFrame{Envelope: 0, Offset: 20}, 10, 2)
	if !bytes.Equal(p.buf[:20], []byte("0123456789abcdefghij")) || cap(p.buf) < 30 || &again[0] != &p.buf[:30][20] {
		t.Fatal("a chunk of the connection that filled the envelope last did not go in place")
	}
}
