package runtime

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/codec"
	"github.com/troupe-go/troupe/internal/host"
	"github.com/troupe-go/troupe/replication"
)

// waitFor waits, within 10 s, until ok holds.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// pagesOf returns pages holding rs, for encoding tests.
func pagesOf(rs []retained) *keptPages {
	p := &keptPages{index: make(map[string]*keptPage)}
	p.put(&keptPage{answers: rs})
	return p
}

type pageMsg interface{ pageMsg() }

// pAdd adds one to the count and answers it, with Pad bytes of padding;
// with Pad negative it deletes the key instead.
type pAdd struct{ Pad int }

func (pAdd) pageMsg() {}

type pReply struct {
	N   int
	Pad string
}

// pagedKind starts a durable counter "p" on a new host over st.
func pagedKind(t *testing.T, st host.Store, kept replication.KeptAnswers) (*host.Host, *kind[int, pageMsg, tctx[int, pageMsg]]) {
	t.Helper()
	h := host.New(host.Settings{Kept: kept})
	h.Store = st
	def := Define("p", func(c *tctx[int, pageMsg], m pageMsg) error {
		a := m.(pAdd)
		if a.Pad < 0 {
			c.Delete()
			return nil
		}
		c.Update(func(n int) int { return n + 1 })
		Respond(c.Context, pReply{N: c.State(), Pad: strings.Repeat("x", a.Pad)})
		return nil
	})
	def.spec.Durable = true
	def.spec.Codec = codec.New[pageMsg]()
	if probs := def.spec.Codec.Register("p", []any{pAdd{}}); len(probs) > 0 {
		t.Fatal(probs)
	}
	k := def.Instantiate(h).(*kind[int, pageMsg, tctx[int, pageMsg]])
	h.Register(k)
	return h, k
}

// newPaged starts the counter "p" (pagedKind, default bounds) over a new
// memStore that reports no writes; the host closes with the test.
func newPaged(t *testing.T) (*memStore, *host.Host, *kind[int, pageMsg, tctx[int, pageMsg]]) {
	t.Helper()
	st := newMemStore()
	st.writes = nil
	h, k := pagedKind(t, st, replication.KeptAnswers{})
	t.Cleanup(func() { h.Close(context.Background()) })
	return st, h, k
}

