// Package delayproxy is a user-space TCP proxy for tests that adds a one-way
// delay, seeded jitter and a bandwidth cap between two loopback endpoints,
// because the kernel here has no netem.
//
// # Model
//
// Each accepted connection is paired with a fresh connection to the Target.
// Each direction of the pair is a small link model:
//
//	client ──read──▶ [bandwidth cap] ──▶ [delay line: Delay + jitter] ──write──▶ target
//
// A chunk read from one side waits for the link (Bandwidth, shared by every
// connection of the proxy in that direction, like one physical link), then
// for Delay plus a uniform draw from [0, Jitter), then is written to the other
// side. Jitter never reorders bytes: a chunk is never delivered before the one
// read before it. A half-close (FIN) travels through the delay line like data.
//
// Backpressure is real: the delay line holds at most MaxInFlight bytes per
// direction, and with a bandwidth cap the proxy shrinks its socket receive
// buffers so that about QueueDelay of traffic can wait at the cap, as at a
// router with a short queue. Throughput is therefore at most
// min(Bandwidth, MaxInFlight/Delay).
//
// # Usage
//
//	p, err := delayproxy.New(ctx, delayproxy.Config{Target: ln.Addr().String(), Delay: 25 * time.Millisecond})
//	defer p.Close()
//	conn, err := net.Dial("tcp", p.Addr()) // 50 ms round trip to ln
//
// CutAll and ResetAll break every proxied connection on demand (FIN or RST
// to both sides); SetShape changes delay, jitter and bandwidth for traffic
// read from then on. The proxy stops when its context ends or on Close,
// which waits for all of its goroutines.
//
// A proxy runs where its listener and dial function live: pass a Listener
// and Dial made with internal/netns to put it between namespaces.
package delayproxy
