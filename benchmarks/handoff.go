package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/system"
)

// The handoff-transfer workload: a member joins a cluster whose members
// hold stored state, and receives its share while a client keeps asking
// a small actor; the rate it received at is compared with bulk TCP over
// loopback in the same run, and the asks' p99 with their p99 before the
// join.

// Messages of rblob, a key holding a blob of bytes.
type (
	blobMsg interface{ blobMsg() }
	// bFill sets the blob to Size pseudo-random bytes drawn from Seed
	// and answers the size. Random, so that the transport's compression
	// does not shrink what is transferred.
	bFill struct {
		Seed uint64
		Size int
		actor.Reply[blobMsg, int]
	}
)

func (bFill) blobMsg() {}

func blobHandler(c *actor.Context[[]byte, blobMsg], m blobMsg) error {
	switch m := m.(type) {
	case bFill:
		var seed [32]byte
		binary.LittleEndian.PutUint64(seed[:], m.Seed)
		b := make([]byte, m.Size)
		rand.NewChaCha8(seed).Read(b)
		c.SetState(b)
		return actor.Respond(c, m, len(b))
	}
	return nil
}

// rblob keeps three copies of each blob, written at Majority: the state
// that a joining member receives.
var rblob = actor.Define("rblob", blobHandler,
	actor.WithReplicas(replicas, actor.WriteMajority)).WithMessages(bFill{})

// handoffAskKeys are the rcounter keys the ask load goes round.
const handoffAskKeys = 64

// Ways a member comes to receive state (-handoff-via).
const (
	viaJoin    = "join"    // a new member joins with an empty DataDir
	viaRestart = "restart" // a member is killed (kill -9) and restarts on its DataDir: it catches the whole ring up
)

// errNoHandoff is the workload's failure when the member never reports
// receiving anything.
var errNoHandoff = errors.New("the member received no state: its Stats.Receiving and Stats.ReceivedBytes stayed 0 (a Troupe whose joining member counts at once, or that does not fill them)")

// handoffResult is what one handoff-transfer measured.
type handoffResult struct {
	// The transfer is timed from when the member was up (system.Start
	// returned, its stats first read): bytes it received since then, in
	// transfer. Its start and join, and what it received meanwhile, are
	// up and early.
	bytes, early int64
	transfer, up time.Duration
	bulk         time.Duration // bulk TCP of bytes
	// The asks' latencies before the member came, from its start until
	// it received all, and after; streaming are the asks of during that
	// started once it was up.
	idle, during, streaming, after []time.Duration
	idleFailed, duringFailed       int
	// settle is how long the members took to be quiet after the fill.
	settle time.Duration
}

// quietNodes waits until the nodes ns use less than a tenth of a core
// together over half a second and returns how long that took, or fails
// once limit passed or a node's CPU time cannot be read.
func quietNodes(ns []*node, limit time.Duration) (time.Duration, error) {
	const window, most = 500 * time.Millisecond, 50 * time.Millisecond
	cpu := func() (d time.Duration, err error) {
		for _, n := range ns {
			c := procCPU(n.cmd.Process.Pid)
			if c == 0 {
				return 0, fmt.Errorf("no CPU time of node %d", n.cmd.Process.Pid)
			}
			d += c
		}
		return d, nil
	}
	start := time.Now()
	before, err := cpu()
	for err == nil {
		if time.Since(start) > limit {
			return 0, fmt.Errorf("the members were still busy %v after the fill", limit)
		}
		time.Sleep(window) // a sample of CPU time, not a synchronisation
		var now time.Duration
		if now, err = cpu(); err == nil && now-before < most {
			return time.Since(start), nil
		}
		before = now
	}
	return 0, err
}

// statsAnswer is a member's answer to the query "stats": its Receiving
// and ReceivedBytes.
func statsAnswer(st system.Stats) string {
	return strconv.Itoa(st.Receiving) + " " + strconv.FormatInt(st.ReceivedBytes, 10)
}