// set changes s's knobs under its lock.
func (s *memStore) set(f func(s *memStore)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

// askKeyed asks key "a" of k pAdd{pad} with idempotency key ik.
func askKeyed(t *testing.T, k *kind[int, pageMsg, tctx[int, pageMsg]], ik string, pad int) (pReply, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(WithIdempotencyKey(context.Background(), ik), 10*time.Second)
	defer cancel()
	return Ask[pageMsg, pReply](ctx, k.ref("a"), pAdd{Pad: pad})
}

// askAll asks k's key "a" pAdd{pad} under idempotency keys prefix-from
// to prefix-(to-1), each once.
func askAll(t *testing.T, k *kind[int, pageMsg, tctx[int, pageMsg]], prefix string, from, to, pad int) {
	t.Helper()
	for i := from; i < to; i++ {
		if _, err := askKeyed(t, k, fmt.Sprint(prefix, i), pad); err != nil {
			t.Fatalf("keyed ask %s%d: %v", prefix, i, err)
		}
	}
}

// storedPaging returns what the stored record of p/a says: the answers
// it holds, and those its pages hold by its count and by the pages in
// the store.
func storedPaging(t *testing.T, st *memStore) (live, said, paged int, format byte) {
	t.Helper()
	v, ok, aside, err := st.ReadAll(context.Background(), "p", "a")
	if err != nil || !ok {
		t.Fatalf("the record of p/a: %v, %v", ok, err)
	}
	_, _, kept, ps, err := decodeRecordPaged[int](nil, v)
	if err != nil {
		t.Fatal(err)
	}
	p, err := decodePages(aside)
	if err != nil {
		t.Fatal(err)
	}
	if p != nil {
		paged = p.answers
		if p.bytes > maxPagedBytes || len(p.list) > maxPages {
			t.Fatalf("the key holds %d pages of %d bytes; at most %d of %d", len(p.list), p.bytes, maxPages, maxPagedBytes)
		}
	}
	return len(kept), int(ps.answers), paged, v[0]
}

// A key keeps the answers of thousands of keyed asks, far past what its
// record holds: each retry gets its first answer and the handler never
// runs again, also after the key is loaded again from the store.
func TestAKeyKeepsTheAnswersOfThousandsOfKeyedAsksInPages(t *testing.T) {
	st := newMemStore()
	st.writes = nil
	h, k := pagedKind(t, st, replication.KeptAnswers{})
	const asks = 3000
	for i := range asks {
		r, err := askKeyed(t, k, fmt.Sprint("k-", i), 0)
		if err != nil || r.N != i+1 {
			t.Fatalf("keyed ask %d: %+v, %v", i, r, err)
		}
	}
	live, said, paged, format := storedPaging(t, st)
	if format != recordVersionPaged || live > pageAbove || live+paged != asks || said != paged {
		t.Fatalf("the record (format %d) holds %d answers and says its pages hold %d; they hold %d: want format %d, at most %d in it and %d in all",
			format, live, said, paged, recordVersionPaged, pageAbove, asks)
	}
	retry := func(k *kind[int, pageMsg, tctx[int, pageMsg]]) {
		t.Helper()
		for _, i := range []int{0, 1, 17, 128, 129, 1000, 2870, asks - 1} {
			r, err := askKeyed(t, k, fmt.Sprint("k-", i), 0)
			if err != nil || r.N != i+1 {
				t.Fatalf("the retry of keyed ask %d: %+v, %v; want its answer %d", i, r, err, i+1)
			}
		}
		if _, err := askKeyed(t, k, "k-5", 1); !errors.Is(err, ErrIdempotencyConflict) {
			t.Fatalf("a paged key used for another request: %v, want ErrIdempotencyConflict", err)
		}
	}
	retry(k)
	h.Close(context.Background())
	h2, k2 := pagedKind(t, st, replication.KeptAnswers{})
	defer h2.Close(context.Background())
	retry(k2)
	r, err := askKeyed(t, k2, "new", 0)
	if err != nil || r.N != asks+1 {
		t.Fatalf("a new keyed ask after the retries: %+v, %v; want %d (no retry ran the handler)", r, err, asks+1)
	}
	if answers, _ := h2.KeptUsage(); answers != asks+1 {
		t.Fatalf("the ledger counts %d answers, want %d", answers, asks+1)
	}
}

// Past maxPagedBytes the page holding the oldest answers is written over:
// their retries run again, the newest are kept.
func TestAKeysPagesDropTheOldestAnswersPastTheirBudget(t *testing.T) {
	st := newMemStore()
	st.writes = nil
	st.maxValue = 8 << 20 // the pages' own budget binds, not the message's
	h, k := pagedKind(t, st, replication.KeptAnswers{})
	defer h.Close(context.Background())
	const pad = 4 << 10
	asks := 2 * maxPagedBytes / pad
	askAll(t, k, "k-", 0, asks, pad)
	live, _, paged, _ := storedPaging(t, st)
	if live+paged >= asks || paged*pad < maxPagedBytes*3/4 {
		t.Fatalf("%d answers kept in the record and %d in pages, of %d of %d bytes each: want the oldest dropped, half the budget paged at least", live, paged, asks, pad)
	}
	if r, err := askKeyed(t, k, fmt.Sprint("k-", asks-1), pad); err != nil || r.N != asks {
		t.Fatalf("the retry of the newest: %+v, %v", r, err)
	}
	if r, err := askKeyed(t, k, "k-0", pad); err != nil || r.N != asks+1 {
		t.Fatalf("the retry of the oldest: %+v, %v; want it run again (%d)", r, err, asks+1)
	}
}

// Past maxPages the page holding the oldest answers is written over.
func TestAKeyKeepsAtMostItsPagesBound(t *testing.T) {
	st, _, k := newPaged(t)
	const asks = 10_000
	askAll(t, k, "k-", 0, asks, 0)
	_, _, aside, _ := st.ReadAll(context.Background(), "p", "a")
	live, _, paged, _ := storedPaging(t, st)
	if len(aside) != maxPages || live+paged >= asks || live+paged < asks/2 {
		t.Fatalf("%d pages keep %d answers, the record %d, of %d asks: want %d pages, the oldest answers dropped", len(aside), paged, live, asks, maxPages)
	}
	if r, err := askKeyed(t, k, fmt.Sprint("k-", asks-live-paged), 0); err != nil || r.N != asks-live-paged+1 {
		t.Fatalf("the retry of the oldest answer kept: %+v, %v", r, err)
	}
	if r, err := askKeyed(t, k, "k-0", 0); err != nil || r.N != asks+1 {
		t.Fatalf("the retry of the first: %+v, %v; want it run again (%d)", r, err, asks+1)
	}
}

// A key's record and its pages stay within what the store takes in one
// message: pages give way, and answers no page could take beside the
// record stay in it.
func TestAKeysRecordAndPagesStayWithinTheStoresLimit(t *testing.T) {
	st := newMemStore()
	st.writes = nil
	st.maxValue = 96 << 10
	h, k := pagedKind(t, st, replication.KeptAnswers{})
	defer h.Close(context.Background())
	const pad = 1 << 10
	for i := range 400 {
		if _, err := askKeyed(t, k, fmt.Sprint("k-", i), pad); err != nil {
			t.Fatal(err)
		}
		v, _, aside, _ := st.ReadAll(context.Background(), "p", "a")
		total := len(v)
		for _, pg := range aside {
			total += len(pg) + pageRoom
		}
		if total > st.maxValue {
			t.Fatalf("after %d asks the record and its %d pages take %d bytes, limit %d", i+1, len(aside), total, st.maxValue)
		}
	}
	live, _, paged, _ := storedPaging(t, st)
	if live+paged < 32 {
		t.Fatalf("the key keeps %d answers in its record and %d in pages: want what fits the limit, not a few", live, paged)
	}
	if r, err := askKeyed(t, k, "k-399", pad); err != nil || r.N != 400 {
		t.Fatalf("the retry of the newest: %+v, %v", r, err)
	}
}

// An owner that dies after a page's write and before its record's leaves
// the page's answers in both: the next activation serves each once, and
// its next record no longer holds them.
func TestAnAnswerInAPageAndInTheRecordIsKeptOnce(t *testing.T) {
	st := newMemStore()
	st.writes = nil
	h, k := pagedKind(t, st, replication.KeptAnswers{})
	askAll(t, k, "k-", 0, pageAbove, 0)
	st.set(func(s *memStore) { s.loses = errors.New("lost") })
	if _, err := askKeyed(t, k, "k-last", 0); err == nil {
		t.Fatal("a keyed ask whose record was not written succeeded")
	}
	h.Close(context.Background())
	st.set(func(s *memStore) { s.loses = nil })
	if len(st.asideOf("p", "a")) == 0 {
		t.Fatal("no page was written before the record")
	}
	live, _, paged, _ := storedPaging(t, st)
	if live != pageAbove || paged == 0 {
		t.Fatalf("the record holds %d answers and the pages %d: want the record as before (%d) and its oldest paged too", live, paged, pageAbove)
	}
	h2, k2 := pagedKind(t, st, replication.KeptAnswers{})
	defer h2.Close(context.Background())
	for _, i := range []int{0, pageAbove / 2, pageAbove - 1} {
		if r, err := askKeyed(t, k2, fmt.Sprint("k-", i), 0); err != nil || r.N != i+1 {
			t.Fatalf("the retry of %d: %+v, %v", i, r, err)
		}
	}
	if r, err := askKeyed(t, k2, "k-last", 0); err != nil || r.N != pageAbove+1 {
		t.Fatalf("the retry of the ask whose record was lost: %+v, %v; want it run (%d)", r, err, pageAbove+1)
	}
	live, said, paged, _ := storedPaging(t, st)
	if live+paged != pageAbove+1 || said != paged {
		t.Fatalf("the record holds %d answers, its pages %d (it says %d): want %d in all, each once", live, paged, said, pageAbove+1)
	}
}

// A page that is not written loses the activation, as a failed commit
// does: the record keeps the answers it held, and nothing is lost.
func TestAPageNotWrittenLeavesTheAnswersInTheRecord(t *testing.T) {
	st, _, k := newPaged(t)
	askAll(t, k, "k-", 0, pageAbove, 0)
	st.set(func(s *memStore) { s.losesAside = errors.New("lost") })
	if _, err := askKeyed(t, k, "k-last", 0); err == nil {
		t.Fatal("a keyed ask whose page was not written succeeded")
	}
	st.set(func(s *memStore) { s.losesAside = nil })
	if live, _, paged, _ := storedPaging(t, st); live != pageAbove || paged != 0 {
		t.Fatalf("the record holds %d answers and pages %d, want the %d it held and none", live, paged, pageAbove)
	}
	for _, i := range []int{0, pageAbove - 1} {
		if r, err := askKeyed(t, k, fmt.Sprint("k-", i), 0); err != nil || r.N != i+1 {
			t.Fatalf("the retry of %d: %+v, %v", i, r, err)
		}
	}
	if r, err := askKeyed(t, k, "k-last", 0); err != nil || r.N != pageAbove+1 {
		t.Fatalf("the ask whose page was not written, again: %+v, %v; want it run (%d)", r, err, pageAbove+1)
	}
}

// Deleting a key erases its pages after its record: a key that keeps
// no answers leaves none behind, also when the delete is cut short
// between the two (the next load erases them).
func TestDeletingAKeyErasesItsPages(t *testing.T) {
	st, _, k := newPaged(t)
	askAll(t, k, "k-", 0, 2*maxRetained, 0)
	if len(st.asideOf("p", "a")) == 0 {
		t.Fatal("no page written")
	}
	if err := k.ref("a").Tell(context.Background(), pAdd{Pad: -1}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the key and its pages deleted", func() bool {
		_, ok, _ := st.Read(context.Background(), "p", "a")
		return !ok && len(st.asideOf("p", "a")) == 0
	})
	if r, err := askKeyed(t, k, "k-0", 0); err != nil || r.N != 1 {
		t.Fatalf("a retry after the delete: %+v, %v; want it run on the new key", r, err)
	}

	// A delete that fails leaves the key with its pages.
	first, err := askKeyed(t, k, "f-0", 0)
	if err != nil {
		t.Fatal(err)
	}
	askAll(t, k, "f-", 1, 2*maxRetained, 0)
	st.set(func(s *memStore) { s.losesDelete = errors.New("lost") })
	if err := k.ref("a").Tell(context.Background(), pAdd{Pad: -1}); err != nil {
		t.Fatal(err)
	}
	if r, err := askKeyed(t, k, "f-0", 0); err != nil || r.N != first.N {
		t.Fatalf("a retry after a failed delete: %+v, %v; want its first answer (%d)", r, err, first.N)
	}
	st.set(func(s *memStore) { s.losesDelete = nil })
	if err := k.ref("a").Tell(context.Background(), pAdd{Pad: -1}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the key deleted", func() bool {
		_, ok, _ := st.Read(context.Background(), "p", "a")
		return !ok
	})

	// A delete whose pages are not erased after its record.
	askAll(t, k, "j-", 0, 2*maxRetained, 0)
	st.set(func(s *memStore) { s.losesAside = errors.New("lost") })
	if err := k.ref("a").Tell(context.Background(), pAdd{Pad: -1}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the key's record deleted and its pages' erasure failed", func() bool {
		_, ok, _ := st.Read(context.Background(), "p", "a")
		st.mu.Lock()
		defer st.mu.Unlock()
		return !ok && st.lostAsides > 0
	})
	if len(st.asideOf("p", "a")) == 0 {
		t.Fatal("the pages went with a delete whose erasures failed")
	}
	st.set(func(s *memStore) { s.losesAside = nil })
	if r, err := askKeyed(t, k, "j-0", 0); err != nil || r.N != 1 {
		t.Fatalf("a retry after the delete cut short: %+v, %v; want it run on the new key", r, err)
	}
	if a := st.asideOf("p", "a"); len(a) != 0 {
		t.Fatalf("the load of the deleted key left %d pages", len(a))
	}
}

