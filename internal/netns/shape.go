package netns

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// Rate is a bandwidth in bits per second.
type Rate int64

// Common rates.
const (
	Kbit Rate = 1000
	Mbit Rate = 1000 * Kbit
	Gbit Rate = 1000 * Mbit
)

// TBF is a token-bucket cap, the parameters of tc's tbf qdisc.
type TBF struct {
	// Rate is the cap. Required.
	Rate Rate
	// Burst is the bucket size in bytes. Zero means max(Rate/800 bytes, 16 KiB):
	// at least one timer tick of traffic.
	Burst int64
	// Latency is how long a packet may wait in the queue before tbf drops
	// it, which sets the queue length. Zero means 100 ms.
	Latency time.Duration
}

// LimitEgress caps what host h sends to r with a tbf qdisc on its eth0,
// replacing any earlier cap.
func (l *Lab) LimitEgress(ctx context.Context, h *Host, r Rate) error {
	return l.ShapeEgress(ctx, h, TBF{Rate: r})
}

// LimitIngress caps what host h receives to r with a tbf qdisc on its
// switch port, replacing any earlier cap.
func (l *Lab) LimitIngress(ctx context.Context, h *Host, r Rate) error {
	return l.ShapeIngress(ctx, h, TBF{Rate: r})
}

// ShapeEgress is LimitEgress with every tbf parameter.
func (l *Lab) ShapeEgress(ctx context.Context, h *Host, s TBF) error {
	if err := l.own(h); err != nil {
		return err
	}
	return l.tbf(ctx, h.NS, "eth0", s)
}

// ShapeIngress is LimitIngress with every tbf parameter.
func (l *Lab) ShapeIngress(ctx context.Context, h *Host, s TBF) error {
	if err := l.own(h); err != nil {
		return err
	}
	return l.tbf(ctx, l.sw, h.Port, s)
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

func (l *Lab) tbf(ctx context.Context, ns, dev string, s TBF) error {
	if s.Rate <= 0 || s.Burst < 0 || s.Latency < 0 {
		return fmt.Errorf("%w: tbf %+v", ErrBadRate, s)
	}
	if s.Burst == 0 {
		// At least a timer tick of traffic (rate/HZ at HZ up to 100)
		// and a few full frames.
		s.Burst = max(int64(s.Rate)/8/100, 16<<10)
	}
	if s.Latency == 0 {
		s.Latency = 100 * time.Millisecond
	}
	return l.run(ctx, nil, "tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf",
		"rate", strconv.FormatInt(int64(s.Rate), 10)+"bit",
		"burst", strconv.FormatInt(s.Burst, 10),
		"latency", strconv.FormatInt(s.Latency.Microseconds(), 10)+"us")
}
