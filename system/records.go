package system

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/membership"
	"github.com/troupe-go/troupe/internal/memrecords"
	"github.com/troupe-go/troupe/noderecord"
	"github.com/troupe-go/troupe/ring"
)

// RecordRole is the role of the node records cluster members publish
// (noderecord.Record.Role).
const RecordRole = "member"

// recordCallTimeout bounds each call to the record store: a heartbeat's,
// a readiness round's and the API's snapshot. A store that takes longer
// counts as failing (noderecord.ErrTimeout).
const recordCallTimeout = 2 * time.Second

// publisher puts this member's node record in the record store once a
// heartbeat, and removes it when the member leaves. With the in-process
// store (no Config.Records) it also feeds the store the records it
// derives from its membership view for the other members, since nothing
// else writes there. One goroutine (run) does all writing; readiness and
// the API read what it last found.
type publisher struct {
	store noderecord.Store
	// external is set for Config.Records: the user's store, which may
	// fail (readiness then has its "records" check) and which the
	// system does not close.
	external bool
	timings  noderecord.Timings
	cluster  string
	node     string // the advertised address
	started  time.Time
	version  string
	labels   map[string]string // the user's, copied; never written

	ctx    context.Context // ends at halt: cuts a heartbeat short
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// Written by run only.
	incarnation string // of the record last put
	seq         uint64
	derived     map[noderecord.Key]derivedRecord

	mu     sync.Mutex
	beats  int   // heartbeats that reached the store and read it back
	failed error // the last heartbeat's failure; nil once one succeeds
}

// derivedRecord is what the publisher put for another member.
type derivedRecord struct {
	incarnation string
	seq         uint64
}

