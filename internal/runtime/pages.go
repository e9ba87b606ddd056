package runtime

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Pages of kept answers.
//
// A key's record holds the answers of its last keyed asks, which every
// write of the record carries (mostly as a small delta). Once it holds
// more than pageAbove answered ones, or more than pageAboveBytes of
// them, the commit moves the oldest into pages: records of their own
// beside the key's state (host.Store.WriteAside, named "kept.<i>"), on
// the same replica set, under the same epochs, written at the key's
// level before the state record that no longer holds them. An answer
// is therefore always in a record that met the level: in the state
// record until its page did, in the page after. A page is written whole
// and not changed after, but to drop answers from it (their retention
// passed, or the host's ledger asked: then it is written again with the
// rest, or erased), or, once emptied (or written over by the budget
// below), to take answers the state record still holds: whichever
// version of a page a new owner adopts, every answer the state record no
// longer holds is in a page that met the level, and what is lost is only
// what a bound dropped. So a page needs no delta, and no write of several
// records at once. An owner that died between a page's write and the
// state record's leaves an answer in both: the load keeps the page's.
//
// A key keeps up to maxPages pages and maxPagedBytes of them (about
// 6,000 small answers); past either, the page holding the oldest answers
// is written over by the next. Its state record and its pages together
// stay within what the store takes in one message (the promise of an
// acquisition carries them all): a state that grows drops the oldest
// pages first. A page whose newest answer passed the retention is
// erased by the next commit; the record names when that is due, so that
// an idle key is woken for it (RecordWakeDue), and how many answers its
// pages hold (KeptIn). Deleting a key erases its pages after its record:
// a page is never written before the key's first record, so pages found
// without one are those of a delete cut short, which the load completes
// (a key never used again keeps them: nothing wakes a key without a
// record).
const (
	pageVersion    = 1
	maxPages       = 192
	maxPageAnswers = 512
	maxPageBytes   = 64 << 10
	maxPagedBytes  = 1 << 20
	// A commit pages once the record holds more than pageAbove answers
	// or pageAboveBytes of them, and leaves pageKeep and pageKeepBytes
	// there: every keyed ask writes the record, so a smaller one costs
	// less, and a page holds about 32 answers.
	pageAbove      = 48
	pageAboveBytes = maxRetainedBytes / 4
	pageKeep       = maxRetained / 8
	pageKeepBytes  = maxRetainedBytes / 8
	// pageRoom is about what a page costs in a message beside its value.
	pageRoom = 256
	// pagePrefix names the pages: a store's records beside the state
	// with other names are not the runtime's, and left alone.
	pagePrefix = "kept."
)

// keptPage is one page of kept answers.
type keptPage struct {
	i       int
	answers []retained // oldest first
	bytes   int
	// newest is when its newest answer was kept: the page goes once
	// that passed the retention.
	newest int64
	// dirty is set when the page is to be written (again) by the next
	// commit; an empty one is erased.
	dirty bool
}

// keptPages are an activation's pages, with an index of their answers
// by idempotency key.
type keptPages struct {
	list  []*keptPage
	index map[string]*keptPage
	// answers and bytes are the pages' totals.
	answers, bytes int
	// noRoom is set when the last pageOut left answers in the record
	// for want of room beside it: the record's budget holds them until
	// the next pageOut, which the list's growth past it brings.
	noRoom bool
}

func pageName(i int) string { return pagePrefix + strconv.Itoa(i) }

// pageIndexOf returns the index a page's name gives, or false for a
// record that is not a page.
func pageIndexOf(name string) (int, bool) {
	s, ok := strings.CutPrefix(name, pagePrefix)
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(s)
	if err != nil || i < 0 || i >= 1<<16 || strconv.Itoa(i) != s {
		return 0, false
	}
	return i, true
}

// appendPage appends rs as a page: its format, then the answers as a
// record of format 5 holds them.
func appendPage(b []byte, rs []retained) []byte {
	b = append(b, pageVersion)
	return appendRetained(b, rs)
}

// decodePage decodes a page appendPage wrote.
func decodePage(b []byte) ([]retained, error) {
	if len(b) == 0 || b[0] != pageVersion {
		if len(b) == 0 {
			return nil, fmt.Errorf("%w: an empty page of kept answers", errRecord)
		}
		return nil, fmt.Errorf("%w: a page of kept answers of format %d, this binary reads %d", errRecord, b[0], pageVersion)
	}
	r := recordReader{b: b[1:]}
	n := r.uvarint()
	if r.err == nil && (n == 0 || n > maxPageAnswers) {
		r.err = fmt.Errorf("%w: a page of %d kept answers, want 1 to %d", errRecord, n, maxPageAnswers)
	}
	if r.err != nil {
		return nil, r.err
	}
	rs := make([]retained, 0, n)
	for range n {
		var x retained
		r.answer(recordVersionHeld, &x)
		if r.err == nil && x.pending() {
			r.err = fmt.Errorf("%w: a page holds a request still pending", errRecord)
		}
		if r.err != nil {
			return nil, r.err
		}
		rs = append(rs, x)
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes after a page of kept answers", errRecord, len(r.b))
	}
	return rs, nil
}

