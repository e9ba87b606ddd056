package transport

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/troupe-go/troupe/ring"
	"github.com/troupe-go/troupe/wire"
)

func benchPair(b *testing.B, mutate func(*wire.Config)) (a, z *Transport) {
	b.Helper()
	var trs [2]*Transport
	for i := range trs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		cfg := wire.Config{ClusterName: "bench", Advertise: ln.Addr().String(), Incarnation: uint64(i + 1)}
		if mutate != nil {
			mutate(&cfg)
		}
		tr, err := New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		go tr.Serve(ln)
		b.Cleanup(func() { tr.Close() })
		trs[i] = tr
	}
	return trs[0], trs[1]
}

func randomBytes(n int) []byte {
	r := rand.New(rand.NewPCG(1, 1))
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(r.Uint32())
	}
	return p
}

func benchBulk(b *testing.B, mutate func(*wire.Config)) {
	a, z := benchPair(b, mutate)
	payload := randomBytes(1 << 20)
	// Connect first so the handshake is not measured.
	r, _ := a.Send(context.Background(), z.Self(), StreamReplication, 0, payload[:1])
	r.Wait(context.Background())
	b.SetBytes(int64(len(payload)))
	b.ResetTimer()
	sendAll(b, a, z.Self(), StreamReplication, payload)
}

func isResolved(r *Receipt) bool {
	select {
	case <-r.Done():
		return true
	default:
		return false
	}
}

