package delayproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"syscall"
	"time"
)

// Config describes a proxy. Target is required; every other zero value
// means the documented default.
type Config struct {
	// Target is the address dialled for each accepted connection.
	Target string
	// Listen is the address to listen on. Default "127.0.0.1:0". Ignored
	// when Listener is set.
	Listen string
	// Listener, if set, is used instead of listening on Listen; the proxy
	// closes it on shutdown. Its receive buffers are not resized, so set
	// QueueDelay's effect yourself if it matters.
	Listener net.Listener
	// Dial, if set, replaces net.Dialer for reaching Target (for example
	// netns Host.Dial). Its receive buffers are not resized either.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)

	// Delay is the one-way delay added in each direction. Default 0.
	Delay time.Duration
	// Jitter adds a uniform extra delay in [0, Jitter) per chunk, drawn
	// from Seed, without reordering. Default 0.
	Jitter time.Duration
	// Bandwidth caps each direction, in bytes per second, shared by all
	// connections. Default 0: no cap.
	Bandwidth int64
	// QueueDelay is about how much traffic, in time at Bandwidth, may
	// queue at the cap before the sender is pushed back: the proxy books
	// that much ahead and sizes its socket receive buffers to match.
	// Default 20 ms. Only with a Bandwidth.
	QueueDelay time.Duration
	// MaxInFlight bounds the bytes held in one direction's delay line.
	// Default 16 MiB.
	MaxInFlight int
	// Seed seeds the jitter of every connection. Default 0 (a valid seed).
	Seed uint64
	// DialTimeout bounds the dial to Target. Default 5 s.
	DialTimeout time.Duration
}

const chunkSize = 16 << 10

func (c Config) withDefaults() Config {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:0"
	}
	if c.QueueDelay == 0 {
		c.QueueDelay = 20 * time.Millisecond
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = 16 << 20
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = 5 * time.Second
	}
	return c
}

// Validate reports a Config that New would refuse.
func (c Config) Validate() error {
	switch {
	case c.Target == "":
		return fmt.Errorf("%w: Target is empty", ErrConfig)
	case c.Delay < 0:
		return fmt.Errorf("%w: Delay = %s, want >= 0", ErrConfig, c.Delay)
	case c.Jitter < 0:
		return fmt.Errorf("%w: Jitter = %s, want >= 0", ErrConfig, c.Jitter)
	case c.Bandwidth < 0:
		return fmt.Errorf("%w: Bandwidth = %d, want >= 0 bytes/s", ErrConfig, c.Bandwidth)
	case c.QueueDelay < 0:
		return fmt.Errorf("%w: QueueDelay = %s, want >= 0", ErrConfig, c.QueueDelay)
	case c.MaxInFlight < 0:
		return fmt.Errorf("%w: MaxInFlight = %d, want >= 0", ErrConfig, c.MaxInFlight)
	case c.DialTimeout < 0:
		return fmt.Errorf("%w: DialTimeout = %s, want >= 0", ErrConfig, c.DialTimeout)
	}
	return nil
}

// Shape is the part of a Config that can change while the proxy runs.
type Shape struct {
	Delay     time.Duration
	Jitter    time.Duration
	Bandwidth int64 // bytes per second; 0 means no cap
}

// Proxy is a running delay proxy. Its methods are safe for concurrent use.
type Proxy struct {
	cfg  Config
	ln   net.Listener
	stop context.CancelFunc
	done chan struct{} // closed when the context ends
	wg   sync.WaitGroup

	links [2]link // 0: client→target, 1: target→client

	mu       sync.Mutex
	shape    Shape
	pairs    map[*pair]struct{}
	seq      uint64
	accepted int
}

// link is one direction's bandwidth: when it next becomes free.
type link struct {
	mu   sync.Mutex
	free time.Time
}

