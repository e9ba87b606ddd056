package netns

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"
)

// Command returns a command that runs name in the host's namespace
// (ip netns exec). The caller starts it and waits for it.
func (h *Host) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", h.NS, name}, args...)...)
}

// Run runs name in the host's namespace and returns its combined output.
func (h *Host) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	out, err := h.Command(ctx, name, args...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%w: in %s: %s: %w: %s", ErrCommand, h.NS, name, err, out)
	}
	return out, nil
}

// Do runs fn on an OS thread inside the host's namespace and returns its
// error. Goroutines fn starts are not in the namespace; sockets fn creates
// stay in it. See the package doc for the caveats.
func (h *Host) Do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		// The thread is never unlocked: it exits with this goroutine, so
		// the namespace switch cannot leak to other goroutines.
		runtime.LockOSThread()
		f, err := os.Open(netnsDir + "/" + h.NS)
		if err != nil {
			errc <- fmt.Errorf("troupe: netns: opening namespace %s: %w", h.NS, err)
			return
		}
		err = unix.Setns(int(f.Fd()), unix.CLONE_NEWNET)
		_ = f.Close()
		if err != nil {
			errc <- fmt.Errorf("troupe: netns: setns %s: %w", h.NS, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// Listen creates a listener inside the host (network "tcp", "tcp4"...);
// it can be used from any goroutine and accepts only within the lab.
func (h *Host) Listen(ctx context.Context, network, addr string) (net.Listener, error) {
	var ln net.Listener
	err := h.Do(func() error {
		var lc net.ListenConfig
		var err error
		ln, err = lc.Listen(ctx, network, addr)
		return err
	})
	return ln, err
}

// ListenPacket creates a packet socket (e.g. "udp4") inside the host.
func (h *Host) ListenPacket(ctx context.Context, network, addr string) (net.PacketConn, error) {
	var pc net.PacketConn
	err := h.Do(func() error {
		var lc net.ListenConfig
		var err error
		pc, err = lc.ListenPacket(ctx, network, addr)
		return err
	})
	return pc, err
}

// Dial connects from inside the host. Use IP literals. The method value
// h.Dial fits hooks that take a dial function.
func (h *Host) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := h.Do(func() error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}
