// Package nettest holds network helpers shared by the tests of several
// packages.
package nettest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Serve accepts connections on ln and runs handle on each, each in its own
// goroutine, until the test ends; then it closes ln and every connection it
// accepted and waits for the handlers to return.
func Serve(t testing.TB, ln net.Listener, handle func(net.Conn)) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				handle(c)
			}()
		}
	}()
}

// Echo writes back what it reads until the connection ends.
func Echo(c net.Conn) { _, _ = io.Copy(c, c) }
