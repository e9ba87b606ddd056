package main

import "time"

// peer is one actor system under test. Every method builds a fresh system,
// runs one workload on it, closes it and reports what it measured. The
// method marks the measured region on clk (clk.start, clk.stop); setup
// and teardown stay outside it. The Troupe and Proto.Actor
// implementations do the same work message for message.
type peer interface {
	Name() string
	// Tell sends n messages from one goroutine to one actor and waits
	// until the actor has counted all n.
	Tell(clk *clock, n int) error
	// TellMany has senders goroutines send per messages to each of keys
	// actors (round-robin) and waits until every actor counted its share.
	TellMany(clk *clock, senders, keys, per int) error
	// Ask asks one actor n times in sequence from a goroutine outside the
	// system and returns the latency of each round trip.
	Ask(clk *clock, n int) (lat []time.Duration, err error)
	// PingPong bounces a ball m times between the two actors of each of
	// pairs pairs, one message in flight per pair, and waits for all.
	PingPong(clk *clock, pairs, m int) error
	// Activate sends one message to each of len(keys) fresh actors and
	// waits until all were handled; then, once the runtime's goroutines
	// have left and quiet more has passed, it reports how much the live
	// heap grew: what the idle activated actors hold.
	Activate(clk *clock, keys []string, quiet time.Duration) (heapBytes int64, err error)
	// RemoteTell sends n messages from one goroutine to one actor in
	// another process and waits until it has counted all n (asking its
	// count until it is reached).
	RemoteTell(clk *clock, n int) error
	// RemoteAsk asks one actor in another process n times in sequence
	// and returns the latency of each round trip.
	RemoteAsk(clk *clock, n int, timeout time.Duration) (lat []time.Duration, err error)
}

// sizes are the workload parameters.
type sizes struct {
	TellN         int
	ManySenders   int
	ManyKeys      int
	ManyPer       int // messages per sender per key
	AskN          int
	Pairs         int
	PingPongM     int // messages per pair
	ActivateKeys  int
	ActivateQuiet time.Duration // settle time after the goroutines left, before the heap is read
	RemoteTellN   int
	RemoteAskN    int
	// RemoteAskTimeout, if positive, gives each remote ask its own
	// context.WithTimeout (what real callers pass) instead of
	// context.Background: the deadline path.
	RemoteAskTimeout time.Duration
	ClientNodes      int // client-ask: node processes
	ClientGos        int // client-ask: asking goroutines
	ClientKeys       int
	ClientAskN       int // client-ask: asks in all
	FailoverNodes    int
	ReplNodes        int // replicated-write: node processes
	ReplGos          int // replicated-write: writing goroutines
	ReplKeys         int
	ReplN            int // replicated-write: writes in all, on each definition

	HandoffKeys        int           // handoff-transfer: keys of stored state
	HandoffValue       int           // handoff-transfer: bytes of each key's state
	HandoffFillers     int           // handoff-transfer: goroutines writing the state
	HandoffAskers      int           // handoff-transfer: goroutines of the ask load
	HandoffAskRate     float64       // handoff-transfer: asks per second of the ask load, in all
	HandoffIdle        time.Duration // handoff-transfer: the ask load's window before the member comes
	HandoffCatchUpRate int           // handoff-transfer: the members' system.Config.CatchUpRate (0: its default)
	HandoffQuiet       time.Duration // handoff-transfer: how long the member may show no sign of receiving
	HandoffVia         string        // handoff-transfer: how a member comes to receive (viaJoin, viaRestart)
}

// measurement is one run of one workload on one peer.
type measurement struct {
	primary  float64 // msgs/s, or seconds for activate
	cpuPerOp float64 // process CPU nanoseconds per message (per key for activate)
	// nodeCPUPerOp is the remote workloads' node's CPU nanoseconds per
	// message (10 ms resolution over the whole region).
	nodeCPUPerOp float64
	// nodeSysPerOp is the nodes' read and write system calls per
	// operation (replicated-write; Linux).
	nodeSysPerOp float64
	// nodeWrotePerOp is the bytes they wrote per operation (to sockets
	// and files).
	nodeWrotePerOp float64
	failed         float64 // failover: asks that failed before the first answer
	p50            time.Duration
	p99            time.Duration
	perActr        float64 // heap bytes per idle actor (activate)
	gcCycles       float64 // collections that ended in the measured region
	gcCPU          float64 // the runtime's estimate of their CPU seconds
	// idleP99 is handoff-transfer's ask p99 before the member started
	// (p50 and p99 are from its start until it received all, streamP99
	// of the asks that started once it was up, afterP99 of the asks after
	// it received all); mb and secs are what it transferred once
	// the member was up, in megabytes (10^6), and in how long; upSecs is
	// how long the member took to start and join, earlyMB what it
	// received meanwhile.
	idleP99, streamP99        time.Duration
	afterP99                  time.Duration
	mb, secs, upSecs, earlyMB float64
	settleSecs                float64 // handoff-transfer: how long the members took to be quiet after the fill
	idleFailed                float64
	// base is the replicated workloads' rate on the unreplicated
	// definition, measured in the same cluster right before
	// (continuity-ask: plain replicated asks); for the *-metrics
	// workloads, the rate with metrics off, and baseCPU its CPU per
	// operation.
	base    float64
	baseCPU float64
	// replayP50 and plainP50 are continuity-ask's p50 of a keyed ask
	// answered from what was kept, and of a plain replicated ask.
	replayP50, plainP50 time.Duration
}

