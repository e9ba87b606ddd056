package netns

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Prefix starts the name of every namespace this package creates.
const Prefix = "trpns-"

// netnsDir is where ip netns keeps its named namespaces.
const netnsDir = "/run/netns"

// testRange is the only range a Lab may use: traffic there stays inside
// the test's own namespaces.
var testRange = netip.MustParsePrefix("10.210.0.0/16")

// Config describes a Lab. The zero value is two hosts on 10.210.0.0/24.
type Config struct {
	// Hosts is the number of hosts, 1 to 250. Zero means 2.
	Hosts int
	// Subnet is the hosts' /24, inside 10.210.0.0/16; host i gets the
	// address .i+1. Zero means 10.210.0.0/24.
	Subnet netip.Prefix
	// CommandTimeout bounds each ip, tc or nft invocation. Zero means 10 s.
	CommandTimeout time.Duration
}

func (c Config) withDefaults() Config {
	if c.Hosts == 0 {
		c.Hosts = 2
	}
	if !c.Subnet.IsValid() {
		c.Subnet = netip.MustParsePrefix("10.210.0.0/24")
	}
	if c.CommandTimeout == 0 {
		c.CommandTimeout = 10 * time.Second
	}
	return c
}

// Validate reports a Config that New would refuse.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Hosts < 1 || c.Hosts > 250:
		return fmt.Errorf("%w: Hosts = %d, want 1..250", ErrConfig, c.Hosts)
	case c.Subnet.Bits() != 24 || !c.Subnet.Addr().Is4() || !testRange.Contains(c.Subnet.Addr()) || c.Subnet.Masked() != c.Subnet:
		return fmt.Errorf("%w: Subnet = %s, want a /24 network inside %s", ErrConfig, c.Subnet, testRange)
	case c.CommandTimeout < 0:
		return fmt.Errorf("%w: CommandTimeout = %s, want >= 0", ErrConfig, c.CommandTimeout)
	}
	return nil
}

// Lab is a set of hosts in their own namespaces, joined by a bridge. Its
// methods are safe for concurrent use.
type Lab struct {
	cfg   Config
	id    string
	hosts []*Host
	sw    string // namespace holding the bridge

	mu    sync.Mutex
	rules map[*Host][]string // nft rules in each host's output chain
}

// Host is one namespace of a Lab.
type Host struct {
	// Index is the host's position in the Lab, from 0.
	Index int
	// NS is the namespace name, for ip netns exec.
	NS string
	// Addr is the host's address on eth0.
	Addr netip.Addr
	// Port is the name of the host's port on the switch.
	Port string

	lab *Lab
}

// Missing returns why this process cannot build a Lab ("" if it can):
// not root, or a required command not on PATH.
func Missing() string {
	var why []string
	if os.Geteuid() != 0 {
		why = append(why, "not root")
	}
	for _, tool := range []string{"ip", "tc", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			why = append(why, tool+" not found (apt-get install -y iproute2 nftables)")
		}
	}
	return strings.Join(why, "; ")
}

// New builds a Lab for the test, or skips the test when Missing says this
// process cannot (under CI=true as root, a missing tool fails the test
// instead). It fails the test if building fails, and deletes
// everything it made when the test ends.
func New(ctx context.Context, t testing.TB, cfg Config) *Lab {
	t.Helper()
	if why := Missing(); why != "" {
		// In CI (root) a missing tool is a broken setup, not a reason to
		// skip: fail so the install step gets fixed.
		if os.Getenv("CI") != "" && os.Geteuid() == 0 {
			t.Fatalf("netns: CI runs as root but %s", why)
		}
		t.Skipf("netns: skipping test that needs network namespaces: %s", why)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg = cfg.withDefaults()
	if err := CleanupLeaked(ctx); err != nil {
		t.Logf("netns: cleaning up leaked namespaces: %v", err)
	}
	var rnd [3]byte
	_, _ = rand.Read(rnd[:])
	id := fmt.Sprintf("%s%d-%s", Prefix, os.Getpid(), hex.EncodeToString(rnd[:]))
	l := &Lab{cfg: cfg, id: id, sw: id + "-sw", rules: make(map[*Host][]string)}
	base := cfg.Subnet.Addr().As4()
	for i := range cfg.Hosts {
		a := base
		a[3] = byte(i + 1)
		l.hosts = append(l.hosts, &Host{Index: i, NS: fmt.Sprintf("%s-h%d", id, i), Addr: netip.AddrFrom4(a), Port: fmt.Sprintf("p%d", i), lab: l})
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := l.destroy(ctx); err != nil {
			t.Errorf("netns: cleanup: %v", err)
		}
	})
	if err := l.build(ctx); err != nil {
		t.Fatalf("netns: building a lab of %d hosts: %v", cfg.Hosts, err)
	}
	return l
}

