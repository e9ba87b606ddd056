package netns

import (
	"context"
	"fmt"
	"strings"
)

// nftBase is each host's table: one output chain holding the lab's rules.
const nftBase = `table inet troupe {
	chain output {
		type filter hook output priority 0; policy accept;
	}
}
`

// Block silently drops every packet from host from to host to; a dial from
// from to to times out. The other direction is untouched.
func (l *Lab) Block(ctx context.Context, from, to *Host) error {
	return l.addRule(ctx, from, to, fmt.Sprintf("ip daddr %s drop", to.Addr))
}

// Drop blocks both directions between a and b.
func (l *Lab) Drop(ctx context.Context, a, b *Host) error {
	if err := l.Block(ctx, a, b); err != nil {
		return err
	}
	return l.Block(ctx, b, a)
}

// Reject answers every TCP segment from host from to host to with a reset
// (other protocols with ICMP unreachable): a dial is refused at once and an
// open connection fails with ECONNRESET when from next sends.
func (l *Lab) Reject(ctx context.Context, from, to *Host) error {
	return l.addRule(ctx, from, to,
		fmt.Sprintf("ip daddr %s meta l4proto tcp reject with tcp reset", to.Addr),
		fmt.Sprintf("ip daddr %s reject", to.Addr))
}

// Loss drops about percent % of the packets from host from to host to, at
// random (kernel randomness: not reproducible, assert loosely).
func (l *Lab) Loss(ctx context.Context, from, to *Host, percent int) error {
	if percent < 1 || percent > 100 {
		return fmt.Errorf("%w: loss %d%%, want 1..100", ErrBadRate, percent)
	}
	return l.addRule(ctx, from, to, fmt.Sprintf("ip daddr %s numgen random mod 100 < %d drop", to.Addr, percent))
}

// Partition drops every packet between hosts of different groups. Hosts in
// no group are untouched. Earlier rules stay; Heal removes all. Each host's
// rules load in one atomic nft transaction.
func (l *Lab) Partition(ctx context.Context, groups ...[]*Host) error {
	perHost := make(map[*Host][]string)
	for i, g := range groups {
		for _, other := range groups[i+1:] {
			for _, a := range g {
				for _, b := range other {
					if err := l.own(a, b); err != nil {
						return err
					}
					perHost[a] = append(perHost[a], fmt.Sprintf("ip daddr %s drop", b.Addr))
					perHost[b] = append(perHost[b], fmt.Sprintf("ip daddr %s drop", a.Addr))
				}
			}
		}
	}
	for _, h := range l.hosts { // in index order, for reproducible logs
		if rules := perHost[h]; len(rules) > 0 {
			if err := l.addRules(ctx, h, rules...); err != nil {
				return err
			}
		}
	}
	return nil
}

// Heal removes every rule Block, Drop, Reject, Loss and Partition added.
func (l *Lab) Heal(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, h := range l.hosts {
		if len(l.rules[h]) == 0 {
			continue
		}
		if err := l.nft(ctx, h, "flush chain inet troupe output\n"); err != nil {
			return err
		}
		delete(l.rules, h)
	}
	return nil
}

// Rules returns the nft rules in force on host h, for failure messages.
func (l *Lab) Rules(h *Host) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.rules[h]...)
}

func (l *Lab) addRule(ctx context.Context, from, to *Host, rules ...string) error {
	if err := l.own(from, to); err != nil {
		return err
	}
	return l.addRules(ctx, from, rules...)
}

// addRules appends rules to host h's output chain in one transaction.
func (l *Lab) addRules(ctx context.Context, h *Host, rules ...string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, r := range rules {
		fmt.Fprintf(&b, "add rule inet troupe output %s\n", r)
	}
	if err := l.nft(ctx, h, b.String()); err != nil {
		return err
	}
	l.rules[h] = append(l.rules[h], rules...)
	return nil
}

// nft loads a script into host h's ruleset atomically.
func (l *Lab) nft(ctx context.Context, h *Host, script string) error {
	return l.run(ctx, strings.NewReader(script), "ip", "netns", "exec", h.NS, "nft", "-f", "-")
}
