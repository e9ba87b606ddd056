package main

import (
	"time"
)

// peer is one actor system under test. Every method builds a fresh system,
// runs one workload on it, closes it and reports what it measured; setup
// and teardown are outside the timed region. The Troupe and Proto.Actor
// implementations do the same work message for message.
type peer interface {
	Name() string
	// Tell sends n messages from one goroutine to one actor and waits
	// until the actor has counted all n.
	Tell(n int) (time.Duration, error)
	// TellMany has senders goroutines send per messages to each of keys
	// actors (round-robin) and waits until every actor counted its share.
	TellMany(senders, keys, per int) (time.Duration, error)
	// Ask asks one actor n times in sequence from a goroutine outside the
	// system and returns the latency of each round trip.
	Ask(n int) (total time.Duration, lat []time.Duration, err error)
	// PingPong bounces a ball m times between the two actors of each of
	// pairs pairs, one message in flight per pair, and waits for all.
	PingPong(pairs, m int) (time.Duration, error)
	// Activate sends one message to each of len(keys) fresh actors, waits
	// until all were handled and the runtime is quiet, and reports the time,
	// the garbage collection meanwhile and the heap the idle activated
	// actors hold.
	Activate(keys []string, quiet time.Duration) (activation, error)
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
}

// activation is what Activate measured.
type activation struct {
	d        time.Duration // sending the messages until the last was handled
	gcCycles uint32        // garbage collections that ended within d
	gcCPU    float64       // the runtime's estimate of GC CPU seconds within d
	heap     int64         // live heap growth once idle
}

// measurement is one run of one workload on one peer.
type measurement struct {
	primary  float64 // msgs/s, or seconds for activate
	p50      time.Duration
	p99      time.Duration
	perActr  float64 // heap bytes per idle actor (activate)
	gcCycles float64 // activate
	gcCPU    float64 // activate
}

// workload is a named benchmark and how to run it on a peer.
type workload struct {
	name string
	run  func(p peer, sz sizes, keys []string) (measurement, error)
}

var workloads = []workload{
	{"tell", func(p peer, sz sizes, _ []string) (measurement, error) {
		d, err := p.Tell(sz.TellN)
		return measurement{primary: rate(sz.TellN, d)}, err
	}},
	{"tell-many", func(p peer, sz sizes, _ []string) (measurement, error) {
		d, err := p.TellMany(sz.ManySenders, sz.ManyKeys, sz.ManyPer)
		return measurement{primary: rate(sz.ManySenders*sz.ManyKeys*sz.ManyPer, d)}, err
	}},
	{"ask", func(p peer, sz sizes, _ []string) (measurement, error) {
		d, lat, err := p.Ask(sz.AskN)
		if err != nil {
			return measurement{}, err
		}
		return measurement{primary: rate(sz.AskN, d), p50: percentile(lat, 0.50), p99: percentile(lat, 0.99)}, nil
	}},
	{"pingpong", func(p peer, sz sizes, _ []string) (measurement, error) {
		d, err := p.PingPong(sz.Pairs, sz.PingPongM)
		return measurement{primary: rate(sz.Pairs*sz.PingPongM, d)}, err
	}},
	{"activate", func(p peer, sz sizes, keys []string) (measurement, error) {
		a, err := p.Activate(keys, sz.ActivateQuiet)
		return measurement{primary: a.d.Seconds(), perActr: float64(a.heap) / float64(len(keys)),
			gcCycles: float64(a.gcCycles), gcCPU: a.gcCPU}, err
	}},
}

func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

func activationKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = activationKey(i)
	}
	return keys
}
