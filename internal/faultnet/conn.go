package faultnet

import (
	"net"
	"os"
	"slices"
	"sync"
	"time"
)

// Conn is a net.Conn with scheduled and manual faults. It is safe for the
// concurrent use net.Conn allows.
type Conn struct {
	inner net.Conn

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every state change
	pending []Fault       // not yet fired, sorted by At
	fired   []Fault
	written int64
	read    int64
	held    []byte // bytes read from inner while reads were stalled
	stallW  bool
	stallR  bool
	parted  bool  // reads stalled by a Network partition
	broken  error // ErrCut or ErrReset once the connection was broken
	closed  bool
	rdl     time.Time
	wdl     time.Time
}

// Wrap returns c with faults scheduled. Faults at offset 0 fire at once.
func Wrap(c net.Conn, faults ...Fault) *Conn {
	fc := &Conn{inner: c, changed: make(chan struct{})}
	fc.pending = slices.Clone(faults)
	slices.SortStableFunc(fc.pending, func(a, b Fault) int {
		switch {
		case a.At < b.At:
			return -1
		case a.At > b.At:
			return 1
		}
		return 0
	})
	fc.mu.Lock()
	fc.fireDueLocked(Write)
	fc.fireDueLocked(Read)
	fc.mu.Unlock()
	return fc
}

// Unwrap returns the wrapped connection.
func (c *Conn) Unwrap() net.Conn { return c.inner }

// Written reports how many bytes this side has written through the wrapper.
func (c *Conn) Written() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.written
}

// ReadBytes reports how many bytes this side has read through the wrapper.
func (c *Conn) ReadBytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.read
}

// Fired lists the scheduled faults that have fired, in order.
func (c *Conn) Fired() []Fault {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.fired)
}

// Broken reports whether the connection was cut or reset.
func (c *Conn) Broken() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.broken != nil
}

// Cut closes the connection abruptly now; the peer reads EOF.
func (c *Conn) Cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.breakLocked(Cut)
}

// Reset closes the connection with a TCP RST now.
func (c *Conn) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.breakLocked(Reset)
}

// Stall stops delivery in both directions until Resume.
func (c *Conn) Stall() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stallW, c.stallR = true, true
	c.signalLocked()
}

// Resume undoes Stall and any stall fault that fired. It does not lift a
// Network partition; Network.Heal does.
func (c *Conn) Resume() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stallW, c.stallR = false, false
	c.signalLocked()
}

func (c *Conn) setPartitioned(p bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.parted = p
	c.signalLocked()
}

// Read reads through the wrapper, honouring read faults and stalls.
func (c *Conn) Read(p []byte) (int, error) {
	c.mu.Lock()
	if err := c.waitWhile(c.readStalledLocked, func() time.Time { return c.rdl }); err != nil {
		c.mu.Unlock()
		return 0, c.opErr("read", err)
	}
	if len(c.held) > 0 {
		n := copy(p, c.held)
		c.held = c.held[n:]
		c.read += int64(n)
		c.fireDueLocked(Read)
		c.mu.Unlock()
		return n, nil
	}
	buf := p
	if lim, ok := c.limitLocked(Read); ok && int64(len(buf)) > lim {
		buf = buf[:lim]
	}
	c.mu.Unlock()

	n, err := c.inner.Read(buf)

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken != nil && err != nil {
		return n, c.opErr("read", c.broken)
	}
	if n > 0 && c.readStalledLocked() {
		// The stall began while the read was in flight: hold the bytes
		// back, as a stalled path would.
		if werr := c.waitWhile(c.readStalledLocked, func() time.Time { return c.rdl }); werr != nil {
			c.held = append(c.held, buf[:n]...)
			return 0, c.opErr("read", werr)
		}
	}
	c.read += int64(n)
	c.fireDueLocked(Read)
	return n, err
}

// Write writes through the wrapper, honouring write faults and stalls. When
// a cut falls inside p, the bytes before it are written and the count of
// them is returned with the error.
func (c *Conn) Write(p []byte) (int, error) {
	total := 0
	for {
		c.mu.Lock()
		if err := c.waitWhile(c.writeStalledLocked, func() time.Time { return c.wdl }); err != nil {
			c.mu.Unlock()
			return total, c.opErr("write", err)
		}
		chunk := p
		if lim, ok := c.limitLocked(Write); ok && int64(len(chunk)) > lim {
			chunk = chunk[:lim]
		}
		c.mu.Unlock()

		n, err := c.inner.Write(chunk)

		c.mu.Lock()
		c.written += int64(n)
		c.fireDueLocked(Write)
		broken := c.broken
		c.mu.Unlock()
		total += n
		p = p[n:]
		if err != nil {
			if broken != nil {
				return total, c.opErr("write", broken)
			}
			return total, err
		}
		if len(p) == 0 {
			return total, nil
		}
	}
}