// decodePages decodes the pages among the records beside a key's state.
func decodePages(aside map[string][]byte) (*keptPages, error) {
	var p *keptPages
	for name, v := range aside {
		i, ok := pageIndexOf(name)
		if !ok {
			continue
		}
		rs, err := decodePage(v)
		if err != nil {
			return nil, fmt.Errorf("page %q: %w", name, err)
		}
		if p == nil {
			p = &keptPages{index: make(map[string]*keptPage)}
		}
		p.put(&keptPage{i: i, answers: rs})
	}
	if p != nil {
		slices.SortFunc(p.list, func(a, b *keptPage) int { return a.i - b.i })
	}
	return p, nil
}

// put adds pg, whose answers are set, to p: its answers become the
// ones its keys find, newer than those of an earlier page.
func (p *keptPages) put(pg *keptPage) {
	pg.bytes, pg.newest = 0, math.MinInt64
	for i := range pg.answers {
		r := &pg.answers[i]
		pg.bytes += r.size()
		pg.newest = max(pg.newest, r.at)
		if old := p.index[r.key]; old == nil || old.find(r.key) == nil || old.find(r.key).at <= r.at {
			p.index[r.key] = pg
		}
	}
	p.answers += len(pg.answers)
	p.bytes += pg.bytes
	if !slices.Contains(p.list, pg) {
		p.list = append(p.list, pg)
	}
}

// empty drops pg's answers; the next commit erases it, unless answers
// are put in it again first. A key another page holds too (its handler
// ran again once the older answer passed the retention) leaves the index
// with pg's: the older one is past the retention, so a lookup would
// ignore it anyway.
func (p *keptPages) empty(pg *keptPage) {
	for i := range pg.answers {
		if k := pg.answers[i].key; p.index[k] == pg {
			delete(p.index, k)
		}
	}
	p.answers -= len(pg.answers)
	p.bytes -= pg.bytes
	pg.answers, pg.bytes, pg.newest, pg.dirty = nil, 0, math.MinInt64, true
}

// find returns pg's answer of key, or nil.
func (pg *keptPage) find(key string) *retained {
	for i := range pg.answers {
		if pg.answers[i].key == key {
			return &pg.answers[i]
		}
	}
	return nil
}

// find returns the paged answer of key kept after lo, or nil.
func (p *keptPages) find(key string, lo int64) *retained {
	if p == nil {
		return nil
	}
	pg := p.index[key]
	if pg == nil {
		return nil
	}
	if r := pg.find(key); r != nil && r.at >= lo {
		return r
	}
	return nil
}

// oldest returns the page whose newest answer is the oldest: the one
// to go first. Empty pages are left out; nil when none holds answers.
func (p *keptPages) oldest() *keptPage {
	var o *keptPage
	for _, pg := range p.list {
		if len(pg.answers) > 0 && (o == nil || pg.newest < o.newest) {
			o = pg
		}
	}
	return o
}

// held returns how many pages hold answers.
func (p *keptPages) held() int {
	n := 0
	for _, pg := range p.list {
		if len(pg.answers) > 0 {
			n++
		}
	}
	return n
}

// nextDue returns when the next page goes by its age (the newest answer
// of the page whose newest is the oldest), or false when no page holds
// answers.
func (p *keptPages) nextDue() (int64, bool) {
	if p == nil {
		return 0, false
	}
	if o := p.oldest(); o != nil {
		return o.newest, true
	}
	return 0, false
}

// expire empties the pages whose newest answer outlived the retention at
// now, or is dated after it by more than that (a clock that went back);
// it reports whether it emptied any.
func (p *keptPages) expire(now time.Time, retainFor time.Duration) bool {
	if p == nil {
		return false
	}
	t := now.UnixNano()
	lo, hi := t-int64(retainFor), t+int64(retainFor)
	emptied := false
	for _, pg := range p.list {
		if len(pg.answers) > 0 && (pg.newest < lo || pg.newest > hi) {
			p.empty(pg)
			emptied = true
		}
	}
	return emptied
}