// The ledger's prune drops paged answers before its cutoff, writing the
// pages again with the rest.
func TestThePruneOfTheLedgerDropsPagedAnswers(t *testing.T) {
	st, _, k := newPaged(t)
	askAll(t, k, "k-", 0, 2*maxRetained, 0)
	_, _, paged, _ := storedPaging(t, st)
	k.PruneKept("a", time.Now().Add(time.Hour).UnixNano())
	waitFor(t, "the pages erased", func() bool { return len(st.asideOf("p", "a")) == 0 })
	live, said, left, format := storedPaging(t, st)
	if paged == 0 || live != 0 || said != 0 || left != 0 || format == recordVersionPaged {
		t.Fatalf("after the prune (%d paged before) the record (format %d) holds %d answers and says %d paged; %d are: want none", paged, format, live, said, left)
	}
}

// Pages go whole once their newest answer outlived the retention; the
// record says when, so that an idle key is woken for it.
func TestAPageGoesOnceItsNewestAnswerOutlivedTheRetention(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	old := []retained{{key: "a", at: now.Add(-3 * time.Hour).UnixNano(), kind: retainedNoReply}, {key: "b", at: now.Add(-2 * time.Hour).UnixNano(), kind: retainedNoReply}}
	young := []retained{{key: "c", at: now.Add(-2 * time.Hour).UnixNano(), kind: retainedNoReply}, {key: "d", at: now.Add(-time.Minute).UnixNano(), kind: retainedNoReply}}
	p := &keptPages{index: make(map[string]*keptPage)}
	p.put(&keptPage{i: 0, answers: old})
	p.put(&keptPage{i: 1, answers: young})
	rec := appendPaged(appendRetained([]byte{recordVersionPaged, 1, 0xc0, 0}, nil), p)
	if due, ok := RecordWakeDue(rec, time.Hour); !ok || !due.Equal(now.Add(-time.Hour)) {
		t.Fatalf("the record is due %v, %v; want when the old page outlived an hour (%v)", due, ok, now.Add(-time.Hour))
	}
	if !p.expire(now, time.Hour) || p.answers != 2 || p.find("b", math.MinInt64) != nil || p.find("c", math.MinInt64) == nil {
		t.Fatalf("after expiry the pages hold %d answers (b %v, c %v): want only the young page's", p.answers, p.find("b", math.MinInt64), p.find("c", math.MinInt64))
	}
	// c is past the retention in a page that stays: a lookup ignores it.
	if p.find("c", now.Add(-time.Hour).UnixNano()) != nil || p.find("d", now.Add(-time.Hour).UnixNano()) == nil {
		t.Fatal("a lookup serves an answer past the retention, or misses one within it")
	}
	if !p.dropBefore(now.Add(-time.Hour).UnixNano()) || p.answers != 1 || !p.dirty() {
		t.Fatalf("a drop before the cutoff leaves %d answers (dirty %v), want 1 and the page to write again", p.answers, p.dirty())
	}
}