// workload is a named benchmark and how to run it on a peer.
type workload struct {
	name string
	run  func(p peer, clk *clock, sz sizes, keys []string) (measurement, error)
}

var workloads = []workload{
	{"tell", func(p peer, clk *clock, sz sizes, _ []string) (measurement, error) {
		err := p.Tell(clk, sz.TellN)
		return clk.rate(sz.TellN), err
	}},
	{"tell-many", func(p peer, clk *clock, sz sizes, _ []string) (measurement, error) {
		err := p.TellMany(clk, sz.ManySenders, sz.ManyKeys, sz.ManyPer)
		return clk.rate(sz.ManySenders * sz.ManyKeys * sz.ManyPer), err
	}},
	{"ask", func(p peer, clk *clock, sz sizes, _ []string) (measurement, error) {
		lat, err := p.Ask(clk, sz.AskN)
		if err != nil {
			return measurement{}, err
		}
		return latencies(clk, lat), nil
	}},
	{"pingpong", func(p peer, clk *clock, sz sizes, _ []string) (measurement, error) {
		err := p.PingPong(clk, sz.Pairs, sz.PingPongM)
		return clk.rate(sz.Pairs * sz.PingPongM), err
	}},
	{"activate", func(p peer, clk *clock, sz sizes, keys []string) (measurement, error) {
		heap, err := p.Activate(clk, keys, sz.ActivateQuiet)
		m := clk.rate(len(keys))
		m.primary = clk.wall.Seconds()
		m.perActr = float64(heap) / float64(len(keys))
		return m, err
	}},
	{"remote-tell", func(p peer, clk *clock, sz sizes, _ []string) (measurement, error) {
		err := p.RemoteTell(clk, sz.RemoteTellN)
		return clk.rate(sz.RemoteTellN), err
	}},
	{"remote-ask", func(p peer, clk *clock, sz sizes, _ []string) (measurement, error) {
		lat, err := p.RemoteAsk(clk, sz.RemoteAskN, sz.RemoteAskTimeout)
		if err != nil {
			return measurement{}, err
		}
		return latencies(clk, lat), nil
	}},
	{"client-ask", func(p peer, clk *clock, sz sizes, _ []string) (measurement, error) {
		lat, err := p.(troupePeer).ClientAsk(clk, sz.ClientNodes, sz.ClientGos, sz.ClientKeys, sz.ClientAskN)
		if err != nil {
			return measurement{}, err
		}
		return latencies(clk, lat), nil
	}},
	{"replicated-write", func(p peer, clk *clock, sz sizes, _ []string) (measurement, error) {
		return replicatedWrite(p, clk, sz, false)
	}},
	{"replicated-write-sync", func(p peer, clk *clock, sz sizes, _ []string) (measurement, error) {
		return replicatedWrite(p, clk, sz, true)
	}},
	{"continuity-ask", continuityAsk},
	{"handoff-transfer", handoffTransfer},
	{"tell-metrics", func(p peer, _ *clock, sz sizes, _ []string) (measurement, error) {
		return metricsPair(p, func(tp troupePeer, clk *clock) (measurement, error) {
			err := tp.Tell(clk, sz.TellN)
			return clk.rate(sz.TellN), err
		})
	}},
	{"ask-metrics", func(p peer, _ *clock, sz sizes, _ []string) (measurement, error) {
		return metricsPair(p, func(tp troupePeer, clk *clock) (measurement, error) {
			lat, err := tp.Ask(clk, sz.AskN)
			if err != nil {
				return measurement{}, err
			}
			return latencies(clk, lat), nil
		})
	}},
	{"failover-fast", func(p peer, clk *clock, sz sizes, _ []string) (measurement, error) {
		return failover(p, clk, sz, "fast")
	}},
	{"failover-default", func(p peer, clk *clock, sz sizes, _ []string) (measurement, error) {
		return failover(p, clk, sz, "default")
	}},
}