// dropBefore drops from the pages the answers kept before before; it
// reports whether it dropped any.
func (p *keptPages) dropBefore(before int64) bool {
	if p == nil {
		return false
	}
	dropped := false
	for _, pg := range p.list {
		if len(pg.answers) == 0 || !slices.ContainsFunc(pg.answers, func(r retained) bool { return r.at < before }) {
			continue
		}
		rest := slices.DeleteFunc(slices.Clone(pg.answers), func(r retained) bool { return r.at < before })
		p.empty(pg)
		if len(rest) > 0 {
			pg.answers = rest
			p.put(pg)
		}
		dropped = true
	}
	return dropped
}

// dirty reports whether a page is to be written.
func (p *keptPages) dirty() bool {
	return p != nil && slices.ContainsFunc(p.list, func(pg *keptPage) bool { return pg.dirty })
}

// pageable reports whether r can move to a page: it is answered, and
// holds no deferred reply still open.
func pageable(r *retained) bool { return !r.pending() && r.open == nil }

// overRecord reports whether rs holds more answers a page can take
// than a record keeps (see pageOut).
func overRecord(rs []retained) bool {
	n, bytes := 0, 0
	for i := range rs {
		if pageable(&rs[i]) {
			n++
			bytes += rs[i].size()
		}
	}
	return n > pageAbove || bytes > pageAboveBytes
}

// loadPages makes aside's pages the activation's, and drops from its
// record's answers those a page holds too (their owner died between the
// two writes). The caller holds the Context's gateMu.
func (c *cell[S, M, C]) loadPages(x *extra[M], p *keptPages) {
	x.pages = p
	if p == nil {
		return
	}
	x.retained = slices.DeleteFunc(x.retained, func(r retained) bool {
		q := p.find(r.key, math.MinInt64)
		return q != nil && pageable(&r) && q.hash == r.hash && q.at == r.at
	})
}

// pagesDue reports whether the next commit of the activation must write
// pages: answers to move, pages to write again or erase, or one whose
// age passed; or hold its list to the record's budget (see pageOut).
// The caller holds the Context's gateMu.
func (c *cell[S, M, C]) pagesDue(x *extra[M]) bool {
	if len(x.retained) == 0 && x.pages == nil {
		return false // most keys: no clock read on their commits
	}
	if len(x.retained) > maxRetainedHeld || (overRecord(x.retained) && (x.pages == nil || !x.pages.noRoom)) || x.pages.dirty() {
		return true
	}
	due, ok := x.pages.nextDue()
	if !ok {
		return false
	}
	now, retain := time.Now().UnixNano(), int64(c.k.h.Kept.Retain)
	return due < now-retain || due > now+retain
}

// pageOut writes, before a commit writes the key's record, what its
// pages need: the pages whose age passed erased, the oldest answers of
// the record moved to new pages once it holds more than pageAbove
// answered ones or pageAboveBytes of them (down to pageKeep and
// pageKeepBytes), pages written over or erased to keep the key within
// maxPages and maxPagedBytes, and with its record (at most recLen bytes,
// what it takes before any answer moved) within limit, what the store
// takes in one message: answers that would not fit even without older
// pages stay in the record. Each write meets the key's level before the
// next; the answers leave the activation's list only once their pages
// were written. The list is then held to the record's budget
// (recordBudget): answers no page can take (deferred replies still open)
// do not grow it past what a record holds (past it, the oldest go, and
// their retries run again, as before pages). The caller holds the
// Context's gateMu; an error loses the activation, as a failed commit
// does.
func (c *cell[S, M, C]) pageOut(ctx *Context[S, M, C], x *extra[M], recLen, limit int) error {
	now := time.Now()
	if !c.pagesDue(x) {
		return nil
	}
	if x.pages == nil {
		x.pages = &keptPages{index: make(map[string]*keptPage)}
	}
	p := x.pages
	p.expire(now, c.k.h.Kept.Retain)
	p.noRoom = false
	var moved []int // indices in x.retained, oldest first
	if overRecord(x.retained) {
		n, bytes := 0, 0
		for i := range x.retained {
			if pageable(&x.retained[i]) {
				n++
				bytes += x.retained[i].size()
			}
		}
		for i := range x.retained {
			if n <= pageKeep && bytes <= pageKeepBytes {
				break
			}
			if r := &x.retained[i]; pageable(r) {
				moved = append(moved, i)
				n--
				bytes -= r.size()
			}
		}
	}
	for len(moved) > 0 {
		// One page: as many as fit, one at least.
		k, size := 0, 0
		for k < len(moved) && k < maxPageAnswers && (k == 0 || size+x.retained[moved[k]].size() <= maxPageBytes) {
			size += x.retained[moved[k]].size()
			k++
		}
		// Moved, the answers leave the record for the page: the key's
		// total grows by the page's room only.
		if recLen+pageRoom > limit {
			p.noRoom = true // not even alone beside the record
			break
		}
		rs := make([]retained, k)
		for j, i := range moved[:k] {
			rs[j] = x.retained[i]
		}
		moved = moved[k:]
		for p.held() > 0 && (p.held() >= maxPages || p.bytes+size > maxPagedBytes || recLen+p.bytes+(p.held()+1)*pageRoom > limit) {
			p.empty(p.oldest())
		}
		pg := p.free()
		pg.answers, pg.dirty = rs, true
		p.put(pg)
		recLen -= size
	}
	if err := c.writePages(ctx, p); err != nil {
		return err
	}
	x.retained = slices.DeleteFunc(x.retained, func(r retained) bool {
		q := p.find(r.key, math.MinInt64)
		return q != nil && pageable(&r) && q.hash == r.hash && q.at == r.at
	})
	x.retained = pruneRetained(x.retained, now, c.k.h.Kept.Retain)
	return nil
}

