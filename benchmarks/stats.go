package main

import (
	"fmt"
	"runtime"
	"runtime/metrics"
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

// gcWatch counts garbage collection over a timed region.
type gcWatch struct {
	cycles uint32
	cpu    float64
}

var gcSamples = []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}

func readGC() gcWatch {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	metrics.Read(gcSamples)
	w := gcWatch{cycles: ms.NumGC}
	if gcSamples[0].Value.Kind() == metrics.KindFloat64 {
		w.cpu = gcSamples[0].Value.Float64()
	}
	return w
}

func watchGC() gcWatch { return readGC() }

// stop reports the collections that ended since w and the GC CPU time
// the runtime accounted meanwhile (it accounts at the end of a cycle, so a
// cycle still running is not counted).
func (w gcWatch) stop() (cycles uint32, cpu float64) {
	now := readGC()
	return now.cycles - w.cycles, now.cpu - w.cpu
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