// troupeOnly are the workloads Proto.Actor has no counterpart for here:
// they run on Troupe alone and print no ratio.
var troupeOnly = map[string]bool{"client-ask": true, "failover-fast": true, "failover-default": true,
	"replicated-write": true, "replicated-write-sync": true, "handoff-transfer": true, "continuity-ask": true,
	"tell-metrics": true, "ask-metrics": true}

// noWarmup are the workloads that build a cluster of node processes for
// each measurement: the warm-up would only start and stop processes.
var noWarmup = map[string]bool{"client-ask": true, "failover-fast": true, "failover-default": true,
	"replicated-write": true, "replicated-write-sync": true, "handoff-transfer": true, "continuity-ask": true}

// continuityAsk's primary figure is keyed asks/s, base the plain
// replicated asks/s in the same cluster; p50 and p99 are the keyed asks',
// replayP50 the replays' and plainP50 the plain asks'.
func continuityAsk(p peer, clk *clock, sz sizes, _ []string) (measurement, error) {
	r, err := p.(troupePeer).ContinuityAsk(clk, sz.ReplNodes, sz.ReplGos, sz.ReplKeys, sz.ReplN)
	if err != nil {
		return measurement{}, err
	}
	m := latencies(clk, r.keyed)
	m.base = r.plain
	m.replayP50, m.plainP50 = percentile(r.replayed, 0.50), r.plainP50
	return m, nil
}

func replicatedWrite(p peer, clk *clock, sz sizes, sync bool) (measurement, error) {
	lat, base, err := p.(troupePeer).ReplicatedWrite(clk, sz.ReplNodes, sz.ReplGos, sz.ReplKeys, sz.ReplN, sync)
	if err != nil {
		return measurement{}, err
	}
	m := latencies(clk, lat)
	m.base = base
	return m, nil
}

// handoffTransfer's primary figure is the megabytes per second the
// member received once up, and base the same for bulk TCP; p50 and p99
// are the asks' from the member's start until it received all, idleP99
// before it started; failed and idleFailed count the asks that failed
// in those windows (5 s deadline, not in the latencies); the
// CPU figures are per megabyte received (from the member's start).
func handoffTransfer(p peer, clk *clock, sz sizes, _ []string) (measurement, error) {
	r, err := p.(troupePeer).HandoffTransfer(clk, sz.HandoffKeys, sz.HandoffValue, sz.HandoffFillers,
		sz.HandoffAskers, sz.HandoffAskRate, sz.HandoffIdle, sz.HandoffQuiet, sz.HandoffVia, sz.HandoffCatchUpRate)
	if err != nil {
		return measurement{}, err
	}
	mb := float64(r.bytes) / 1e6
	all := float64(r.bytes+r.early) / 1e6
	m := clk.rate(1)
	m.cpuPerOp, m.nodeCPUPerOp = m.cpuPerOp/all, m.nodeCPUPerOp/all
	m.primary, m.mb, m.secs = mb/r.transfer.Seconds(), mb, r.transfer.Seconds()
	m.upSecs, m.earlyMB = r.up.Seconds(), float64(r.early)/1e6
	m.settleSecs = r.settle.Seconds()
	m.base = mb / r.bulk.Seconds()
	m.p50, m.p99 = percentile(r.during, 0.50), percentile(r.during, 0.99)
	m.idleP99 = percentile(r.idle, 0.99)
	m.streamP99 = percentile(r.streaming, 0.99)
	m.afterP99 = percentile(r.after, 0.99)
	m.failed = float64(r.duringFailed)
	m.idleFailed = float64(r.idleFailed)
	return m, nil
}

func failover(p peer, clk *clock, sz sizes, timings string) (measurement, error) {
	failed, err := p.(troupePeer).Failover(clk, sz.FailoverNodes, timings)
	m := clk.rate(1)
	m.primary = clk.wall.Seconds()
	m.failed = float64(failed)
	return m, err
}

// latencies is the measurement of len(lat) sequential round trips.
func latencies(clk *clock, lat []time.Duration) measurement {
	m := clk.rate(len(lat))
	m.p50, m.p99 = percentile(lat, 0.50), percentile(lat, 0.99)
	return m
}

func activationKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = activationKey(i)
	}
	return keys
}