// reserve books n bytes on the link and returns when they finish crossing.
func (l *link) reserve(now time.Time, n int, bandwidth int64) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	start := now
	if l.free.After(start) {
		start = l.free
	}
	end := start
	if bandwidth > 0 {
		end = start.Add(time.Duration(float64(n) / float64(bandwidth) * float64(time.Second)))
	}
	l.free = end
	return end
}

// New starts a proxy that serves until ctx ends or Close.
func New(ctx context.Context, cfg Config) (*Proxy, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	ln := cfg.Listener
	if ln == nil {
		lc := net.ListenConfig{Control: rcvbufControl(cfg.Bandwidth, cfg.QueueDelay)}
		var err error
		ln, err = lc.Listen(ctx, "tcp", cfg.Listen)
		if err != nil {
			return nil, fmt.Errorf("troupe: delayproxy: listen %s: %w", cfg.Listen, err)
		}
	}
	ctx, stop := context.WithCancel(ctx)
	p := &Proxy{
		cfg:   cfg,
		ln:    ln,
		stop:  stop,
		done:  make(chan struct{}),
		shape: Shape{Delay: cfg.Delay, Jitter: cfg.Jitter, Bandwidth: cfg.Bandwidth},
		pairs: make(map[*pair]struct{}),
	}
	p.wg.Add(2)
	go func() {
		defer p.wg.Done()
		<-ctx.Done()
		close(p.done)
		_ = p.ln.Close()
		p.breakAll(true)
	}()
	go func() {
		defer p.wg.Done()
		p.serve(ctx)
	}()
	return p, nil
}

// rcvbufControl shrinks socket receive buffers under a bandwidth cap, so
// the queue in front of the cap stays about queue long.
func rcvbufControl(bandwidth int64, queue time.Duration) func(network, address string, c syscall.RawConn) error {
	if bandwidth <= 0 {
		return nil
	}
	size := max(int(float64(bandwidth)*queue.Seconds()), 2*chunkSize)
	return func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, size)
		})
		return errors.Join(err, serr)
	}
}

// Addr is the address clients dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Accepted reports how many connections the proxy has accepted.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// Conns reports how many proxied connections are open.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pairs)
}

// Shape returns the current delay, jitter and bandwidth.
func (p *Proxy) Shape() Shape {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.shape
}

// SetShape changes delay, jitter and bandwidth for bytes read from now on.
// Socket buffers sized at listen time stay as they were.
func (p *Proxy) SetShape(s Shape) error {
	if s.Delay < 0 || s.Jitter < 0 || s.Bandwidth < 0 {
		return fmt.Errorf("%w: shape %+v has a negative field", ErrConfig, s)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.shape = s
	return nil
}

// CutAll closes every proxied connection abruptly on both sides (FIN).
func (p *Proxy) CutAll() { p.breakAll(false) }

// ResetAll closes every proxied connection with an RST on both sides.
func (p *Proxy) ResetAll() { p.breakAll(true) }

// Close stops the proxy, resets its connections and waits for its
// goroutines to finish.
func (p *Proxy) Close() error {
	p.stop()
	p.wg.Wait()
	return nil
}

func (p *Proxy) breakAll(reset bool) {
	p.mu.Lock()
	pairs := make([]*pair, 0, len(p.pairs))
	for pr := range p.pairs {
		pairs = append(pairs, pr)
	}
	p.mu.Unlock()
	for _, pr := range pairs {
		pr.abort(reset)
	}
}

func (p *Proxy) serve(ctx context.Context) {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.accepted++
		p.seq++
		seq := p.seq
		p.mu.Unlock()
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.handle(ctx, c, seq)
		}()
	}
}

func (p *Proxy) dial(ctx context.Context) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
	defer cancel()
	if p.cfg.Dial != nil {
		return p.cfg.Dial(ctx, "tcp", p.cfg.Target)
	}
	d := net.Dialer{Control: rcvbufControl(p.cfg.Bandwidth, p.cfg.QueueDelay)}
	return d.DialContext(ctx, "tcp", p.cfg.Target)
}