// free returns a page to put answers in: an empty one, or a new one at
// the lowest index no page takes.
func (p *keptPages) free() *keptPage {
	for _, pg := range p.list {
		if len(pg.answers) == 0 {
			return pg
		}
	}
	i := 0
	for slices.ContainsFunc(p.list, func(pg *keptPage) bool { return pg.i == i }) {
		i++
	}
	pg := &keptPage{i: i}
	p.list = append(p.list, pg)
	return pg
}

// fitPages empties the oldest pages until the key's record of recLen
// bytes and its pages fit in limit, what the store takes in one message,
// and writes what that changed.
func (c *cell[S, M, C]) fitPages(ctx *Context[S, M, C], x *extra[M], recLen, limit int) error {
	p := x.pages
	if p == nil {
		return nil
	}
	for p.held() > 0 && recLen+p.bytes+p.held()*pageRoom > limit {
		p.empty(p.oldest())
	}
	return c.writePages(ctx, p)
}

// pagesFit reports whether the key's record of recLen bytes and its
// pages fit in limit.
func (x *extra[M]) pagesFit(recLen, limit int) bool {
	p := x.pages
	return p == nil || p.held() == 0 || recLen+p.bytes+p.held()*pageRoom <= limit
}

// erasePages erases every page of the key, once its record was deleted
// (or by the load that found pages without a record: the delete was cut
// short between the two).
func (c *cell[S, M, C]) erasePages(ctx *Context[S, M, C], x *extra[M]) error {
	p := x.pages
	if p == nil {
		return nil
	}
	for _, pg := range p.list {
		if len(pg.answers) > 0 {
			p.empty(pg)
		}
	}
	return c.writePages(ctx, p)
}

// writePages writes p's dirty pages, in order, each once the one before
// met the key's level: an empty page is erased and leaves p.
func (c *cell[S, M, C]) writePages(ctx *Context[S, M, C], p *keptPages) error {
	st := c.k.h.Store
	for _, pg := range p.list {
		if !pg.dirty {
			continue
		}
		var v []byte
		if len(pg.answers) > 0 {
			v = appendPage(make([]byte, 0, retainedLen(pg.answers)+1), pg.answers)
		}
		sctx, cancel := ctx.storeCtx()
		err := st.WriteAside(sctx, c.k.def.Name, c.key, pageName(pg.i), v)
		cancel()
		if err != nil {
			return fmt.Errorf("page %d of kept answers: %w", pg.i, err)
		}
		pg.dirty = false
	}
	p.list = slices.DeleteFunc(p.list, func(pg *keptPage) bool { return len(pg.answers) == 0 })
	return nil
}

// appendPaged appends to a record of format 6 what it says of the key's
// pages: how many answers they hold, and when the next page goes by its
// age (its newest answer's time, Unix milliseconds).
func appendPaged(b []byte, p *keptPages) []byte {
	due, _ := p.nextDue()
	b = binary.AppendUvarint(b, uint64(p.answers))
	return binary.AppendVarint(b, due/int64(time.Millisecond))
}

// paged reads what a record of format 6 says of its key's pages.
func (r *recordReader) paged() (answers uint64, due int64) {
	answers = r.uvarint()
	ms := r.varint()
	if r.err == nil && (answers == 0 || answers > maxPages*maxPageAnswers) {
		r.err = fmt.Errorf("%w: %d paged answers", errRecord, answers)
	}
	if r.err == nil && (ms > math.MaxInt64/int64(time.Millisecond) || ms < math.MinInt64/int64(time.Millisecond)) {
		r.err = fmt.Errorf("%w: a page's time out of range", errRecord)
	}
	return answers, ms * int64(time.Millisecond)
}
