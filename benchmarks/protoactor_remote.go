package main

import (
	"fmt"
	"time"

	pa "github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Proto.Actor remote (gRPC) needs protobuf messages: the well-known types
// serve. An Int64Value adds its value to the counter, an Empty asks the
// count, answered as an Int64Value.

// paRemoteName is the name of the counter on the server node.
const paRemoteName = "rcounter"

type paRemoteCounter struct{ n int64 }

func (a *paRemoteCounter) Receive(ctx pa.Context) {
	switch m := ctx.Message().(type) {
	case *wrapperspb.Int64Value:
		a.n += m.Value
	case *emptypb.Empty:
		ctx.Respond(wrapperspb.Int64(a.n))
	}
}

// startProtoRemote starts a Proto.Actor system with remoting on a free
// loopback port.
func startProtoRemote() (*pa.ActorSystem, *remote.Remote) {
	sys := newProto()
	r := remote.NewRemote(sys, remote.Configure("127.0.0.1", 0))
	r.Start()
	return sys, r
}

func startProtoNode() (string, func() error, error) {
	sys, r := startProtoRemote()
	props := pa.PropsFromProducer(func() pa.Actor { return &paRemoteCounter{} })
	if _, err := sys.Root.SpawnNamed(props, paRemoteName); err != nil {
		return "", nil, err
	}
	return sys.Address(), func() error {
		r.Shutdown(false)
		sys.Shutdown()
		return nil
	}, nil
}

// protoRemote is a server node and this process's remoting system; pid is
// the server's counter.
type protoRemote struct {
	server *node
	sys    *pa.ActorSystem
	pid    *pa.PID
}

func (e *remoteEnv) protoEnv() (*protoRemote, error) {
	if e == nil {
		return nil, errNoEnv
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.proto != nil {
		return e.proto, nil
	}
	n, err := startNode("protoactor")
	if err != nil {
		return nil, err
	}
	e.onClose(func() { n.stop(5 * time.Second) })
	sys, r := startProtoRemote()
	e.onClose(func() {
		r.Shutdown(false)
		sys.Shutdown()
	})
	e.proto = &protoRemote{server: n, sys: sys, pid: pa.NewPID(n.addr, paRemoteName)}
	return e.proto, nil
}

func (p protoRemote) count() (int64, error) {
	res, err := p.sys.Root.RequestFuture(p.pid, &emptypb.Empty{}, paAskTimeout).Result()
	if err != nil {
		return 0, err
	}
	v, ok := res.(*wrapperspb.Int64Value)
	if !ok {
		return 0, fmt.Errorf("protoactor: count answered %T", res)
	}
	return v.Value, nil
}

// one is the message every remote tell sends: immutable, so one value
// serves (the remote serializes it), as Troupe's add{N: 1} boxes without
// allocating.
var one = wrapperspb.Int64(1)

func (p protoPeer) RemoteTell(clk *clock, n int) error {
	e, err := p.rem.protoEnv()
	if err != nil {
		return err
	}
	base, err := e.count()
	if err != nil {
		return err
	}
	want := base + int64(n)
	clk.node(e.server.cmd.Process.Pid)
	clk.start()
	for range n {
		e.sys.Root.Send(e.pid, one)
	}
	last, since := int64(-1), time.Now()
	for {
		got, err := e.count()
		if err != nil {
			return err
		}
		if got == want {
			break
		}
		if got > want {
			return fmt.Errorf("protoactor: remote counter at %d, want %d", got, want)
		}
		if got != last {
			last, since = got, time.Now()
		} else if time.Since(since) > stallAfter {
			return fmt.Errorf("protoactor: remote counter stuck at %d of %d for %v", got-base, n, stallAfter)
		}
	}
	clk.stop()
	return nil
}

// RemoteAsk ignores timeout: every RequestFuture has its own
// (paAskTimeout) already.
func (p protoPeer) RemoteAsk(clk *clock, n int, _ time.Duration) ([]time.Duration, error) {
	e, err := p.rem.protoEnv()
	if err != nil {
		return nil, err
	}
	if _, err := e.count(); err != nil {
		return nil, err
	}
	lat := make([]time.Duration, n)
	clk.node(e.server.cmd.Process.Pid)
	clk.start()
	for i := range lat {
		t0 := time.Now()
		if _, err := e.count(); err != nil {
			return nil, err
		}
		lat[i] = time.Since(t0)
	}
	clk.stop()
	return lat, nil
}
