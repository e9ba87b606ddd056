package delayproxy_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/troupe-go/troupe/internal/delayproxy"
)

// Put 25 ms each way between a client and an echo server.
func ExampleNew() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var lc net.ListenConfig
	ln, _ := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_, _ = io.Copy(c, c)
			c.Close()
		}
	}()

	p, err := delayproxy.New(ctx, delayproxy.Config{Target: ln.Addr().String(), Delay: 25 * time.Millisecond})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()

	var d net.Dialer
	c, _ := d.DialContext(ctx, "tcp", p.Addr())
	defer c.Close()
	begin := time.Now()
	_, _ = c.Write([]byte("hi"))
	_, _ = io.ReadFull(c, make([]byte, 2))
	fmt.Println(time.Since(begin) >= 50*time.Millisecond)
	// Output: true
}
