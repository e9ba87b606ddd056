package netns

import (
	"context"
	"fmt"
	"strconv"
)

// Rate is a bandwidth in bits per second.
type Rate int64

// Common rates.
const (
	Kbit Rate = 1000
	Mbit Rate = 1000 * Kbit
	Gbit Rate = 1000 * Mbit
)

// LimitEgress caps what host h sends to Rate with a tbf qdisc on its eth0,
// replacing any earlier cap.
func (l *Lab) LimitEgress(ctx context.Context, h *Host, r Rate) error {
	if err := l.own(h); err != nil {
		return err
	}
	return l.tbf(ctx, h.NS, "eth0", r)
}

// LimitIngress caps what host h receives to Rate with a tbf qdisc on its
// switch port, replacing any earlier cap.
func (l *Lab) LimitIngress(ctx context.Context, h *Host, r Rate) error {
	if err := l.own(h); err != nil {
		return err
	}
	return l.tbf(ctx, l.sw, h.Port, r)
}

// Unlimit removes both caps of host h.
func (l *Lab) Unlimit(ctx context.Context, h *Host) error {
	if err := l.own(h); err != nil {
		return err
	}
	// Deleting a missing root qdisc fails; only the end state matters.
	_ = l.run(ctx, nil, "tc", "-n", h.NS, "qdisc", "del", "dev", "eth0", "root")
	_ = l.run(ctx, nil, "tc", "-n", l.sw, "qdisc", "del", "dev", h.Port, "root")
	return nil
}

func (l *Lab) tbf(ctx context.Context, ns, dev string, r Rate) error {
	if r <= 0 {
		return fmt.Errorf("%w: %d bit/s", ErrBadRate, r)
	}
	// The bucket must hold at least a timer tick of traffic (rate/HZ at
	// HZ up to 1000) and a few full frames; latency bounds the queue.
	burst := max(int64(r)/8/100, 16<<10)
	return l.run(ctx, nil, "tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf",
		"rate", strconv.FormatInt(int64(r), 10)+"bit",
		"burst", strconv.FormatInt(burst, 10),
		"latency", "100ms")
}
