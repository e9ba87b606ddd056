//go:build linux

package runtime

import (
	"context"
	"errors"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// A waker is what an asker waits on for a reply from another node: an
// eventfd in the network poller. Completing a channel readies the
// waiting goroutine, and the Go scheduler then wakes an idle thread for
// it (wakep: a futex call, a thread switched in to spin and sleep
// again), whatever goroutine the completing thread runs next. A reply
// is completed by wire's reader, which parks in the poller right after;
// a goroutine the poller readies is picked up by that very thread as it
// looks for work (findRunnable polls the network before it sleeps), so
// the asker runs where the reader ran, without the wake-up, as the
// client of a bare TCP round trip does.
//
// The eventfd is never read. Each write of it is an edge in the poller
// (Go registers edge-triggered, and an eventfd wakes its pollers on
// every write, whatever its count), and the waiter looks at its outcome
// instead of the count: no read that finds the count, none that finds
// it empty before parking, and no EPOLLOUT edge that a read of a
// non-zero count raises (a needless poller event per ask that made the
// asker's thread call epoll_pwait again). The count only grows, by one
// per reply: 2^64 writes are never reached.
type waker struct {
	f      *os.File
	rc     syscall.RawConn
	fd     int
	readFn func(fd uintptr) bool
	wakeFn func()          // w.wake, made once: a method value allocates
	until  outcomer        // the slot of the ask waiting, during wait
	quit   <-chan struct{} // its context's Done, from arm to the wait's end
	stop   func() bool     // ends arm's watch of the context, if any
}

var wakers sync.Pool

// getWaker returns a waker from the pool, or a new one; nil if the
// system has none to give (no eventfd), in which case the asker waits on
// its channel.
func getWaker() *waker {
	if w, ok := wakers.Get().(*waker); ok {
		return w
	}
	fd, _, e := syscall.RawSyscall(syscall.SYS_EVENTFD2, 0, syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if e != 0 {
		return nil
	}
	// A non-blocking descriptor: the file waits in the poller. The
	// file's cleanup closes it once the waker is dropped.
	f := os.NewFile(fd, "troupe-ask-waker")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil
	}
	w := &waker{f: f, rc: rc, fd: int(fd)}
	w.readFn = w.read
	w.wakeFn = w.wake
	return w
}

func putWaker(w *waker) { wakers.Put(w) }

// wake makes the waiter's read succeed. A wake that comes after its
// waiter left (it saw the outcome first) only makes a later waiter of
// this waker look again.
func (w *waker) wake() {
	one := uint64(1)
	for {
		_, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(w.fd), uintptr(unsafe.Pointer(&one)), 8)
		if e != syscall.EINTR {
			break
		}
	}
	runtime.KeepAlive(w)
}

// read is the RawConn callback: true once the outcome is set or the
// context ended, false to wait in the poller. The poller's readiness is
// reset before the first call, so an edge left from an earlier use of
// the waker costs at most one more look.
func (w *waker) read(uintptr) bool {
	if w.until.outcomeSet() {
		return true
	}
	select {
	case <-w.quit:
		return true
	default:
		return false
	}
}

// arm prepares w to wait for the outcome of an ask about to leave, until
// dl (if not zero) or the end of ctx. The asker arms before the request
// is written, so that after the write only the wait is left: the peer
// runs as soon as the write wakes it, best while the asker's thread is
// about to sleep, not busy. ctx cannot end or is watchable (Ask parks
// only then): a context of package context (cancelCtx, timerCtx, values
// on them: what context.WithTimeout gives) takes the wake as a child,
// under its lock, so nothing runs until it ends and its deadline needs no
// timer of ours. AfterFunc on any other context would start a goroutine
// that calls its Done later, which for a handler's Context races with the
// cell's reuse of it once the handler returned.
func (w *waker) arm(ctx context.Context, dl time.Time) {
	if quit := ctx.Done(); quit != nil {
		w.stop = context.AfterFunc(ctx, w.wakeFn)
		w.quit = quit
	}
	// A deadline moved later modifies the poller's timer in place: no
	// wake-up of a thread, unlike a timer started afresh per ask.
	w.f.SetReadDeadline(dl)
}

// disarm undoes arm, for an ask that never waited.
func (w *waker) disarm() {
	if w.stop != nil {
		w.stop()
		w.stop = nil
	}
	w.until, w.quit = nil, nil
}

// waitArmed waits, once arm was called with ctx, until until's outcome
// is set, the deadline armed passes or ctx ends, and returns the cause of
// giving up, or nil.
func (w *waker) waitArmed(ctx context.Context, until outcomer) error {
	w.until = until
	err := w.rc.Read(w.readFn)
	w.disarm()
	if until.outcomeSet() {
		return nil
	}
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return context.DeadlineExceeded
		}
		return err
	}
	return ctx.Err()
}