// Host returns host i.
func (l *Lab) Host(i int) *Host { return l.hosts[i] }

// Hosts returns every host, in index order.
func (l *Lab) Hosts() []*Host { return append([]*Host(nil), l.hosts...) }

// Switch returns the name of the namespace holding the bridge.
func (l *Lab) Switch() string { return l.sw }

func (l *Lab) namespaces() []string {
	ns := []string{l.sw}
	for _, h := range l.hosts {
		ns = append(ns, h.NS)
	}
	return ns
}

func (l *Lab) build(ctx context.Context) error {
	for _, ns := range l.namespaces() {
		if err := l.run(ctx, nil, "ip", "netns", "add", ns); err != nil {
			return err
		}
	}
	// One ip process per namespace: link creation runs from the root
	// namespace but only names the lab's namespaces.
	batches := map[string]*strings.Builder{"": {}, l.sw: {}}
	line := func(ns, format string, args ...any) {
		if batches[ns] == nil {
			batches[ns] = &strings.Builder{}
		}
		fmt.Fprintf(batches[ns], format+"\n", args...)
	}
	line(l.sw, "link add br0 type bridge")
	line(l.sw, "link set br0 up")
	line(l.sw, "link set lo up")
	for _, h := range l.hosts {
		line("", "link add eth0 netns %s type veth peer name %s netns %s", h.NS, h.Port, l.sw)
	}
	for _, h := range l.hosts {
		line(l.sw, "link set %s master br0 up", h.Port)
		line(h.NS, "link set lo up")
		line(h.NS, "addr add %s/%d dev eth0", h.Addr, l.cfg.Subnet.Bits())
		line(h.NS, "link set eth0 up")
	}
	order := append([]string{""}, l.namespaces()...)
	for _, ns := range order {
		args := []string{"-batch", "-"}
		if ns != "" {
			args = append([]string{"-n", ns}, args...)
		}
		if err := l.run(ctx, strings.NewReader(batches[ns].String()), "ip", args...); err != nil {
			return err
		}
	}
	for _, h := range l.hosts {
		if err := l.nft(ctx, h, nftBase); err != nil {
			return err
		}
	}
	return nil
}

// destroy deletes every namespace of the lab that exists.
func (l *Lab) destroy(ctx context.Context) error {
	var errs []error
	for _, ns := range l.namespaces() {
		if _, err := os.Stat(netnsDir + "/" + ns); err != nil {
			continue
		}
		errs = append(errs, l.run(ctx, nil, "ip", "netns", "del", ns))
	}
	return errors.Join(errs...)
}

// run runs one command with the lab's timeout.
func (l *Lab) run(ctx context.Context, stdin *strings.Reader, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.CommandTimeout)
	defer cancel()
	return runCmd(ctx, stdin, name, args...)
}

func runCmd(ctx context.Context, stdin *strings.Reader, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%w: %s %s: %w: %s", ErrCommand, name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// CleanupLeaked deletes namespaces named with Prefix whose creating process
// no longer exists, as left by a test binary that was killed.
func CleanupLeaked(ctx context.Context) error {
	entries, err := os.ReadDir(netnsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("troupe: netns: listing %s: %w", netnsDir, err)
	}
	var errs []error
	for _, e := range entries {
		pid, ok := ownerPid(e.Name())
		if !ok || processAlive(pid) {
			continue
		}
		errs = append(errs, runCmd(ctx, nil, "ip", "netns", "del", e.Name()))
	}
	return errors.Join(errs...)
}

// ownerPid parses the pid out of "trpns-<pid>-...".
func ownerPid(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, Prefix)
	if !ok {
		return 0, false
	}
	pidText, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(pidText)
	return pid, err == nil && pid > 0
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func (l *Lab) own(hosts ...*Host) error {
	for _, h := range hosts {
		if h == nil || h.lab != l {
			return ErrForeignHost
		}
	}
	return nil
}