// parseStats reads statsAnswer's answer.
func parseStats(a string) (receiving int, bytes int64, err error) {
	r, b, ok := strings.Cut(a, " ")
	if ok {
		if receiving, err = strconv.Atoi(r); err == nil {
			bytes, err = strconv.ParseInt(b, 10, 64)
		}
	}
	if !ok || err != nil {
		return 0, 0, fmt.Errorf("stats answer %q: want <receiving> <bytes>", a)
	}
	return receiving, bytes, nil
}

// transferWatch tells, from a member's successive Stats samples, when it
// finished receiving: no range left to receive, once it was seen
// receiving or having received something (before that, its hand-off may
// not have started).
type transferWatch struct {
	started bool
	bytes   int64
}

// observe takes one sample and reports whether the transfer is over.
func (w *transferWatch) observe(receiving int, bytes int64) (done bool) {
	w.started = w.started || receiving > 0 || bytes > 0
	w.bytes = bytes
	return w.started && receiving == 0
}

// HandoffTransfer starts a cluster of three node processes (badger
// DataDirs), fills keys keys of rblob with value bytes each from fillers
// goroutines through a client, measures the ask load (askers goroutines,
// rate asks/s in all on rcounter) for idle, then brings a member that
// must receive state (via: a fourth one joins, or the third restarts
// after a kill -9) and measures the ask load until the member reports,
// polled through its Stats, that it received all, and for idle more;
// then bulk TCP of as many bytes. clk times the transfer. A member that
// shows no sign of receiving for quiet once up fails it with
// errNoHandoff.
func (troupePeer) HandoffTransfer(clk *clock, keys, value, fillers, askers int, rate float64, idle, quiet time.Duration, via string, catchUpRate int) (r handoffResult, err error) {
	dir, err := os.MkdirTemp("", "troupe-bench-handoff-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	dataDir := func(i int) string { return dataEnv + "=" + filepath.Join(dir, strconv.Itoa(i)) }
	rateEnv := catchUpEnv + "=" + strconv.Itoa(catchUpRate)
	ns, err := startCluster(3, "default", func(i int) []string { return []string{dataDir(i), rateEnv} })
	if err != nil {
		return r, err
	}
	defer func() { stopAll(ns) }()
	c, err := newClient(ns)
	if err != nil {
		return r, err
	}
	defer c.Close()

	if err := inParallel(fillers, keys, func(i int) error {
		_, err := askSettling(context.Background(), rblob.Ref(c, activationKey(i)), bFill{Seed: uint64(i), Size: value})
		return err
	}); err != nil {
		return r, fmt.Errorf("filling %d keys: %w", keys, err)
	}
	refs := make([]actor.Ref[rcMsg], handoffAskKeys)
	for i := range refs {
		refs[i] = rcounter.Ref(c, "a"+strconv.Itoa(i))
		if _, err := askSettling(context.Background(), refs[i], rGet{}); err != nil {
			return r, err
		}
	}

	// The fill leaves badger flushing and compacting for seconds: the
	// idle window waits until the members are quiet, so that it is idle.
	if r.settle, err = quietNodes(ns, 60*time.Second); err != nil {
		return r, err
	}

	// One ask load runs from here to the end of the transfer and idle
	// more. Its idle window follows a second unmeasured.
	load := startAskLoad(refs, askers, rate)
	loading := true
	defer func() {
		if loading {
			load.stop()
		}
	}()
	from := time.Now().Add(askWarmup)
	t := time.NewTimer(askWarmup + idle) // a measurement's length
	<-t.C
	idleEnd := time.Now()

	var env []string
	switch via {
	case viaJoin:
		seeds := make([]string, len(ns))
		for i, n := range ns {
			seeds[i] = n.addr
		}
		env = []string{timesEnv + "=default", seedsEnv + "=" + strings.Join(seeds, ","), dataDir(len(ns)), rateEnv}
	case viaRestart:
		// Once the others hold the killed member dead, the catch-up of
		// its restart reads from them alone.
		victim := ns[len(ns)-1]
		env = victim.env
		victim.kill()
		ns = ns[:len(ns)-1]
		wctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		_, err := c.WaitAlive(wctx, len(ns))
		cancel()
		if err != nil {
			return r, fmt.Errorf("waiting for the killed member to be held dead: %w", err)
		}
	default:
		return r, fmt.Errorf("-handoff-via %q: want %s or %s", via, viaJoin, viaRestart)
	}

	for _, n := range ns {
		clk.node(n.cmd.Process.Pid)
		if os.Getenv(profEnv) != "" { // the transfer's own profile
			if _, err := n.query("profile handoff"); err != nil {
				return r, err
			}
		}
	}
	clk.start()
	t0 := time.Now()
	m, err := startNode("troupe", env...)
	if err != nil {
		return r, err
	}
	ns = append(ns, m)
	clk.node(m.cmd.Process.Pid)
	r.up = time.Since(t0)
	tr, err := watchTransfer(m, quiet, 10*time.Minute)
	clk.stop()
	if err != nil {
		return r, err
	}
	r.early, r.bytes, r.transfer = tr.upBytes, tr.doneBytes-tr.upBytes, tr.done.Sub(tr.up)
	if r.transfer <= 0 {
		// Done before it was up: time it from its start, a bound.
		r.early, r.bytes, r.transfer = 0, tr.doneBytes, tr.done.Sub(t0)
	}
	t.Reset(idle) // the window after the transfer
	<-t.C
	asks := load.stop()
	loading = false

	// An idle ask still out when the member came (its node killed, with
	// -handoff-via restart) tells of the member, not of idle.
	r.idle, r.idleFailed, err = window(endedBy(asks, idleEnd), from, idleEnd)
	if len(r.idle) == 0 {
		return r, fmt.Errorf("no ask succeeded before the member came (%d failed): %v", r.idleFailed, err)
	}
	r.during, r.duringFailed, err = window(asks, t0, tr.done)
	if len(r.during) == 0 {
		return r, fmt.Errorf("no ask succeeded during the transfer (%d failed): %v", r.duringFailed, err)
	}
	r.streaming, _, _ = window(asks, tr.up, tr.done)
	r.after, _, _ = window(asks, tr.done, time.Time{})

	sink, err := startNode("sink")
	if err != nil {
		return r, err
	}
	defer sink.stop(time.Second)
	r.bulk, err = bulkTCP(sink.addr, r.bytes)
	return r, err
}

// transferTimes are the first and the last of a member's stats samples
// that watchTransfer read: when, and the bytes received by then.
type transferTimes struct {
	up, done           time.Time
	upBytes, doneBytes int64
}

// watchTransfer polls m's Stats until it received all it receives. It
// fails with errNoHandoff when m shows no sign of receiving for quiet,
// and when the transfer takes longer than limit.
func watchTransfer(m *node, quiet, limit time.Duration) (transferTimes, error) {
	var w transferWatch
	var tt transferTimes
	poll := time.NewTicker(5 * time.Millisecond) // the resolution of the transfer time
	defer poll.Stop()
	for first := true; ; first = false {
		a, err := m.query("stats")
		now := time.Now()
		if err != nil {
			return tt, err
		}
		receiving, bytes, err := parseStats(a)
		if err != nil {
			return tt, err
		}
		if first {
			tt.up, tt.upBytes = now, bytes
		}
		tt.done, tt.doneBytes = now, bytes
		if w.observe(receiving, bytes) {
			return tt, nil
		}
		switch {
		case !w.started && now.Sub(tt.up) > quiet:
			return tt, fmt.Errorf("%w; waited %v", errNoHandoff, quiet)
		case now.Sub(tt.up) > limit:
			return tt, fmt.Errorf("the member still receives %d ranges after %v (%d bytes received)", receiving, limit, bytes)
		}
		<-poll.C
	}
}

// askLoad asks refs, round-robin, at a steady rate from a few goroutines,
// each ask with a deadline of its own, until stop.
type askLoad struct {
	quit chan struct{}
	wg   sync.WaitGroup

	mu   sync.Mutex
	asks []askSample
}

// askSample is one ask: when it started, how long it took, and its
// error.
type askSample struct {
	at  time.Time
	d   time.Duration
	err error
}

// window returns the latencies of the asks that started in [from, to)
// (a zero to: no end) and succeeded, how many of them failed and the
// last failure.
func window(asks []askSample, from, to time.Time) (lat []time.Duration, failed int, lastErr error) {
	for _, a := range asks {
		if a.at.Before(from) || !to.IsZero() && !a.at.Before(to) {
			continue
		}
		if a.err != nil {
			failed, lastErr = failed+1, a.err
			continue
		}
		lat = append(lat, a.d)
	}
	return lat, failed, lastErr
}

// endedBy returns the asks that ended before t.
func endedBy(asks []askSample, t time.Time) []askSample {
	var in []askSample
	for _, a := range asks {
		if a.at.Add(a.d).Before(t) {
			in = append(in, a)
		}
	}
	return in
}

// askWarmup is how long the ask load runs before its idle window.
const askWarmup = time.Second

// askTimeout bounds each ask of the load.
const askTimeout = 5 * time.Second

// startAskLoad starts askers goroutines asking rGet of refs, rate asks
// per second in all (each goroutine one ask at a time, at the ticks of a
// ticker of its own: when an ask takes longer than a period, the ticks
// it missed are dropped).
func startAskLoad(refs []actor.Ref[rcMsg], askers int, rate float64) *askLoad {
	l := &askLoad{quit: make(chan struct{})}
	every := time.Duration(float64(askers) / rate * float64(time.Second))
	for g := range askers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			var asks []askSample
			defer func() {
				l.mu.Lock()
				l.asks = append(l.asks, asks...)
				l.mu.Unlock()
			}()
			// Spread the goroutines' asks over the period.
			first := time.NewTimer(every * time.Duration(g) / time.Duration(askers))
			defer first.Stop()
			select {
			case <-l.quit:
				return
			case <-first.C:
			}
			tick := time.NewTicker(every)
			defer tick.Stop()
			for i := g; ; i += askers {
				select {
				case <-l.quit:
					return
				case <-tick.C:
				}
				ctx, cancel := context.WithTimeout(context.Background(), askTimeout)
				t0 := time.Now()
				_, err := actor.Ask(ctx, refs[i%len(refs)], rGet{})
				asks = append(asks, askSample{t0, time.Since(t0), err})
				cancel()
			}
		}()
	}
	return l
}

