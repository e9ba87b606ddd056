package host

import (
	"container/heap"
	"sync"
	"time"

	"github.com/troupe-go/troupe/replication"
)

// KeptPruner is a kind whose keys keep answers: PruneKept asks key's
// activation, if this member owns the key, to drop its answers dated
// before (Unix nanoseconds) and those past their retention, then to
// note what it keeps. It must not block: it queues the work.
type KeptPruner interface {
	PruneKept(key string, before int64)
}

// keptLedger indexes the answers each key of this member keeps, to hold
// them within the member's bounds (Settings.Kept): past a bound the keys
// holding the oldest answers are asked to drop them, and one timer asks
// those whose oldest answer's retention ended. Its entries are hints,
// noted by the keys' commits: a key asked to prune is uncounted until it
// notes again.
type keptLedger struct {
	b    replication.KeptAnswers
	find func(typ string) Kind

	mu      sync.Mutex
	byKey   map[keptID]*keptEntry
	age     keptHeap // the oldest answer first
	answers int
	bytes   int64
	timer   *time.Timer
	timerAt int64 // when timer fires, Unix nanoseconds; 0: not armed
	closed  bool
	running sync.WaitGroup // prunes being sent, which close waits for
	// evicting is set while a goroutine sends the prunes of a bound:
	// notes meanwhile only count.
	evicting bool
}

type keptID struct{ typ, key string }

type keptEntry struct {
	id      keptID
	answers int
	bytes   int64
	oldest  int64
	at      int // position in age
}

// keptPrune is one key asked to drop its answers before a cutoff.
type keptPrune struct {
	id     keptID
	before int64
}

func newKeptLedger(b replication.KeptAnswers, find func(string) Kind) *keptLedger {
	return &keptLedger{b: b.WithDefaults(), find: find, byKey: make(map[keptID]*keptEntry)}
}

// note counts what typ/key keeps: answers answers (none pending) of
// bytes, the oldest dated oldest. No answers removes the key.
func (l *keptLedger) note(typ, key string, answers int, bytes int64, oldest int64) {
	id := keptID{typ, key}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	e, ok := l.byKey[id]
	switch {
	case answers == 0 && ok:
		l.drop(e)
	case answers == 0:
	case ok:
		l.answers += answers - e.answers
		l.bytes += bytes - e.bytes
		moved := e.oldest != oldest
		e.answers, e.bytes, e.oldest = answers, bytes, oldest
		if moved {
			// Most notes add a newer answer: the oldest stays.
			heap.Fix(&l.age, e.at)
		}
	default:
		e = &keptEntry{id: id, answers: answers, bytes: bytes, oldest: oldest}
		l.byKey[id] = e
		l.answers += answers
		l.bytes += bytes
		heap.Push(&l.age, e)
	}
	var evict []keptPrune
	if !l.evicting && l.over(l.b.MaxAnswers, l.b.MaxBytes) {
		evict = l.overLocked()
	}
	l.armLocked()
	if len(evict) > 0 {
		// Sent by a goroutine: the note is on a key's commit, which
		// must not queue work in other keys' cells under its locks.
		l.evicting = true
		l.running.Add(1)
		go l.send(evict, true)
	}
	l.mu.Unlock()
}

func (l *keptLedger) over(answers int, bytes int64) bool {
	return l.answers > answers || l.bytes > bytes
}

// overLocked removes from the index the keys holding the oldest answers
// until the rest is within 90% of the bounds (in batches, not one prune
// per new answer), and returns them with a cutoff: the oldest answer of
// the first key left, so that no answer older than one kept is dropped.
// A key's answers are known by count only: one that keeps some newer
// than the cutoff notes them, and a later round takes more if needed.
func (l *keptLedger) overLocked() []keptPrune {
	maxA, maxB := l.b.MaxAnswers-l.b.MaxAnswers/10, l.b.MaxBytes-l.b.MaxBytes/10
	var out []keptPrune
	var last int64
	for len(l.age.es) > 0 && l.over(maxA, maxB) {
		e := l.age.es[0]
		l.drop(e)
		last = e.oldest
		out = append(out, keptPrune{id: e.id})
	}
	cutoff := last + 1 // each key drops its oldest answer at least
	if len(l.age.es) > 0 && l.age.es[0].oldest > cutoff {
		cutoff = l.age.es[0].oldest
	}
	for i := range out {
		out[i].before = cutoff
	}
	return out
}

