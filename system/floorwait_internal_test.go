package system

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/troupe-go/troupe/ring"
)

// An acquisition refused by the floor of a copier its view does not show
// waits until the view shows it, and names it from then on; a copier the
// view never shows (a member forgotten since it entered) is named once
// the view had the time to show it; a deadline ends the wait with the
// context's error, naming the copier.
func TestAnAcquisitionWaitsForTheViewToShowAFloorsCopier(t *testing.T) {
	x := ring.NodeID{Addr: "x", Incarnation: 7}
	y := ring.NodeID{Addr: "y", Incarnation: 3}
	t.Run("shown already", func(t *testing.T) {
		s := &states{entered: func(id ring.NodeID) bool { return id == x }, viewLag: time.Minute}
		if err := s.awaitView(t.Context(), entry(x)); err != nil {
			t.Fatal(err)
		}
		if got := s.shownCopiers(); !slices.Equal(got, []ring.NodeID{x}) {
			t.Fatalf("the copiers named are %v, want x", got)
		}
	})
	t.Run("shown by a later view", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var entered atomic.Bool
			s := &states{entered: func(id ring.NodeID) bool { return id == x && entered.Load() }, viewLag: time.Minute}
			awaitsTheViewThatShows(t, s, entry(x), func() { entered.Store(true) })
			if got := s.shownCopiers(); !slices.Equal(got, []ring.NodeID{x}) {
				t.Fatalf("the copiers named are %v, want x", got)
			}
		})
	})
	t.Run("never shown", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := &states{entered: func(ring.NodeID) bool { return false }, viewLag: time.Minute}
			start := time.Now()
			if err := s.awaitView(context.Background(), entry(y)); err != nil {
				t.Fatal(err)
			}
			if waited := time.Since(start); waited != time.Minute {
				t.Fatalf("a copier the view never shows was named after %v, want the view's lag, 1m", waited)
			}
			// Named from then on, without waiting again, even once more
			// copiers than acquisitions name pushed it out of the list.
			for i := range 2 * maxShown {
				s.noteShown(viewFact{id: ring.NodeID{Addr: "m", Incarnation: uint64(i)}})
			}
			if slices.Contains(s.shownCopiers(), y) {
				t.Fatal("y is still named after more copiers than are named")
			}
			start = time.Now()
			if err := s.awaitView(context.Background(), entry(y)); err != nil || time.Since(start) != 0 {
				t.Fatalf("the second wait for y returned %v after %v, want at once", err, time.Since(start))
			}
			if got := s.shownCopiers(); got[0] != y {
				t.Fatalf("after its second wait y is not named first: %v", got)
			}
		})
	})
	t.Run("deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := &states{entered: func(ring.NodeID) bool { return false }, viewLag: time.Minute}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			err := s.awaitView(ctx, entry(y))
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("the wait past its deadline returned %v, want context.DeadlineExceeded", err)
			}
			if len(s.shownCopiers()) != 0 {
				t.Fatalf("a copier the view did not show was named: %v", s.shownCopiers())
			}
			// The time waited counts toward the lag: the next wait is
			// the rest of it.
			start := time.Now()
			if err := s.awaitView(context.Background(), entry(y)); err != nil {
				t.Fatal(err)
			}
			if waited := time.Since(start); waited != time.Minute-time.Second {
				t.Fatalf("the next wait took %v, want the rest of the lag, 59s", waited)
			}
		})
	})
	t.Run("bounded", func(t *testing.T) {
		s := &states{entered: func(id ring.NodeID) bool { return true }, viewLag: time.Minute}
		for i := range 2 * maxShown {
			if err := s.awaitView(t.Context(), entry(ring.NodeID{Addr: "m", Incarnation: uint64(i)})); err != nil {
				t.Fatal(err)
			}
		}
		got := s.shownCopiers()
		if len(got) != maxShown || got[0].Incarnation != 2*maxShown-1 {
			t.Fatalf("after %d copiers the acquisitions name %v, want the last %d, newest first", 2*maxShown, got, maxShown)
		}
		// Used again, a copier named moves first; none is named twice.
		used := got[maxShown-1]
		s.noteShown(viewFact{id: used})
		if got := s.shownCopiers(); got[0] != used || len(got) != maxShown || slices.Contains(got[1:], used) {
			t.Fatalf("after naming %v again the acquisitions name %v, want it first, once", used, got)
		}
		now := time.Now()
		for i := range 2 * maxUnseen {
			s.noteUnseen(viewFact{id: ring.NodeID{Addr: "u", Incarnation: uint64(i)}}, now.Add(time.Duration(i)))
		}
		if len(s.unseen) != maxUnseen {
			t.Fatalf("%d copiers waited for are remembered, want %d", len(s.unseen), maxUnseen)
		}
		for f := range s.unseen {
			if f.id.Incarnation < maxUnseen {
				t.Fatalf("%v, among the first noted, is remembered and a later one is not", f.id)
			}
		}
	})
}

