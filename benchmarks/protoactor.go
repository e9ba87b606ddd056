package main

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	pa "github.com/asynkron/protoactor-go/actor"
)

// Messages of the Proto.Actor workloads; the same shapes as Troupe's.
type (
	paAdd  struct{ N int }
	paGet  struct{}
	paBall struct {
		Left int
		Peer *pa.PID
	}
	paTouch struct{}
)

// paAskTimeout matches Troupe's default ask timeout.
const paAskTimeout = 10 * time.Second

type protoPeer struct {
	rem *remoteEnv // nodes of the remote workloads
}

func (protoPeer) Name() string { return "protoactor" }

func newProto() *pa.ActorSystem {
	// Logging is switched off, as Troupe's is by default; nothing on the
	// workloads' paths logs.
	return pa.NewActorSystem(pa.WithLoggerFactory(func(*pa.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
}

// paCounter counts paAdd messages and calls reached once the count hits
// target; paGet answers the count.
type paCounter struct {
	n       int
	target  int
	reached func()
}

func (a *paCounter) Receive(ctx pa.Context) {
	switch m := ctx.Message().(type) {
	case paAdd:
		a.n += m.N
		if a.n == a.target {
			a.reached()
		}
	case paGet:
		ctx.Respond(a.n)
	}
}

func counterProps(target int, reached func()) *pa.Props {
	return pa.PropsFromProducer(func() pa.Actor { return &paCounter{target: target, reached: reached} })
}

func (protoPeer) Tell(clk *clock, n int) error {
	sys := newProto()
	defer sys.Shutdown()
	done := make(chan struct{})
	pid := sys.Root.Spawn(counterProps(n, func() { close(done) }))
	clk.start()
	for range n {
		sys.Root.Send(pid, paAdd{N: 1})
	}
	<-done
	clk.stop()
	return nil
}

func (protoPeer) TellMany(clk *clock, senders, keys, per int) error {
	sys := newProto()
	defer sys.Shutdown()
	var wg sync.WaitGroup
	wg.Add(keys)
	props := counterProps(senders*per, wg.Done)
	pids := make([]*pa.PID, keys)
	for i := range pids {
		pid, err := sys.Root.SpawnNamed(props, activationKey(i))
		if err != nil {
			return err
		}
		pids[i] = pid
	}
	var sent sync.WaitGroup
	sent.Add(senders)
	clk.start()
	for s := range senders {
		go func() {
			defer sent.Done()
			for range per {
				for k := range keys {
					sys.Root.Send(pids[(k+s)%keys], paAdd{N: 1})
				}
			}
		}()
	}
	sent.Wait()
	wg.Wait()
	clk.stop()
	return nil
}

func (protoPeer) Ask(clk *clock, n int) ([]time.Duration, error) {
	sys := newProto()
	defer sys.Shutdown()
	pid := sys.Root.Spawn(counterProps(-1, nil))
	if _, err := sys.Root.RequestFuture(pid, paGet{}, paAskTimeout).Result(); err != nil {
		return nil, err
	}
	lat := make([]time.Duration, n)
	clk.start()
	for i := range lat {
		t0 := time.Now()
		if _, err := sys.Root.RequestFuture(pid, paGet{}, paAskTimeout).Result(); err != nil {
			return nil, err
		}
		lat[i] = time.Since(t0)
	}
	clk.stop()
	return lat, nil
}

type paPinger struct{ done func() }

func (a *paPinger) Receive(ctx pa.Context) {
	b, ok := ctx.Message().(paBall)
	if !ok {
		return // lifecycle messages
	}
	if b.Left == 0 {
		a.done()
		return
	}
	ctx.Send(b.Peer, paBall{Left: b.Left - 1, Peer: ctx.Self()})
}

func (protoPeer) PingPong(clk *clock, pairs, m int) error {
	sys := newProto()
	defer sys.Shutdown()
	var wg sync.WaitGroup
	props := pa.PropsFromProducer(func() pa.Actor { return &paPinger{done: wg.Done} })
	as := make([]*pa.PID, pairs)
	bs := make([]*pa.PID, pairs)
	for i := range pairs {
		as[i], bs[i] = sys.Root.Spawn(props), sys.Root.Spawn(props)
	}
	wg.Add(pairs)
	clk.start()
	for i := range pairs {
		sys.Root.Send(as[i], paBall{Left: m, Peer: bs[i]})
	}
	wg.Wait()
	clk.stop()
	return nil
}

type paActivated struct {
	handled *atomic.Int64
	want    int64
	done    chan struct{}
}

func (a *paActivated) Receive(ctx pa.Context) {
	if _, ok := ctx.Message().(paTouch); ok && a.handled.Add(1) == a.want {
		close(a.done)
	}
}

// Activate spawns one named actor per key and sends it one message: the
// Proto.Actor way to bring up an actor for a key (Troupe activates on the
// first message).
func (protoPeer) Activate(clk *clock, keys []string, quiet time.Duration) (heap int64, err error) {
	sys := newProto()
	defer sys.Shutdown()
	var handled atomic.Int64
	done := make(chan struct{})
	want := int64(len(keys))
	props := pa.PropsFromProducer(func() pa.Actor {
		return &paActivated{handled: &handled, want: want, done: done}
	})
	base := markHeap()
	clk.start()
	for _, k := range keys {
		pid, err := sys.Root.SpawnNamed(props, k)
		if err != nil {
			return 0, err
		}
		sys.Root.Send(pid, paTouch{})
	}
	<-done
	clk.stop()
	heap = settle(base, quiet)
	if got := registered(sys); got < len(keys) {
		return 0, errorf("protoactor: %d processes registered after activating %d", got, len(keys))
	}
	return heap, nil
}

// registered counts the processes in sys's registry.
func registered(sys *pa.ActorSystem) int {
	n := 0
	for _, m := range sys.ProcessRegistry.LocalPIDs.LocalPIDs {
		n += m.Count()
	}
	return n
}
