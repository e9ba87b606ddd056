package faultnet_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"

	"github.com/troupe-go/troupe/internal/faultnet"
)

// Cut a connection at a seeded random point of its 32-byte handshake.
func ExampleBetween() {
	rng := faultnet.NewRand(1)
	at := faultnet.MustBetween(rng, 0, 32)
	client, server := faultnet.Pipe([]faultnet.Fault{faultnet.CutWriteAt(at)}, nil)
	defer server.Close()

	n, err := client.Write(make([]byte, 32))
	got, _ := io.ReadAll(server)
	fmt.Println(int64(n) == at, errors.Is(err, faultnet.ErrCut), int64(len(got)) == at)
	// Output: true true true
}

// A stall delivers nothing until Resume, without closing.
func ExampleConn_Stall() {
	a, b := faultnet.Pipe(nil, nil)
	defer a.Close()
	defer b.Close()
	a.Stall()
	go func() { _, _ = a.Write([]byte("held")) }()
	a.Resume()
	buf := make([]byte, 4)
	_, _ = io.ReadFull(b, buf)
	fmt.Println(string(buf))
	// Output: held
}

// Every connection of a Network gets faults from a seeded plan: here the
// dialing side is cut somewhere in its first 64 KiB.
func ExampleNetwork_SetPlan() {
	ctx := context.Background()
	fn := faultnet.NewNetwork(42)
	fn.SetPlan(func(info faultnet.ConnInfo, rng *rand.Rand) []faultnet.Fault {
		if info.Accepted {
			return nil
		}
		return []faultnet.Fault{faultnet.CutWriteAt(faultnet.MustBetween(rng, 0, 64<<10))}
	})
	ln, err := fn.Listen(ctx, "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_, _ = io.Copy(io.Discard, c)
			c.Close()
		}
	}()
	c, err := fn.Dialer("client").DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	_, err = c.Write(make([]byte, 64<<10))
	fmt.Println(errors.Is(err, faultnet.ErrCut))
	// Output: true
}

// Cut "during a resume": the first connection from a node is cut mid-stream
// at a seeded offset, and its redial (Seq 1) is cut inside its first 40
// bytes, the handshake that carries the resume counts.
func ExamplePlan() {
	plan := func(info faultnet.ConnInfo, rng *rand.Rand) []faultnet.Fault {
		if info.Accepted {
			return nil
		}
		switch info.Seq {
		case 0:
			return []faultnet.Fault{faultnet.CutWriteAt(faultnet.MustBetween(rng, 1<<10, 1<<20))}
		case 1:
			return []faultnet.Fault{faultnet.CutWriteAt(faultnet.MustBetween(rng, 0, 40))}
		}
		return nil
	}
	fn := faultnet.NewNetwork(7)
	fn.SetPlan(plan)
	fmt.Println("plan set")
	// Output: plan set
}

// Two in-process nodes on a Network, no sockets: a partition holds the
// bytes, Heal delivers them.
func ExampleNetwork_ListenPipe() {
	ctx := context.Background()
	fn := faultnet.NewNetwork(1)
	ln, _ := fn.ListenPipe("node-b")
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, _ := fn.Dialer("node-a").DialContext(ctx, "pipe", "node-b")
	defer c.Close()
	s := <-accepted
	defer s.Close()

	fn.Partition("node-a", "node-b", faultnet.Refuse)
	_, _ = c.Write([]byte("held")) // accepted by the buffers, not delivered
	fn.HealAll()
	buf := make([]byte, 4)
	_, _ = io.ReadFull(s, buf)
	fmt.Println(string(buf))
	// Output: held
}
