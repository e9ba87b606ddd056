package transport_test

import (
	"context"
	"fmt"
	"net"

	"github.com/troupe-go/troupe/internal/transport"
	"github.com/troupe-go/troupe/ring"
	"github.com/troupe-go/troupe/wire"
)

// Two nodes on loopback: one sends an envelope, the other prints it.
func Example() {
	listen := func() net.Listener {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			panic(err)
		}
		return ln
	}
	lnA, lnB := listen(), listen()
	a, _ := transport.New(wire.Config{ClusterName: "demo", Advertise: lnA.Addr().String()})
	b, _ := transport.New(wire.Config{ClusterName: "demo", Advertise: lnB.Addr().String()})
	defer a.Close()
	defer b.Close()
	got := make(chan string, 1)
	b.Handle(transport.StreamApplication, transport.HandlerFunc(func(from ring.NodeID, p []byte) {
		got <- string(p)
	}))
	go a.Serve(lnA)
	go b.Serve(lnB)

	r, err := a.Send(context.Background(), b.Self(), transport.StreamApplication, 42, []byte("hello, troupe"))
	if err != nil {
		panic(err)
	}
	if err := r.Wait(context.Background()); err != nil {
		panic(err)
	}
	fmt.Println(<-got)
	// Output: hello, troupe
}