func FuzzDecodePage(f *testing.F) {
	answers := []retained{
		{key: "k", at: time.Unix(1, 0).UnixNano(), rid: host.NamedRequestID("r"), kind: retainedReply, body: []byte{0x01}},
		{key: "d", at: time.Unix(2, 0).UnixNano(), rid: host.MadeRequestID(7, 9), kind: retainedDeclared, name: "n", text: "t"},
	}
	f.Add(appendPage(nil, answers))
	f.Add(appendPage(nil, answers[:1]))
	f.Add([]byte{pageVersion, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		rs, err := decodePage(b)
		if err != nil {
			if !errors.Is(err, errRecord) {
				t.Fatalf("a page that does not decode: %v, want errRecord", err)
			}
			return
		}
		// What decodes encodes to a page that decodes the same.
		again := appendPage(nil, rs)
		rs2, err := decodePage(again)
		if err != nil || len(rs2) != len(rs) || string(appendPage(nil, rs2)) != string(again) {
			t.Fatalf("a page decodes, encodes again as %x and decodes as %d answers (%v), not %d", again, len(rs2), err, len(rs))
		}
	})
}

// Answers no page can take (deferred replies still open) are held to
// what a record holds: the key's record always loads again.
func TestOpenDeferredRepliesKeepTheRecordLoadable(t *testing.T) {
	st := newMemStore()
	st.writes = nil
	deferred := make(chan Deferred[int], maxRetainedHeld+8)
	k := deferringKind(t, st, deferred)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range maxRetainedHeld + 6 {
		go func() {
			_, _ = Ask[noteMsg, int](WithIdempotencyKey(ctx, fmt.Sprint("d-", i)), k.ref("a"), nAdd{})
		}()
		recv(t, deferred, "a deferred reply")
	}
	awaitNotHandling(t, k, "a")
	v, _, err := st.Read(context.Background(), "d", "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, kept, err := decodeRecord[int](nil, v); err != nil || len(kept) > maxRetainedHeld {
		t.Fatalf("the record of %d open deferred replies keeps %d (%v): want it loadable, at most %d", maxRetainedHeld+6, len(kept), err, maxRetainedHeld)
	}
}

