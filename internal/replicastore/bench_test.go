package replicastore

import (
	"context"
	"fmt"
	"testing"

	"github.com/troupe-go/troupe/internal/replica"
)

// BenchmarkBadgerPut measures one Put of a 64-byte record from 8
// concurrent writers, with and without Sync (group commit shares each
// fsync among the writers waiting at that moment).
func BenchmarkBadgerPut(b *testing.B) {
	for _, sync := range []bool{false, true} {
		b.Run(fmt.Sprintf("sync=%v", sync), func(b *testing.B) {
			s, err := Open(b.TempDir(), Options{Sync: sync})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			value := string(make([]byte, 64))
			b.SetParallelism(4) // 8 writers on 2 cores
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					i++
					r := rec(fmt.Sprint(i%1000), replica.KindState, uint64(i), value)
					if err := s.Put(context.Background(), r); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkMemoryPut is a Put of one record into the in-memory store
// over 10,000 keys, as a replicated write's copy does.
func BenchmarkMemoryPut(b *testing.B) {
	s := NewMemory()
	defer s.Close()
	value := string(make([]byte, 64))
	recs := make([]replica.Record, 10_000)
	for i := range recs {
		recs[i] = rec(fmt.Sprint(i), replica.KindState, 1, value)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r := recs[i%len(recs)]
		r.Version = uint64(i)
		if err := s.Put(context.Background(), r); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