func newPublisher(cfg Config, cc cluster.Config, started time.Time) *publisher {
	p := &publisher{store: cfg.Records, external: cfg.Records != nil, timings: cfg.RecordTimings.WithDefaults(),
		cluster: cc.WithDefaults().ClusterName, node: cc.Advertise, started: started, version: recordVersion(),
		labels: maps.Clone(cfg.RecordLabels), derived: map[noderecord.Key]derivedRecord{}}
	if p.store == nil {
		p.store = memrecords.New(memrecords.Config{})
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	return p
}

// recordVersion is the build version a record carries: the module's,
// "devel" when unknown.
func recordVersion() string {
	if v := moduleVersion(); v != "(devel)" {
		return v
	}
	return "devel"
}

func (p *publisher) key() noderecord.Key {
	return noderecord.Key{Cluster: p.cluster, Role: RecordRole, Node: p.node}
}

// callTimeout bounds one store call.
func (p *publisher) callTimeout() time.Duration { return min(p.timings.Heartbeat, recordCallTimeout) }

// start runs the heartbeats: one now, then one each Timings.Heartbeat
// until halt.
func (p *publisher) start(s *System) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(p.timings.Heartbeat)
		defer t.Stop()
		for {
			p.beat(s)
			select {
			case <-p.ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// beat puts this member's record, and with the in-process store the
// others' as derived from the view; with an external store it then
// reads a snapshot back, which is what readiness asks of the store: that
// it answers in time.
func (p *publisher) beat(s *System) {
	inc := s.m.cur.Load()
	if inc == nil {
		return
	}
	self := inc.node.ID()
	ctx, cancel := context.WithTimeout(p.ctx, p.callTimeout())
	defer cancel()
	err := p.putOwn(ctx, s, self)
	if err == nil && !p.external {
		err = p.feed(ctx, self, s.m.router.Members())
	}
	if err == nil && p.external {
		_, err = p.store.Snapshot(ctx, p.cluster)
	}
	if p.ctx.Err() != nil {
		return // halted: not the store's fault
	}
	if err != nil {
		s.h.Logger.Debug("troupe: node record heartbeat failed", "err", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failed = err
	if err == nil {
		p.beats++
	}
}

func (p *publisher) putOwn(ctx context.Context, s *System, self ring.NodeID) error {
	inc := strconv.FormatUint(self.Incarnation, 10)
	if inc != p.incarnation {
		p.incarnation, p.seq = inc, 0 // a rejoin is a new life: its sequence starts again
	} else {
		p.seq++
	}
	health, ready := recordHealth(s.Readiness())
	r := noderecord.Record{Cluster: p.cluster, Node: p.node, Role: RecordRole, Incarnation: inc,
		DataAddr: p.node, AdminAddr: s.AdminAddr(), BuildVersion: p.version, Started: p.started,
		Seq: p.seq, Health: health, Ready: ready, Counters: s.recordCounters(), Labels: p.labels}
	_, err := p.store.Put(ctx, r, p.timings.LeaseTTL)
	return err
}

// feed puts, for each other current member of the view, the record the
// view says of it, and removes those of the members gone from it. A
// derived record has the member's address and incarnation, a health
// and readiness from its status, no counters, and a sequence that counts
// this member's heartbeats that found it in the view: the view is all
// this member knows of it.
func (p *publisher) feed(ctx context.Context, self ring.NodeID, members []cluster.Member) error {
	seen := make(map[noderecord.Key]bool)
	for _, mb := range membership.Current(members) {
		if mb.ID.Addr == self.Addr {
			continue
		}
		k := noderecord.Key{Cluster: p.cluster, Role: RecordRole, Node: mb.ID.Addr}
		inc := strconv.FormatUint(mb.ID.Incarnation, 10)
		d, ok := p.derived[k]
		if ok && d.incarnation == inc {
			d.seq++
		} else {
			d = derivedRecord{incarnation: inc}
		}
		r := noderecord.Record{Cluster: p.cluster, Node: mb.ID.Addr, Role: RecordRole, Incarnation: inc,
			DataAddr: mb.ID.Addr, Seq: d.seq, Health: derivedHealth(mb),
			Ready: mb.Status == cluster.StatusAlive && !mb.Joining}
		if _, err := p.store.Put(ctx, r, p.timings.LeaseTTL); err != nil {
			return err
		}
		p.derived[k] = d
		seen[k] = true
	}
	for k, d := range p.derived {
		if seen[k] {
			continue
		}
		if _, err := p.store.Remove(ctx, k, d.incarnation); err != nil {
			return err
		}
		delete(p.derived, k)
	}
	return nil
}

// derivedHealth is what a member's status in the view says of its
// health: alive is healthy, suspect degraded, dead unhealthy; leaving
// members still serve their drain.
func derivedHealth(m cluster.Member) noderecord.Health {
	switch m.Status {
	case cluster.StatusAlive, cluster.StatusLeaving:
		return noderecord.Healthy
	case cluster.StatusSuspect:
		return noderecord.Degraded
	case cluster.StatusDead:
		return noderecord.Unhealthy
	}
	return noderecord.HealthUnknown
}

// recordHealth is the health and readiness a member publishes, from its
// readiness checks (the records check aside: a record that reaches the
// store says nothing of it). Ready when every other check passes, and
// then healthy; unhealthy when a failure keeps it from serving its keys
// (ReadinessCheck.Serves: removed by the cluster, or no majority);
// otherwise degraded: joining, catching up, its store not open, or
// closing.
func recordHealth(r Readiness) (noderecord.Health, bool) {
	health, ready := noderecord.Healthy, true
	for _, c := range r.Checks {
		switch {
		case c.OK || c.Name == ReadyCheckRecords:
		case !c.serves():
			health, ready = noderecord.Unhealthy, false
		default:
			ready = false
			if health == noderecord.Healthy {
				health = noderecord.Degraded
			}
		}
	}
	return health, ready
}

// recordCounters are the counters a record carries, from what the
// system counts anyway. Messages are counted only with Config.Metrics
// (the runtime's meters); without, they are 0.
func (s *System) recordCounters() noderecord.Counters {
	c := noderecord.Counters{Errors: uint64(max(s.h.Restarts.Load(), 0)), Activations: s.h.Activated.Load()}
	if m := s.met; m != nil {
		c.Messages = m.Total()
	}
	if s.m != nil {
		total, _ := s.m.counts()
		for _, st := range total.wire.Sent {
			c.Bytes += st.Bytes
		}
		for _, st := range total.wire.Received {
			c.Bytes += st.Bytes
		}
	}
	return c
}

// check is the readiness check of an external store: it passes once a
// heartbeat reached the store and read it back, and while the last one
// did.
func (p *publisher) check() (bool, string, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case errors.Is(p.failed, noderecord.ErrTimeout):
		return false, causeRecordsTimeout, "the node record store did not answer in time"
	case errors.Is(p.failed, noderecord.ErrUnavailable):
		return false, causeRecordsUnavailable, "the node record store is unavailable"
	case p.failed != nil:
		return false, causeRecordsFailed, "the node record store failed"
	case p.beats == 0:
		return false, causeRecordsNoHeartbeat, "no heartbeat has reached the node record store yet"
	}
	return true, "", ""
}

// snapshot reads the cluster's records for the API, within
// recordCallTimeout.
func (p *publisher) snapshot(ctx context.Context) (noderecord.Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, recordCallTimeout)
	defer cancel()
	return p.store.Snapshot(ctx, p.cluster)
}

// halt stops the heartbeats, then removes this member's record (an
// orderly leave), and closes the in-process store. The user's store
// stays open: it is theirs, and may be shared.
func (p *publisher) halt(log *slog.Logger) {
	p.cancel()
	p.wg.Wait()
	if p.incarnation != "" {
		ctx, cancel := context.WithTimeout(context.Background(), recordCallTimeout)
		if _, err := p.store.Remove(ctx, p.key(), p.incarnation); err != nil {
			log.Warn("troupe: removing this member's node record failed; its lease drops it", "lease", p.timings.LeaseTTL, "err", err)
		}
		cancel()
	}
	if !p.external {
		p.store.Close()
	}
}