func (p *Proxy) handle(ctx context.Context, client net.Conn, seq uint64) {
	target, err := p.dial(ctx)
	if err != nil {
		// The client sees what it would see without the proxy: a reset.
		setLinger0(client)
		_ = client.Close()
		return
	}
	pr := &pair{conns: [2]net.Conn{client, target}}
	p.mu.Lock()
	select {
	case <-p.done:
		p.mu.Unlock()
		pr.abort(true)
		return
	default:
	}
	p.pairs[pr] = struct{}{}
	p.mu.Unlock()

	var wg sync.WaitGroup
	for dir := range 2 {
		rng := rand.New(rand.NewPCG(p.cfg.Seed, seq<<1|uint64(dir)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.pump(pr, dir, rng)
		}()
	}
	wg.Wait()
	pr.abort(false)
	p.mu.Lock()
	delete(p.pairs, pr)
	p.mu.Unlock()
}

// pair is one proxied connection: conns[0] the client, conns[1] the target.
type pair struct {
	conns [2]net.Conn
	once  sync.Once
}

func (pr *pair) abort(reset bool) {
	pr.once.Do(func() {
		for _, c := range pr.conns {
			if reset {
				setLinger0(c)
			}
			_ = c.Close()
		}
	})
}

func setLinger0(c net.Conn) {
	if l, ok := c.(interface{ SetLinger(int) error }); ok {
		_ = l.SetLinger(0)
	}
}

// chunk is a piece of one direction's stream on its way through the link.
type chunk struct {
	data []byte
	at   time.Time // when to deliver
	eof  bool      // the source half-closed: half-close the destination
	err  bool      // the source failed: tear the pair down
}

// pump carries direction dir: reads from conns[dir], writes to conns[1-dir].
func (p *Proxy) pump(pr *pair, dir int, rng *rand.Rand) {
	src, dst := pr.conns[dir], pr.conns[1-dir]
	line := make(chan chunk, max(p.cfg.MaxInFlight/chunkSize, 1))
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		p.deliver(pr, dst, line)
	}()
	defer func() { <-writerDone }()
	defer close(line)

	sched := schedule{link: &p.links[dir], rng: rng}
	buf := make([]byte, chunkSize)
	for {
		n, err := src.Read(buf)
		c := chunk{at: sched.due(time.Now(), n, p.Shape())}
		if n > 0 {
			c.data = buf[:n]
			if n > chunkSize/4 {
				buf = make([]byte, chunkSize) // hand the full buffer over
			} else {
				c.data = append([]byte(nil), c.data...) // small: copy, keep buf
			}
		}
		if err != nil {
			c.eof = errors.Is(err, io.EOF)
			c.err = !c.eof
		}
		if n > 0 || err != nil {
			select {
			case line <- c:
			case <-writerDone:
				return // the writer failed and tore the pair down
			}
		}
		if err != nil {
			return
		}
		// Pace reading to the link, booking at most QueueDelay ahead, so
		// the rest of the queue stays in the kernel's (shrunken) buffers
		// and pushes back on the sender, while late timers never idle
		// the link.
		if wait := time.Until(p.links[dir].freeAt()) - p.cfg.QueueDelay; wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-writerDone:
				t.Stop()
				return
			}
		}
	}
}

func (l *link) freeAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.free
}

// deliver writes chunks to dst when they are due.
func (p *Proxy) deliver(pr *pair, dst net.Conn, line <-chan chunk) {
	for c := range line {
		if wait := time.Until(c.at); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-p.done:
				t.Stop()
				pr.abort(true)
				return
			}
		}
		if len(c.data) > 0 {
			if _, err := dst.Write(c.data); err != nil {
				pr.abort(true)
				return
			}
		}
		switch {
		case c.err:
			pr.abort(true)
			return
		case c.eof:
			if cw, ok := dst.(interface{ CloseWrite() error }); ok {
				_ = cw.CloseWrite()
			} else {
				pr.abort(false)
			}
			return
		}
	}
}
