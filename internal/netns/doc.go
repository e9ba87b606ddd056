// Package netns builds throwaway networks of separate hosts for tests, out of
// Linux network namespaces, veth pairs, a bridge, tc and nftables.
//
// Everything it makes lives inside namespaces the test creates: the hosts
// have no default route and no link to the machine's own network, so their
// traffic cannot leave them.
//
// Never dial a host's address from the test's own namespace (a plain
// net.Dial in the test): the machine's default route would send it off the
// machine. Dial from another host with Host.Dial, Host.Do or Host.Command.
//
// # Requirements
//
// Root, and the ip, tc and nft commands (Debian: apt-get install -y iproute2
// nftables). New skips the test with a message naming what is missing; with
// CI set in the environment and running as root, it fails instead, so a
// broken CI install cannot hide behind skips. The
// kernel needs veth, bridge, tbf and nf_tables; netem is not required (this
// package has no delay: use internal/delayproxy for that).
//
// # Model
//
// A Lab is N hosts plus a switch. Each host is a namespace with lo and one
// interface, eth0, addressed from Config.Subnet (default 10.210.0.0/24: host
// i is 10.210.0.i+1). A separate switch namespace holds the bridge br0 and
// the peer ends p0..pN-1 of the hosts' veth pairs, so no interface is ever
// created in the machine's root namespace.
//
//	lab := netns.New(t.Context(), t, netns.Config{Hosts: 3})
//	h0, h1 := lab.Host(0), lab.Host(1)
//	ln, _ := h1.Listen(ctx, "tcp", netip.AddrPortFrom(h1.Addr, 7000).String())
//	c, _ := h0.Dial(ctx, "tcp", ln.Addr().String())
//	_ = lab.Partition(ctx, []*netns.Host{h0}, []*netns.Host{h1, lab.Host(2)})
//	_ = lab.Heal(ctx)
//
// # Running code in a host
//
// Host.Command runs a program in the namespace (ip netns exec). Host.Do runs
// a Go function on an OS thread switched into the namespace with setns(2).
// Caveats of Do:
//
//   - Only the calling goroutine's thread is in the namespace. Goroutines the
//     function starts run elsewhere, in the test's own namespace. Create
//     sockets in the function itself.
//   - Sockets keep the namespace they were created in: a listener or
//     connection made inside Do can be used from any goroutine afterwards,
//     and stays in the host. Host.Listen and Host.Dial do exactly this.
//   - Use IP literals: name resolution may run on other threads.
//   - The thread is never returned to the scheduler's pool; it exits with
//     the goroutine, so a namespace cannot leak into unrelated code.
//
// # Shaping and filtering
//
// LimitEgress and LimitIngress put a tbf qdisc on a host's link (egress on
// eth0, ingress on the switch port toward the host); ShapeEgress and
// ShapeIngress take every tbf parameter (burst, queue latency). Block, Drop, Reject and
// Loss add nftables rules in the sending host's output chain between chosen
// hosts: silently dropped packets (a dial times out), TCP resets (a dial is
// refused, an open connection is reset) and random loss
// (numgen random mod 100 < N drop; kernel randomness, not seeded: assert
// loosely). Partition drops every packet between groups; Heal removes all
// rules. Rules and caps can change while connections are open.
//
// # Cleanup
//
// New registers t.Cleanup to delete every namespace it made, which also
// destroys their interfaces, qdiscs and rules. Namespace names are
// "trpns-<pid>-<random>-<host>", unique across parallel test binaries; New
// first deletes namespaces with that prefix whose process is gone (left by a
// killed run). CleanupLeaked does that on demand.
package netns
