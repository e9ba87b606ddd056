package runtime

import (
	"testing"
	"testing/synctest"
	"time"
)

// An askWaits list expires each listed slot at its deadline, in order,
// and none that left it.
func TestAskWaitsExpireListedSlotsAtTheirDeadlines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l askWaits
		start := time.Now()
		slots := make([]*slot[int], 4)
		for i := range slots {
			s := &slot[int]{done: make(chan struct{}, 1), dl: start.Add(time.Duration(i+1) * 10 * time.Millisecond)}
			slots[i] = s
			l.add(&s.wait, s, s.dl)
		}
		l.remove(&slots[1].wait)
		slots[2].complete(7, nil)
		l.remove(&slots[2].wait)
		for _, i := range []int{0, 3} {
			<-slots[i].done
			if got, want := time.Since(start), time.Duration(i+1)*10*time.Millisecond; got != want {
				t.Errorf("slot %d expired after %v, want %v", i, got, want)
			}
			if !slots[i].expired || !slots[i].cancelled() {
				t.Errorf("slot %d woke without expiring", i)
			}
		}
		synctest.Wait()
		if slots[1].finished() {
			t.Error("a slot removed from the list expired")
		}
		if slots[2].expired || slots[2].val != 7 {
			t.Error("a completed slot expired")
		}
		if l.head != nil || l.tail != nil {
			t.Error("the list is not empty after every slot left it")
		}
		// Listed again after it emptied: the timer is armed anew.
		s := &slot[int]{done: make(chan struct{}, 1), dl: time.Now().Add(5 * time.Millisecond)}
		l.add(&s.wait, s, s.dl)
		<-s.done
		if !s.expired {
			t.Error("a slot listed after the list emptied did not expire")
		}
	})
}

// A slot whose deadline comes well before the tail's (its delivery waited
// for mailbox room while later asks were listed) is refused, so that the
// list's order, which its one timer relies on, holds; one a moment early
// is taken.
func TestAskWaitsRefuseASlotThatWouldExpireBeforeTheTail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l askWaits
		start := time.Now()
		late := &slot[int]{done: make(chan struct{}, 1), dl: start.Add(10 * time.Second)}
		if !l.add(&late.wait, late, late.dl) {
			t.Fatal("the first slot was refused")
		}
		early := &slot[int]{done: make(chan struct{}, 1), dl: start.Add(time.Second)}
		if l.add(&early.wait, early, early.dl) {
			t.Error("a slot 9 s ahead of the tail was listed: it would expire 9 s late")
		}
		near := &slot[int]{done: make(chan struct{}, 1), dl: late.dl.Add(-outOfOrder / 2)}
		if !l.add(&near.wait, near, near.dl) {
			t.Error("a slot within outOfOrder of the tail was refused")
		}
		<-late.done
		<-near.done
		if got := time.Since(start); got != 10*time.Second {
			t.Errorf("listed slots expired after %v, want 10s", got)
		}
		if early.finished() {
			t.Error("a refused slot was expired by the list")
		}
	})
}