// sendAll sends payload b.N times, waiting for the oldest receipt whenever
// the send queue is full or maxOutstanding envelopes are unacknowledged (as
// a caller with a bounded mailbox would), and then for all of them.
func sendAll(b *testing.B, a *Transport, to ring.NodeID, st StreamID, payload []byte) {
	const maxOutstanding = 4096
	var inflight []*Receipt
	for range b.N {
		if len(inflight) >= maxOutstanding {
			inflight[0].Wait(context.Background())
			inflight = inflight[1:]
		}
		for {
			r, err := a.Send(context.Background(), to, st, 0, payload)
			if errors.Is(err, wire.ErrQueueFull) {
				inflight[0].Wait(context.Background())
				inflight = inflight[1:]
				continue
			}
			if err != nil {
				b.Fatal(err)
			}
			inflight = append(inflight, r)
			for len(inflight) > 1 && inflight[0].Err() == nil && isResolved(inflight[0]) {
				inflight = inflight[1:]
			}
			break
		}
	}
	for _, r := range inflight {
		if err := r.Wait(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBulk sends 1 MiB incompressible envelopes on one stream.
func BenchmarkBulk(b *testing.B) { benchBulk(b, nil) }

// BenchmarkBulkNoCompression is BenchmarkBulk without a codec offered.
func BenchmarkBulkNoCompression(b *testing.B) {
	benchBulk(b, func(c *wire.Config) { c.Compression.Disable = true })
}

// BenchmarkBulkPlainTCP copies the same bytes over a plain loopback TCP
// connection: the baseline for BenchmarkBulk.
func BenchmarkBulkPlainTCP(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	done := make(chan int64)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- 0
			return
		}
		n, _ := io.Copy(io.Discard, c)
		c.Close()
		done <- n
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	payload := randomBytes(1 << 20)
	b.SetBytes(int64(len(payload)))
	b.ResetTimer()
	for range b.N {
		if _, err := c.Write(payload); err != nil {
			b.Fatal(err)
		}
	}
	c.Close()
	<-done
}

// BenchmarkSmallEnvelopes sends 100-byte envelopes on one stream and key.
func BenchmarkSmallEnvelopes(b *testing.B) {
	a, z := benchPair(b, nil)
	payload := randomBytes(100)
	r, _ := a.Send(context.Background(), z.Self(), StreamApplication, 0, payload)
	r.Wait(context.Background())
	b.SetBytes(int64(len(payload)))
	b.ResetTimer()
	sendAll(b, a, z.Self(), StreamApplication, payload)
}

// BenchmarkSmallNaive sends 100-byte messages as a naive sender does: a
// 4-byte length and the payload in one write per message, read back with
// a buffered reader. The baseline for BenchmarkSmallEnvelopes.
func BenchmarkSmallNaive(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	done := make(chan int)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- 0
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		var hdr [4]byte
		buf := make([]byte, 1<<16)
		n := 0
		for {
			if _, err := io.ReadFull(br, hdr[:]); err != nil {
				done <- n
				return
			}
			if _, err := io.ReadFull(br, buf[:binary.BigEndian.Uint32(hdr[:])]); err != nil {
				done <- n
				return
			}
			n++
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	payload := randomBytes(100)
	msg := binary.BigEndian.AppendUint32(nil, uint32(len(payload)))
	msg = append(msg, payload...)
	b.SetBytes(int64(len(payload)))
	b.ResetTimer()
	for range b.N {
		if _, err := c.Write(msg); err != nil {
			b.Fatal(err)
		}
	}
	c.Close()
	if n := <-done; n != b.N {
		b.Fatalf("received %d of %d", n, b.N)
	}
}

// BenchmarkResume cuts the connection while 64 KiB envelopes stream and
// measures the time from the cut to the delivery of an envelope sent right
// after it (ns/op: the timer runs only then), and the bytes rewritten by
// the resume (resent-B/op).
func BenchmarkResume(b *testing.B) {
	fp := newFaultPair(b, 1, nil, nil)
	defer fp.close()
	a, z := fp.nodes[0], fp.nodes[1]
	payload := randomBytes(64 << 10)
	warm, _ := a.Send(context.Background(), z.Self(), StreamApplication, 0, payload)
	warm.Wait(context.Background())
	s, _ := a.sessionFor(z.Self(), false)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		var rs []*Receipt
		for range 16 {
			r, err := a.Send(context.Background(), z.Self(), StreamApplication, 0, payload)
			if err != nil {
				b.Fatal(err)
			}
			rs = append(rs, r)
		}
		b.StartTimer()
		fp.fn.CutAll()
		r, err := a.Send(context.Background(), z.Self(), StreamApplication, 1, payload[:100])
		if err != nil {
			b.Fatal(err)
		}
		if err := r.Wait(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		for _, r := range rs {
			if err := r.Wait(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
	}
	b.StopTimer()
	s.mu.Lock()
	resent := s.resent
	s.mu.Unlock()
	b.ReportMetric(float64(resent)/float64(b.N), "resent-B/op")
}

// BenchmarkBulkVsTCP times wire and a plain TCP copy side by side in one
// run: each op sends one 1 MiB envelope over an uncompressed wire stream
// and then writes the same bytes over a plain loopback TCP connection,
// waiting until the receiver has read them, so load on a shared machine
// hits both alike. It reports both rates and their ratio (wire/tcp); ns/op
// covers both halves. The wire handler releases each payload once read,
// as the plain receiver reuses its buffer; BenchmarkBulkVsTCPKeep keeps
// them.
func BenchmarkBulkVsTCP(b *testing.B) { benchBulkVsTCP(b, true) }

// BenchmarkBulkVsTCPKeep is BenchmarkBulkVsTCP with a handler that does
// not release its payloads: every envelope gets a fresh buffer.
func BenchmarkBulkVsTCPKeep(b *testing.B) { benchBulkVsTCP(b, false) }

func benchBulkVsTCP(b *testing.B, release bool) {
	a, z := benchPair(b, func(c *wire.Config) { c.Compression.Disable = true })
	var sink byte
	z.Handle(StreamReplication, HandlerFunc(func(_ ring.NodeID, p []byte) {
		sink ^= p[len(p)-1] // a handler that looks at what it got
		if release {
			z.Release(p)
		}
	}))
	payload := randomBytes(1 << 20)
	r, _ := a.Send(context.Background(), z.Self(), StreamReplication, 0, payload[:1])
	r.Wait(context.Background())

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	got := make(chan int, 64)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(got)
			return
		}
		defer c.Close()
		buf := make([]byte, 64<<10)
		n := 0
		for {
			k, err := c.Read(buf)
			n += k
			for n >= len(payload) {
				n -= len(payload)
				got <- 1
			}
			if err != nil {
				close(got)
				return
			}
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()

	// Batches of envelopes keep both pipes full; the batch is the unit
	// timed for each side.
	const batch = 64
	var wireT, tcpT time.Duration
	b.SetBytes(int64(len(payload)))
	b.ResetTimer()
	for done := 0; done < b.N; done += batch {
		n := min(batch, b.N-done)
		start := time.Now()
		rs := make([]*Receipt, 0, n)
		for range n {
			r, err := a.Send(context.Background(), z.Self(), StreamReplication, 0, payload)
			if err != nil {
				b.Fatal(err)
			}
			rs = append(rs, r)
		}
		for _, r := range rs {
			if err := r.Wait(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
		wireT += time.Since(start)

		start = time.Now()
		for range n {
			if _, err := c.Write(payload); err != nil {
				b.Fatal(err)
			}
		}
		for range n {
			if _, ok := <-got; !ok {
				b.Fatal("plain TCP receiver ended")
			}
		}
		tcpT += time.Since(start)
	}
	b.StopTimer()
	mb := float64(b.N) * float64(len(payload)) / 1e6
	b.ReportMetric(mb/wireT.Seconds(), "wire-MB/s")
	b.ReportMetric(mb/tcpT.Seconds(), "tcp-MB/s")
	b.ReportMetric(tcpT.Seconds()/wireT.Seconds(), "wire/tcp")
}

// BenchmarkSmallVsNaive times 100-byte envelopes over wire and over a
// naive length-prefixed sender side by side in one run, batch by batch
// (4096 messages each, the bound on outstanding sends of
// BenchmarkSmallEnvelopes), so load on a shared machine hits both alike.
// It reports both costs per message and their ratio (naive/wire: above 1
// means wire is faster).
func BenchmarkSmallVsNaive(b *testing.B) {
	a, z := benchPair(b, nil)
	payload := randomBytes(100)
	r, _ := a.Send(context.Background(), z.Self(), StreamApplication, 0, payload)
	r.Wait(context.Background())

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	got := make(chan struct{}, 1)
	const batch = 4096
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(got)
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		var hdr [4]byte
		buf := make([]byte, 1<<16)
		for n := 1; ; n++ {
			if _, err := io.ReadFull(br, hdr[:]); err != nil {
				close(got)
				return
			}
			if _, err := io.ReadFull(br, buf[:binary.BigEndian.Uint32(hdr[:])]); err != nil {
				close(got)
				return
			}
			if n%batch == 0 {
				got <- struct{}{}
			}
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	msg := binary.BigEndian.AppendUint32(nil, uint32(len(payload)))
	msg = append(msg, payload...)

	var wireT, naiveT time.Duration
	n := 0
	b.ResetTimer()
	for ; n < b.N; n += batch {
		start := time.Now()
		var last *Receipt
		for range batch {
			r, err := a.Send(context.Background(), z.Self(), StreamApplication, 0, payload)
			if err != nil {
				b.Fatal(err)
			}
			last = r
		}
		if err := last.Wait(context.Background()); err != nil {
			b.Fatal(err)
		}
		wireT += time.Since(start)

		start = time.Now()
		for range batch {
			if _, err := c.Write(msg); err != nil {
				b.Fatal(err)
			}
		}
		if _, ok := <-got; !ok {
			b.Fatal("naive receiver ended")
		}
		naiveT += time.Since(start)
	}
	b.StopTimer()
	b.ReportMetric(float64(wireT.Nanoseconds())/float64(n), "wire-ns/msg")
	b.ReportMetric(float64(naiveT.Nanoseconds())/float64(n), "naive-ns/msg")
	b.ReportMetric(naiveT.Seconds()/wireT.Seconds(), "naive/wire")
}
