package main

import (
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"time"
)

// median returns the median of f over ms (the mean of the middle two for
// an even count).
func median(ms []measurement, f func(measurement) float64) float64 {
	if len(ms) == 0 {
		return 0
	}
	vs := make([]float64, len(ms))
	for i, m := range ms {
		vs[i] = f(m)
	}
	slices.Sort(vs)
	n := len(vs)
	if n%2 == 1 {
		return vs[n/2]
	}
	return (vs[n/2-1] + vs[n/2]) / 2
}

// percentile returns the q-quantile (0..1) of lat, nearest rank. It sorts
// lat in place.
func percentile(lat []time.Duration, q float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	slices.Sort(lat)
	i := int(q*float64(len(lat))+0.5) - 1
	return lat[min(max(i, 0), len(lat)-1)]
}

// heapMark is the live heap and goroutine count at one moment.
type heapMark struct {
	heap       uint64
	goroutines int
}

// markHeap collects garbage and reads the live heap.
func markHeap() heapMark {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return heapMark{heap: ms.HeapAlloc, goroutines: runtime.NumGoroutine()}
}

// settle waits until the goroutines started since base have exited (at
// most 10 s), then quiet more, and returns how much the live heap grew.
func settle(base heapMark, quiet time.Duration) int64 {
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > base.goroutines && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(quiet)
	return int64(markHeap().heap) - int64(base.heap)
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// activationKey names the i-th actor of a workload.
func activationKey(i int) string { return "k" + strconv.Itoa(i) }
