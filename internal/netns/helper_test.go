package netns_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/netns"
)

// helperEnv makes the test binary act as a small network program, so tests
// can run real processes in a namespace without netcat.
const helperEnv = "TROUPE_NETNS_HELPER"

// runHelper runs "echo-server ADDR" (print "ready", echo one connection) or
// "echo-client ADDR MESSAGE" (send MESSAGE, print the echo).
func runHelper(spec string) int {
	f := strings.Fields(spec)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	switch {
	case len(f) == 2 && f[0] == "echo-server":
		var lc net.ListenConfig
		ln, err := lc.Listen(ctx, "tcp4", f[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println("ready")
		c, err := ln.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		_, _ = io.Copy(c, c)
		_ = c.Close()
		return 0
	case len(f) == 3 && f[0] == "echo-client":
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp4", f[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		_, _ = io.WriteString(c, f[2])
		_ = c.(*net.TCPConn).CloseWrite()
		out, err := io.ReadAll(c)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Print(string(out))
		return 0
	}
	fmt.Fprintf(os.Stderr, "unknown helper %q\n", spec)
	return 2
}

// startHelper starts helper spec in h and returns its stdout lines.
func startHelper(t *testing.T, ctx context.Context, h *netns.Host, spec string) (*bufio.Scanner, func() error) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := h.Command(ctx, exe)
	cmd.Env = append(os.Environ(), helperEnv+"="+spec)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting helper %q in %s: %v", spec, h.NS, err)
	}
	return bufio.NewScanner(out), cmd.Wait
}
