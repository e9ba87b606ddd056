package replicanode

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/replica"
	"github.com/troupe-go/troupe/internal/transport"
	"github.com/troupe-go/troupe/replication"
	"github.com/troupe-go/troupe/ring"
	"github.com/troupe-go/troupe/wire"
)

// BenchmarkMajorityWrites measures Majority writes of a 64-byte state
// through three drivers, each owning a third of 10,000 keys replicated on
// all three, from 64 concurrent writers: acknowledged writes/s and the
// p50 and p99 of one write, over a MemNetwork and over loopback TCP, with
// the store in memory, in badger, and in badger with Sync.
//
//	go test ./internal/replicanode -run X -bench MajorityWrites -benchtime 100000x
func BenchmarkMajorityWrites(b *testing.B) {
	for _, network := range []string{"mem", "tcp"} {
		for _, store := range []string{"memory", "badger", "badger-sync"} {
			b.Run(fmt.Sprintf("net=%s/store=%s", network, store), func(b *testing.B) {
				benchWrites(b, network, store)
			})
		}
	}
}

const (
	benchNodes   = 3
	benchKeys    = 10_000
	benchWriters = 64
)

func benchEndpoints(b testing.TB, network string) []transport.Endpoint {
	eps := make([]transport.Endpoint, benchNodes)
	if network == "mem" {
		mn := transport.NewMemNetwork()
		for i := range eps {
			ep, err := mn.Join(ring.NodeID{Addr: fmt.Sprintf("n%d", i), Incarnation: 1})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { ep.Close() })
			eps[i] = ep
		}
		return eps
	}
	for i := range eps {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		tr, err := transport.New(wire.Config{ClusterName: "bench", Advertise: ln.Addr().String(), Incarnation: 1})
		if err != nil {
			b.Fatal(err)
		}
		go tr.Serve(ln)
		b.Cleanup(func() { tr.Close() })
		eps[i] = tr
	}
	return eps
}

func benchWrites(b *testing.B, network, store string) {
	eps := benchEndpoints(b, network)
	ctx := context.Background()
	nodes := make([]*Node, benchNodes)
	set := make([]ring.NodeID, benchNodes)
	for i, ep := range eps {
		cfg := Config{Endpoint: ep}
		if store != "memory" {
			cfg.Replication = replication.Config{DataDir: filepath.Join(b.TempDir(), fmt.Sprint(i)), Sync: store == "badger-sync"}
		}
		n, err := Open(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { n.Close(ctx) })
		nodes[i] = n
		set[i] = ep.Self()
	}
	keys := make([]replica.Key, benchKeys)
	for i := range keys {
		keys[i] = replica.Key{Type: "bench", ID: fmt.Sprint(i)}
	}
	owner := func(i int) *Node { return nodes[i%benchNodes] }
	// Acquire every key at its owner first, concurrently.
	var wg sync.WaitGroup
	for w := range benchWriters {
		wg.Go(func() {
			for i := w; i < benchKeys; i += benchWriters {
				if err := owner(i).Acquire(ctx, keys[i], set, replication.Majority); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		return
	}
	value := make([]byte, 64)
	lat := make([][]time.Duration, benchWriters)
	per := b.N / benchWriters
	b.ResetTimer()
	cpu0 := cpuTime()
	start := time.Now()
	for w := range benchWriters {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			n := per
			if w < b.N%benchWriters {
				n++
			}
			ls := make([]time.Duration, 0, n)
			for range n {
				i := rng.IntN(benchKeys)
				t0 := time.Now()
				if err := owner(i).Write(ctx, keys[i], stateSlot, value); err != nil {
					b.Error(err)
					return
				}
				ls = append(ls, time.Since(t0))
			}
			lat[w] = ls
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) == 0 {
		return
	}
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "writes/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
	// CPU per write (the three nodes together) reads the same on a busy
	// machine, where writes/s does not.
	b.ReportMetric(float64(cpu.Microseconds())/float64(len(all)), "cpu-µs/write")
}

// cpuTime returns the user and system CPU time the process used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkLargeStateWrites measures Majority writes of a 64 KiB state of
// which each write changes 8 bytes, through three drivers over a
// MemNetwork and over loopback TCP with the store in memory, with deltas
// on (the default) and off: the bytes the nodes hand their endpoints per
// write (all three together, answers included), acknowledged writes/s
// and CPU time per write. 16 writers each write 4 of 64 keys in turn.
//
//	go test ./internal/replicanode -run X -bench LargeStateWrites -benchtime 2000x
func BenchmarkLargeStateWrites(b *testing.B) {
	for _, network := range []string{"mem", "tcp"} {
		for _, delta := range []string{"on", "off"} {
			b.Run(fmt.Sprintf("net=%s/delta=%s", network, delta), func(b *testing.B) {
				deltaMin := 0
				if delta == "off" {
					deltaMin = -1
				}
				benchLargeWrites(b, network, deltaMin)
			})
		}
	}
}

func benchLargeWrites(b *testing.B, network string, deltaMin int) {
	const (
		size    = 64 << 10
		keys    = 64
		writers = 16
	)
	eps := benchEndpoints(b, network)
	ctx := context.Background()
	var sent atomic.Int64
	nodes := make([]*Node, benchNodes)
	set := make([]ring.NodeID, benchNodes)
	for i, ep := range eps {
		n, err := Open(ctx, Config{Endpoint: byteCountingEndpoint{Endpoint: ep, bytes: &sent}, DeltaMin: deltaMin})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { n.Close(ctx) })
		nodes[i] = n
		set[i] = ep.Self()
	}
	owner := func(i int) *Node { return nodes[i%benchNodes] }
	ks := make([]replica.Key, keys)
	values := make([][]byte, keys)
	for i := range ks {
		ks[i] = replica.Key{Type: "bench", ID: fmt.Sprint(i)}
		if err := owner(i).Acquire(ctx, ks[i], set, replication.Majority); err != nil {
			b.Fatal(err)
		}
		values[i] = seededValue(size, uint64(i))
		if err := owner(i).Write(ctx, ks[i], stateSlot, values[i]); err != nil {
			b.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	b.ResetTimer()
	sent.Store(0)
	cpu0 := cpuTime()
	start := time.Now()
	for w := range writers {
		wg.Go(func() {
			n := b.N / writers
			if w < b.N%writers {
				n++
			}
			for j := range n {
				// Writer w alone writes keys w, w+writers, …: it changes
				// one 8-byte field of its own copy.
				i := w + writers*(j%(keys/writers))
				v := values[i]
				binary.LittleEndian.PutUint64(v[(j*64)%(size-8):], uint64(j))
				if err := owner(i).Write(ctx, ks[i], stateSlot, v); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	b.StopTimer()
	b.ReportMetric(float64(sent.Load())/float64(b.N), "bytes/write")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "writes/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/write")
}