// An acquisition refused by a floor that names a departure its view does
// not show waits until the view shows the member gone from the rings for
// good, and names it gone from then on, apart from the copiers it names; a
// deadline ends the wait naming the departure.
func TestAnAcquisitionWaitsForTheViewToShowAFloorsDeparture(t *testing.T) {
	d := ring.NodeID{Addr: "d", Incarnation: 2}
	synctest.Test(t, func(t *testing.T) {
		var left atomic.Bool
		s := &states{
			entered:  func(ring.NodeID) bool { return true },
			departed: func(id ring.NodeID) bool { return id == d && left.Load() },
			viewLag:  time.Minute,
		}
		awaitsTheViewThatShows(t, s, departure(d), func() { left.Store(true) })
		copiers, gone := s.named()
		if len(copiers) != 0 || !slices.Equal(gone, []ring.NodeID{d}) {
			t.Fatalf("the acquisitions name copiers %v and departures %v, want d gone alone", copiers, gone)
		}
		// Entered and departed are waited for apart: d's entry is not
		// named by its departure.
		if err := s.awaitView(context.Background(), entry(d)); err != nil || !slices.Equal(s.shownCopiers(), []ring.NodeID{d}) {
			t.Fatalf("waiting for d's entry returned %v and names copiers %v", err, s.shownCopiers())
		}
		e := ring.NodeID{Addr: "e", Incarnation: 1}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := s.awaitView(ctx, departure(e)); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "departure of "+e.String()) {
			t.Fatalf("the wait past its deadline returned %v, want context.DeadlineExceeded naming e's departure", err)
		}
	})
}

// A change of the view that brings members into a stored type's ring or
// takes them out of it for good has every later acquisition name them (as
// copiers, and gone), so that the keys of the ranges they moved pass the
// floors of those hand-offs without a refusal each; a member out of the
// ring but not gone for good (a dead member is in it until removed) is
// not named gone.
func TestAViewChangeNamesTheMembersItBroughtInAndTookOutOfTheRings(t *testing.T) {
	a, b, c, d, e := nid(1), nid(2), nid(3), nid(4), nid(5)
	before := ring.New([]ring.NodeID{a, b, c, d})
	after := before.Without(c).Without(d).With(e)
	s := &states{
		ring:     func(string) *ring.Ring { return after },
		entered:  func(id ring.NodeID) bool { return id != c && id != d },
		departed: func(id ring.NodeID) bool { return id == c },
	}
	s.viewChanged(map[string]*ring.Ring{"t": before})
	copiers, gone := s.named()
	if !slices.Equal(gone, []ring.NodeID{c}) {
		t.Fatalf("after a change that took c (gone) and d (not gone for good) out of the ring, acquisitions name %v gone, want c", gone)
	}
	if !slices.Equal(copiers, []ring.NodeID{e}) {
		t.Fatalf("after a change that brought e into the ring, acquisitions name copiers %v, want e", copiers)
	}
}

// entry and departure are the changes of the view a floor names.
func entry(id ring.NodeID) viewFact     { return viewFact{id: id} }
func departure(id ring.NodeID) viewFact { return viewFact{id: id, gone: true} }

// shownCopiers returns the copiers the view showed most recently.
func (s *states) shownCopiers() []ring.NodeID {
	copiers, _ := s.named()
	return copiers
}

// awaitsTheViewThatShows checks, in a synctest bubble, that s's wait for f
// outlasts a change of the view that does not show f and ends at the one,
// a second later, that does (show makes the view show f).
func awaitsTheViewThatShows(t *testing.T, s *states, f viewFact, show func()) {
	t.Helper()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- s.awaitView(context.Background(), f) }()
	synctest.Wait()
	s.viewChanged(nil) // a change that does not show f
	synctest.Wait()
	select {
	case err := <-done:
		t.Fatalf("the wait for %+v ended at a view that does not show it: %v", f, err)
	default:
	}
	time.Sleep(time.Second)
	show()
	s.viewChanged(nil)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited != time.Second {
		t.Fatalf("the wait for %+v ended after %v, want at the view that showed it, 1s in", f, waited)
	}
}