// Close closes the connection. Closing a cut connection returns nil.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return c.opErr("close", net.ErrClosed)
	}
	c.closed = true
	c.signalLocked()
	if c.broken != nil {
		return nil
	}
	return c.inner.Close()
}

// LocalAddr returns the wrapped connection's local address.
func (c *Conn) LocalAddr() net.Addr { return c.inner.LocalAddr() }

// RemoteAddr returns the wrapped connection's remote address.
func (c *Conn) RemoteAddr() net.Addr { return c.inner.RemoteAddr() }

// SetDeadline sets both deadlines; they also bound waits in a stall.
func (c *Conn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.rdl, c.wdl = t, t
	c.signalLocked()
	c.mu.Unlock()
	return c.inner.SetDeadline(t)
}

// SetReadDeadline sets the read deadline; it also bounds a read stall.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.rdl = t
	c.signalLocked()
	c.mu.Unlock()
	return c.inner.SetReadDeadline(t)
}

// SetWriteDeadline sets the write deadline; it also bounds a write stall.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.wdl = t
	c.signalLocked()
	c.mu.Unlock()
	return c.inner.SetWriteDeadline(t)
}

func (c *Conn) readStalledLocked() bool { return c.stallR || c.parted }

// A partition holds bytes at the receiving end: writes go on until the
// buffers between the two ends fill, as across a real partition.
func (c *Conn) writeStalledLocked() bool { return c.stallW }

func (c *Conn) signalLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// waitWhile blocks while stalled() holds, releasing c.mu while it waits. It
// returns the reason to give up: close, break, or deadline.
func (c *Conn) waitWhile(stalled func() bool, deadline func() time.Time) error {
	for {
		switch {
		case c.closed:
			return net.ErrClosed
		case c.broken != nil:
			return c.broken
		case !stalled():
			return nil
		}
		var timeout <-chan time.Time
		var timer *time.Timer
		if dl := deadline(); !dl.IsZero() {
			d := time.Until(dl)
			if d <= 0 {
				return os.ErrDeadlineExceeded
			}
			timer = time.NewTimer(d)
			timeout = timer.C
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-timeout:
		}
		if timer != nil {
			timer.Stop()
		}
		c.mu.Lock()
	}
}

// limitLocked returns how many bytes may pass in dir before the next fault.
func (c *Conn) limitLocked(dir Direction) (int64, bool) {
	count := c.countLocked(dir)
	for _, f := range c.pending {
		if f.Dir == dir {
			return max(f.At-count, 0), true
		}
	}
	return 0, false
}

func (c *Conn) countLocked(dir Direction) int64 {
	if dir == Write {
		return c.written
	}
	return c.read
}

// fireDueLocked fires every pending fault in dir whose offset was reached.
func (c *Conn) fireDueLocked(dir Direction) {
	count := c.countLocked(dir)
	kept := c.pending[:0]
	var due []Fault
	for _, f := range c.pending {
		if f.Dir == dir && f.At <= count {
			due = append(due, f)
			continue
		}
		kept = append(kept, f)
	}
	c.pending = kept
	for _, f := range due {
		c.fired = append(c.fired, f)
		switch f.Kind {
		case Stall:
			if dir == Write {
				c.stallW = true
			} else {
				c.stallR = true
			}
			c.signalLocked()
		case Cut, Reset:
			c.breakLocked(f.Kind)
		}
	}
}

// resetter is implemented by connections that can close with an RST.
type resetter interface{ SetLinger(sec int) error }

func (c *Conn) breakLocked(k Kind) {
	if c.broken != nil || c.closed {
		return
	}
	c.broken = ErrCut
	if k == Reset {
		c.broken = ErrReset
		if r, ok := c.inner.(resetter); ok {
			_ = r.SetLinger(0)
		}
	}
	_ = c.inner.Close()
	c.signalLocked()
}

func (c *Conn) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: c.inner.LocalAddr().Network(), Source: c.inner.LocalAddr(), Addr: c.inner.RemoteAddr(), Err: err}
}