// stop ends the load and returns its asks.
func (l *askLoad) stop() []askSample {
	close(l.quit)
	l.wg.Wait()
	return l.asks
}

// startSink serves bulk TCP: it reads each connection to its end and
// answers the number of bytes it read (8 bytes, big-endian).
func startSink() (string, func() error, error) {
	return serveTCP(func(c net.Conn) {
		n, err := io.Copy(io.Discard, c)
		if err != nil {
			return
		}
		c.Write(binary.BigEndian.AppendUint64(nil, uint64(n)))
	})
}

// bulkTCP streams n pseudo-random bytes to the sink at addr over one
// connection with io.Copy and returns the time from the first byte
// written until the sink confirmed it read them all.
func bulkTCP(addr string, n int64) (time.Duration, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	src := &repeatReader{buf: make([]byte, 1<<20)}
	rand.NewChaCha8([32]byte{1}).Read(src.buf)
	t0 := time.Now()
	if _, err := io.CopyN(c, src, n); err != nil {
		return 0, err
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		return 0, err
	}
	var ack [8]byte
	if _, err := io.ReadFull(c, ack[:]); err != nil {
		return 0, err
	}
	d := time.Since(t0)
	if got := int64(binary.BigEndian.Uint64(ack[:])); got != n {
		return 0, fmt.Errorf("bulk TCP: the sink read %d bytes of %d", got, n)
	}
	return d, nil
}

// repeatReader reads buf over and over.
type repeatReader struct {
	buf []byte
	off int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := copy(p, r.buf[r.off:])
	r.off = (r.off + n) % len(r.buf)
	return n, nil
}