// expiredLocked removes and returns the keys whose oldest answer's
// retention ended at now.
func (l *keptLedger) expiredLocked(now int64) []keptPrune {
	var out []keptPrune
	before := now - int64(l.b.Retain)
	for len(l.age.es) > 0 && l.age.es[0].oldest < before {
		e := l.age.es[0]
		l.drop(e)
		out = append(out, keptPrune{id: e.id, before: before})
	}
	return out
}

// armLocked sets the timer to the earliest end of retention, if it is
// not set sooner.
func (l *keptLedger) armLocked() {
	if len(l.age.es) == 0 || l.closed {
		return
	}
	due := l.age.es[0].oldest + int64(l.b.Retain) + 1
	if l.timerAt != 0 && l.timerAt <= due {
		return
	}
	l.timerAt = due
	d := time.Until(time.Unix(0, due))
	if l.timer == nil {
		l.timer = time.AfterFunc(d, l.expire)
		return
	}
	l.timer.Reset(d)
}

// expire is the timer: the keys past their retention are asked to prune.
func (l *keptLedger) expire() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.timerAt = 0
	prunes := l.expiredLocked(time.Now().UnixNano())
	l.armLocked()
	l.running.Add(1)
	l.mu.Unlock()
	l.send(prunes, false)
}

// send asks each key of ps to prune; bound says a bound's evicting ends
// with it.
func (l *keptLedger) send(ps []keptPrune, bound bool) {
	defer l.running.Done()
	for _, p := range ps {
		if pr, ok := l.find(p.id.typ).(KeptPruner); ok {
			pr.PruneKept(p.id.key, p.before)
		}
	}
	if !bound {
		return
	}
	l.mu.Lock()
	l.evicting = false
	var again []keptPrune
	if !l.closed && l.over(l.b.MaxAnswers, l.b.MaxBytes) {
		again = l.overLocked() // noted meanwhile
	}
	if len(again) > 0 {
		l.evicting = true
		l.running.Add(1)
		go l.send(again, true)
	}
	l.mu.Unlock()
}

func (l *keptLedger) drop(e *keptEntry) {
	heap.Remove(&l.age, e.at)
	delete(l.byKey, e.id)
	l.answers -= e.answers
	l.bytes -= e.bytes
}

// close stops the timer and waits for the prunes being sent.
func (l *keptLedger) close() {
	l.mu.Lock()
	l.closed = true
	if l.timer != nil {
		l.timer.Stop()
	}
	l.mu.Unlock()
	l.running.Wait()
}

func (l *keptLedger) usage() (int, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.answers, l.bytes
}

// keptHeap orders entries by their oldest answer, then by name, so that
// the order is the same on every run.
type keptHeap struct{ es []*keptEntry }

func (h *keptHeap) Len() int { return len(h.es) }
func (h *keptHeap) Less(i, j int) bool {
	a, b := h.es[i], h.es[j]
	if a.oldest != b.oldest {
		return a.oldest < b.oldest
	}
	if a.id.typ != b.id.typ {
		return a.id.typ < b.id.typ
	}
	return a.id.key < b.id.key
}
func (h *keptHeap) Swap(i, j int) {
	h.es[i], h.es[j] = h.es[j], h.es[i]
	h.es[i].at, h.es[j].at = i, j
}
func (h *keptHeap) Push(x any) {
	e := x.(*keptEntry)
	e.at = len(h.es)
	h.es = append(h.es, e)
}
func (h *keptHeap) Pop() any {
	e := h.es[len(h.es)-1]
	h.es[len(h.es)-1] = nil
	h.es = h.es[:len(h.es)-1]
	return e
}

// TimerWaker is a durable kind whose records keep timers: WakeTimers
// activates key, if this member owns it and no activation holds it, so
// that the timers its stored record holds are set again. It must not
// block: it queues the work, and calls done (when not nil) once the key
// is active (nil) or could not be activated (the cause). A key this
// member does not own, or one active already, is done with nil: nothing
// to wake here.
type TimerWaker interface {
	WakeTimers(key string, done func(error))
}
