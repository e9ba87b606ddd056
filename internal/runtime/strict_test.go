package runtime

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/fault"
)

// strictKind is durableKind under strict durability.
func strictKind(t *testing.T, st *memStore) *kind[int, durMsg, tctx[int, durMsg]] {
	t.Helper()
	release := make(chan struct{})
	close(release)
	h, k := durableKind(t, st, make(chan struct{}, 16), release)
	t.Cleanup(func() { h.Close(context.Background()) })
	k.def.Strict = true
	return k
}

// keptOf decodes the record st holds for d/a and returns its kept
// entries by key, and its format.
func keptOf(t *testing.T, st *memStore) (map[string]retained, byte) {
	t.Helper()
	st.mu.Lock()
	rec := st.recs["d/a"]
	st.mu.Unlock()
	_, _, kept, err := decodeRecord[int](nil, rec)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]retained{}
	for _, r := range kept {
		out[r.key] = r
	}
	return out, rec[0]
}

func TestAKeyedAskThatEndsWithoutAReplyUnderStrictDurabilityLeavesNoPendingRequest(t *testing.T) {
	st := newMemStore()
	k := strictKind(t, st)
	ctx, cancel := context.WithTimeout(WithIdempotencyKey(context.Background(), "k1"), 5*time.Second)
	defer cancel()
	if _, err := Ask[durMsg, int](ctx, k.ref("a"), dTick{}); !errors.Is(err, ErrNoReply) {
		t.Fatalf("a keyed ask whose handler answers nothing: %v, want ErrNoReply", err)
	}
	kept, _ := keptOf(t, st)
	if r, ok := kept["k1"]; !ok || r.kind != retainedNoReply || len(kept) != 1 {
		t.Fatalf("the record keeps %+v, want only k1's answer (no reply), no pending request", kept)
	}
}

func TestTheOldestOrphanIsGivenUpWhenTooManyRequestsArePending(t *testing.T) {
	st := newMemStore()
	k := strictKind(t, st)
	now := time.Now()
	sum, err := (&cell[int, durMsg, tctx[int, durMsg]]{k: k}).requestHash(dTick{})
	if err != nil {
		t.Fatal(err)
	}
	var orphans []retained
	for i := range maxPending {
		orphans = append(orphans, retained{key: fmt.Sprintf("o%d", i), hash: sum, at: now.Add(time.Duration(i-maxPending) * time.Second).UnixNano(), kind: retainedPending, attempt: 1})
	}
	rec := append(appendString([]byte{recordVersionCompact}, "\x05"), 0) // state 5, no timer
	st.recs["d/a"] = appendRetained(rec, orphans)
	ctx, cancel := context.WithTimeout(WithIdempotencyKey(context.Background(), "new"), 5*time.Second)
	defer cancel()
	if _, err := Ask[durMsg, int](ctx, k.ref("a"), dTick{}); !errors.Is(err, ErrNoReply) {
		t.Fatalf("a keyed ask with %d requests pending: %v, want it admitted and run (ErrNoReply)", maxPending, err)
	}
	kept, _ := keptOf(t, st)
	if r := kept["o0"]; r.kind != retainedLost {
		t.Fatalf("the oldest orphan is %+v, want it lost", r)
	}
	for i := 1; i < maxPending; i++ {
		if r := kept[fmt.Sprintf("o%d", i)]; !r.pending() {
			t.Fatalf("orphan %d is %+v, want it pending still", i, r)
		}
	}
	if r := kept["new"]; r.kind != retainedNoReply {
		t.Fatalf("the new request is kept as %+v, want its answer", r)
	}
	// A retry of the lost one does not run: its outcome is unknown.
	rctx, rcancel := context.WithTimeout(WithIdempotencyKey(context.Background(), "o0"), 5*time.Second)
	defer rcancel()
	if _, err := Ask[durMsg, int](rctx, k.ref("a"), dTick{}); !errors.Is(err, fault.ErrOutcomeUnknown) {
		t.Fatalf("the retry of a request given up as lost: %v, want ErrOutcomeUnknown", err)
	}
	// A retry of a pending one runs as its second attempt, and is
	// answered.
	pctx, pcancel := context.WithTimeout(WithIdempotencyKey(context.Background(), "o1"), 5*time.Second)
	defer pcancel()
	if _, err := Ask[durMsg, int](pctx, k.ref("a"), dTick{}); !errors.Is(err, ErrNoReply) {
		t.Fatalf("the retry of a pending request: %v, want it run (ErrNoReply)", err)
	}
	if kept, _ := keptOf(t, st); kept["o1"].kind != retainedNoReply {
		t.Fatalf("the retried request is kept as %+v, want its answer", kept["o1"])
	}
}

// A key's record keeps its answers in format 4 (which a binary that
// reads no newer loads) up to pageAbove of them; the next moves the
// oldest to a page, and the record, in format 6, says so.
func TestAKeysRecordMovesToFormatSixOnlyOnceItsAnswersArePaged(t *testing.T) {
	st := newMemStore()
	release := make(chan struct{})
	close(release)
	h, k := durableKind(t, st, make(chan struct{}, 16), release)
	t.Cleanup(func() { h.Close(context.Background()) })
	format := func() byte {
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.recs["d/a"][0]
	}
	for i := range pageAbove + 1 {
		ctx, cancel := context.WithTimeout(WithIdempotencyKey(context.Background(), fmt.Sprint(i)), 5*time.Second)
		_, err := Ask[durMsg, int](ctx, k.ref("a"), dTick{})
		cancel()
		if !errors.Is(err, ErrNoReply) {
			t.Fatalf("keyed ask %d: %v, want ErrNoReply", i, err)
		}
		for len(st.writes) > 0 {
			<-st.writes
		}
		want := byte(recordVersionCompact)
		if i >= pageAbove {
			want = recordVersionPaged
		}
		if f := format(); f != want {
			t.Fatalf("with %d answers kept the record is format %d, want %d", i+1, f, want)
		}
	}
	if kept, _ := keptOf(t, st); len(kept) != pageKeep || len(st.asideOf("d", "a")) != 1 {
		t.Fatalf("the record keeps %d answers beside %d pages, want %d and 1", len(kept), len(st.asideOf("d", "a")), pageKeep)
	}
}