// gState is the state of a counter whose state also carries Blob.
type gState struct {
	N    int
	Blob []byte
}

// Beside a state near the store's limit a key keeps the answers that
// fit: paging moves them out of the record without growing the key (but
// for a page's room), and is not undone by the check of the record's
// size that follows.
func TestALargeStateKeepsTheAnswersThatFitBesideIt(t *testing.T) {
	st := newMemStore()
	st.writes = nil
	st.maxValue = 160 << 10
	h := host.New(host.Settings{})
	h.Store = st
	defer h.Close(context.Background())
	def := Define("g", func(c *tctx[gState, pageMsg], m pageMsg) error {
		a := m.(pAdd)
		c.Update(func(s gState) gState {
			s.N++
			if a.Pad > 0 {
				s.Blob = make([]byte, a.Pad)
			}
			return s
		})
		Respond(c.Context, pReply{N: c.State().N})
		return nil
	})
	def.spec.Durable = true
	def.spec.Codec = codec.New[pageMsg]()
	if probs := def.spec.Codec.Register("g", []any{pAdd{}}); len(probs) > 0 {
		t.Fatal(probs)
	}
	k := def.Instantiate(h).(*kind[gState, pageMsg, tctx[gState, pageMsg]])
	h.Register(k)
	ask := func(ik string, grow int) pReply {
		t.Helper()
		ctx, cancel := context.WithTimeout(WithIdempotencyKey(context.Background(), ik), 10*time.Second)
		defer cancel()
		r, err := Ask[pageMsg, pReply](ctx, k.ref("a"), pAdd{Pad: grow})
		if err != nil {
			t.Fatalf("keyed ask %s: %v", ik, err)
		}
		return r
	}
	ask("grow", 100<<10)
	const asks = 2000
	for i := range asks {
		ask(fmt.Sprint("k-", i), 0)
	}
	v, _, aside, _ := st.ReadAll(context.Background(), "g", "a")
	_, _, kept, err := decodeRecord[gState](h, v)
	if err != nil {
		t.Fatal(err)
	}
	paged := 0
	total := len(v)
	for _, b := range aside {
		rs, err := decodePage(b)
		if err != nil {
			t.Fatal(err)
		}
		paged += len(rs)
		total += len(b) + pageRoom
	}
	t.Logf("%d answers in the record, %d in %d pages; %d bytes of %d", len(kept), paged, len(aside), total, st.maxValue)
	if total > st.maxValue || len(kept)+paged < 750 {
		t.Fatalf("beside a state of 150 KiB within 160 KiB the key keeps %d answers in its record and %d in %d pages, %d bytes: want the limit kept and the answers that fit (750 or more)", len(kept), paged, len(aside), total)
	}
	if r := ask(fmt.Sprint("k-", asks-1), 0); r.N != asks+1 {
		t.Fatalf("the retry of the newest answered %d, want %d", r.N, asks+1)
	}
}

// Under strict durability each keyed ask is first written pending to the
// record, then answered: pending requests stay in the record, answered
// ones move to pages as any do, and every retry gets its first answer.
func TestStrictKeyedAsksPageTheirAnswers(t *testing.T) {
	st, h, k := newPaged(t)
	k.def.Strict = true
	const asks = 3 * maxRetained
	for i := range asks {
		if r, err := askKeyed(t, k, fmt.Sprint("k-", i), 0); err != nil || r.N != i+1 {
			t.Fatalf("strict keyed ask %d: %+v, %v", i, r, err)
		}
	}
	if _, _, paged, _ := storedPaging(t, st); paged == 0 {
		t.Fatal("no answer of a strict key moved to a page")
	}
	h.Close(context.Background())
	h2, k2 := pagedKind(t, st, replication.KeptAnswers{})
	defer h2.Close(context.Background())
	k2.def.Strict = true
	for _, i := range []int{0, maxRetained, asks - 1} {
		if r, err := askKeyed(t, k2, fmt.Sprint("k-", i), 0); err != nil || r.N != i+1 {
			t.Fatalf("the retry of strict keyed ask %d: %+v, %v; want %d", i, r, err, i+1)
		}
	}
}
