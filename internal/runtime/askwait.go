package runtime

import (
	"sync"
	"time"
)

// askWaits ends the waits of the asks to one kind whose deadline is the
// kind's ask timeout (their context had none). Such deadlines are the
// time of the ask plus one constant, so they come in the order the asks
// do: a list in that order with one timer, armed for its head, replaces
// a timer per ask (a reset and a stop per ask, and the asker's select on
// its channel). An ask enters the list once delivered, so asks may enter
// it out of order: add accepts one that is at most outOfOrder ahead of
// the tail (it then expires that late at most) and refuses the rest (an
// ask whose delivery waited for mailbox room), which keep a timer of their
// own.
type askWaits struct {
	mu         sync.Mutex
	head, tail *askWait
	t          *time.Timer
	armed      bool // t will fire
	// chans holds empty done channels (chan struct{}, room for one
	// token) for asks to reuse.
	chans sync.Pool
}

// doneChan returns an empty done channel for an ask's slot. A slot's done
// gets exactly one token, when its state becomes final (complete, abort,
// expire; a cancel by the asker sends none), and nothing after: once its
// asker took the token, the channel is empty for good and may serve
// another ask (putChan).
func (l *askWaits) doneChan() chan struct{} {
	if c, ok := l.chans.Get().(chan struct{}); ok {
		return c
	}
	return make(chan struct{}, 1)
}

// putChan keeps c, whose token its asker took, for another ask.
func (l *askWaits) putChan(c chan struct{}) { l.chans.Put(c) }

// askWait is a slot's entry in an askWaits list.
type askWait struct {
	prev, next *askWait
	s          expirer // the slot while listed; nil once out
}

// expirer is a slot as an askWaits list ends it.
type expirer interface {
	expire()
	deadline() (time.Time, bool)
}

// outOfOrder is how much earlier than the tail's an ask's deadline may be
// for add to list it.
const outOfOrder = time.Millisecond

// add puts w, whose slot s expires at dl, at the list's tail; it reports
// false, listing nothing, when dl comes more than outOfOrder before the
// tail's deadline.
func (l *askWaits) add(w *askWait, s expirer, dl time.Time) bool {
	l.mu.Lock()
	if l.tail != nil {
		if tdl, _ := l.tail.s.deadline(); dl.Add(outOfOrder).Before(tdl) {
			l.mu.Unlock()
			return false
		}
	}
	w.s, w.prev = s, l.tail
	if l.tail != nil {
		l.tail.next = w
	} else {
		l.head = w
	}
	l.tail = w
	if !l.armed {
		l.armed = true
		d := time.Until(dl)
		if l.t == nil {
			l.t = time.AfterFunc(d, l.fire)
		} else {
			l.t.Reset(d)
		}
	}
	l.mu.Unlock()
	return true
}

// remove takes w out of the list if it is still in it. The timer stays
// armed: firing for nothing once per timeout costs less than a stop and
// a reset per ask.
func (l *askWaits) remove(w *askWait) {
	l.mu.Lock()
	if w.s != nil {
		l.unlinkLocked(w)
	}
	l.mu.Unlock()
}

func (l *askWaits) unlinkLocked(w *askWait) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		l.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		l.tail = w.prev
	}
	w.prev, w.next, w.s = nil, nil, nil
}

// fire expires the asks whose deadline passed and arms the timer for the
// next.
func (l *askWaits) fire() {
	var due []expirer
	l.mu.Lock()
	l.armed = false
	now := time.Now()
	for w := l.head; w != nil; w = l.head {
		dl, _ := w.s.deadline()
		if dl.After(now) {
			l.armed = true
			l.t.Reset(dl.Sub(now))
			break
		}
		due = append(due, w.s)
		l.unlinkLocked(w)
	}
	l.mu.Unlock()
	for _, s := range due {
		s.expire()
	}
}
