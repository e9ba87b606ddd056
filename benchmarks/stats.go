package main

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"syscall"
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

// clock measures the region a peer marks: wall time, the CPU time of the
// whole process (user and system, every goroutine, the GC included) and
// the garbage collections that ended meanwhile. CPU time is much less
// disturbed than wall time by other processes on the machine.
type clock struct {
	wall     time.Duration
	cpu      time.Duration
	gcCycles uint32
	gcCPU    float64 // the runtime's estimate; a cycle still running is not counted

	t0   time.Time
	cpu0 time.Duration
	gc0  gcMark

	// A remote workload's nodes: their CPU time in the region too.
	nodePids []int
	nodeCPU  time.Duration
	nodeCPU0 time.Duration
	// nodeSys counts the nodes' read and write system calls (Linux),
	// nodeWrote the bytes they wrote.
	nodeSys, nodeWrote   int64
	nodeSys0, nodeWrote0 int64
}

// node also measures the CPU time of the processes pids (a remote
// workload's nodes), in clock ticks of /proc (10 ms on Linux).
func (c *clock) node(pids ...int) { c.nodePids = append(c.nodePids, pids...) }

func (c *clock) nodesCPU() time.Duration {
	var d time.Duration
	for _, pid := range c.nodePids {
		d += procCPU(pid)
	}
	return d
}

// nodesIO returns the read and write system calls the nodes made and the
// bytes they wrote.
func (c *clock) nodesIO() (calls, wrote int64) {
	for _, pid := range c.nodePids {
		n, w := procIO(pid)
		calls += n
		wrote += w
	}
	return calls, wrote
}

func (c *clock) start() {
	c.nodeCPU0 = c.nodesCPU()
	c.nodeSys0, c.nodeWrote0 = c.nodesIO()
	c.gc0 = readGC()
	c.cpu0 = processCPU()
	c.t0 = time.Now()
}

func (c *clock) stop() {
	c.wall = time.Since(c.t0)
	c.cpu = processCPU() - c.cpu0
	gc := readGC()
	c.gcCycles, c.gcCPU = gc.cycles-c.gc0.cycles, gc.cpu-c.gc0.cpu
	c.nodeCPU = c.nodesCPU() - c.nodeCPU0
	calls, wrote := c.nodesIO()
	c.nodeSys, c.nodeWrote = calls-c.nodeSys0, wrote-c.nodeWrote0
}

// procIO reads the read and write system calls of process pid (syscr
// and syscw of /proc/pid/io) and the bytes it wrote through them
// (wchar: sockets included); zeros where there are none.
func procIO(pid int) (calls, wrote int64) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/io")
	if err != nil {
		return 0, 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(l, ": ")
		x, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "syscr", "syscw":
			calls += x
		case "wchar":
			wrote += x
		}
	}
	return calls, wrote
}

// procCPU reads the user and system CPU time of process pid from
// /proc/pid/stat; 0 where there is none.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces: fields count from the
	// last ')'. utime and stime are fields 14 and 15.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+st) * (time.Second / 100) // USER_HZ is 100 on Linux
}

// rate turns the clock into a measurement of n operations.
func (c *clock) rate(n int) measurement {
	m := measurement{gcCycles: float64(c.gcCycles), gcCPU: c.gcCPU}
	if c.wall > 0 {
		m.primary = float64(n) / c.wall.Seconds()
	}
	if n > 0 {
		m.cpuPerOp = float64(c.cpu.Nanoseconds()) / float64(n)
		m.nodeCPUPerOp = float64(c.nodeCPU.Nanoseconds()) / float64(n)
		m.nodeSysPerOp = float64(c.nodeSys) / float64(n)
		m.nodeWrotePerOp = float64(c.nodeWrote) / float64(n)
	}
	return m
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type gcMark struct {
	cycles uint32
	cpu    float64
}

func readGC() gcMark {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	sample := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(sample)
	g := gcMark{cycles: ms.NumGC}
	if sample[0].Value.Kind() == metrics.KindFloat64 {
		g.cpu = sample[0].Value.Float64()
	}
	return g
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
