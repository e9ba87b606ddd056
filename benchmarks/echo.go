package main

import (
	"io"
	"net"
	"time"
)

// The baseline of the remote workloads: a bare TCP round trip between two
// processes on loopback, 8 bytes each way, one at a time.

const echoSize = 8

func startEcho() (string, func() error, error) {
	return serveTCP(func(c net.Conn) {
		buf := make([]byte, echoSize)
		for {
			if _, err := io.ReadFull(c, buf); err != nil {
				return
			}
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	})
}

// serveTCP listens on a free loopback port and runs handle on each
// connection in its own goroutine, closing the connection after; it
// returns the address and a function that stops listening.
func serveTCP(handle func(net.Conn)) (string, func() error, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return ln.Addr().String(), ln.Close, nil
}

// tcpRoundTrips makes n sequential round trips to the echo node at addr
// and returns the latency of each.
func tcpRoundTrips(clk *clock, addr string, n int) ([]time.Duration, error) {
	c, err := net.Dial("tcp", addr) // Go sets TCP_NODELAY
	if err != nil {
		return nil, err
	}
	defer c.Close()
	buf := make([]byte, echoSize)
	if _, err := c.Write(buf); err != nil {
		return nil, err
	}
	if _, err := io.ReadFull(c, buf); err != nil {
		return nil, err
	}
	lat := make([]time.Duration, n)
	clk.start()
	for i := range lat {
		t0 := time.Now()
		if _, err := c.Write(buf); err != nil {
			return nil, err
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			return nil, err
		}
		lat[i] = time.Since(t0)
	}
	clk.stop()
	return lat, nil
}
