package system

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/host"
	"github.com/troupe-go/troupe/internal/remote"
	"github.com/troupe-go/troupe/internal/replica"
	"github.com/troupe-go/troupe/internal/replicanode"
	"github.com/troupe-go/troupe/internal/replicastore"
	"github.com/troupe-go/troupe/internal/runtime"
	"github.com/troupe-go/troupe/internal/transport"
	"github.com/troupe-go/troupe/replication"
	"github.com/troupe-go/troupe/ring"
)

// states is a system's host.Store: the replication driver's node, on the
// member's transport endpoint (or, standalone, on a local endpoint that
// never sends), over a store the system owns, so that a member that
// rejoins with a new incarnation opens a new node on the same store.
type states struct {
	store    replicastore.Store
	log      *slog.Logger
	maxValue int
	syncRate int // Config.CatchUpRate
	// replicas computes a key's replica set of n copies (n > 1) in a
	// cluster; nil standalone.
	replicas func(dst []ring.NodeID, typ string, tok uint64, n int) ([]ring.NodeID, error)
	// previous computes the set on the type's ring before its latest
	// change (ok false when there was none); nil standalone.
	previous func(dst []ring.NodeID, typ string, tok uint64, n int) (_ []ring.NodeID, ok bool)
	// gone reports a member the view holds dead or left; nil standalone.
	gone func(ring.NodeID) bool
	// placed reports whether the view places typ/key on this member; nil
	// standalone.
	placed func(typ, key string) bool
	// status returns a member's status in the view (ok false when the
	// view does not hold it); nil standalone.
	status func(ring.NodeID) (cluster.Status, bool)
	// alive lists the members the view holds alive; nil standalone.
	alive func() []ring.NodeID
	// entered reports whether the view shows a member's entry into the
	// rings (remote.Router.Entered), and departed whether it shows a
	// member gone from them for good (remote.Router.Departed); nil
	// standalone.
	entered  func(ring.NodeID) bool
	departed func(ring.NodeID) bool
	// viewNow returns entered and departed over the current view, which
	// later changes do not affect; nil standalone.
	viewNow func() replica.View
	// hosts lists the members the view holds, alive or not (left ones
	// excepted), that host a durable type; nil standalone.
	hosts func() []ring.NodeID
	// viewed is closed once the member joined and its view is in place:
	// only then does an empty view mean that nobody else holds copies.
	// nil: in place already (a rejoin).
	viewed chan struct{}

	// stored lists the types whose keys the ring places with state, and
	// ring returns a type's full ring in the current view; nil
	// standalone.
	stored []storedType
	ring   func(typ string) *ring.Ring

	// stopCatchUp ends the catch-ups of the current node (catchCtx is
	// their context); catching counts them.
	stopCatchUp context.CancelFunc
	catchCtx    context.Context
	catching    sync.WaitGroup
	// handoff tracks the ranges handoffNode, the current node, receives
	// after ring changes (see changed); under mu.
	handoff     *handoffs
	handoffNode *replicanode.Node
	// received counts the bytes of state caught up by the nodes before
	// the current one.
	received int64

	// The copiers and departures of hand-offs whose floors acquisitions
	// may pass (see awaitView), under mu: shown lists the last few
	// copiers the view showed, shownGone the last few departures, unseen
	// when the view was first found not to show each other one, and
	// viewNext is closed at the next change of the view. viewLag, set at
	// start, bounds how long a view may take to show a change.
	shown     []ring.NodeID
	shownGone []ring.NodeID
	unseen    map[viewFact]time.Time
	viewNext  chan struct{}
	viewLag   time.Duration

	mu   sync.Mutex
	node *replicanode.Node // nil between incarnations
	// held lists the keys the runtime acquired and has not resigned;
	// under mu.
	held map[replica.Key]bool

	// tombstoneAge is Config.TombstoneAge; kinds the durable types'
	// storage, by name, for the collector of tombstones.
	tombstoneAge time.Duration
	kinds        map[string]runtime.Storage
	// collected counts the keys the collector collected, for metrics.
	collected atomic.Uint64

	// writes counts the writes and deletes by writeOutcome, for metrics.
	writes [numWriteOutcomes]atomic.Uint64

	// The waker of keys with stored timers (timers.go): timed is store;
	// wakeNow asks for a pass; wakeHost (under mu) is the runtime, nil
	// until it is built.
	timed    *timedStore
	wakeNow  chan struct{}
	wakeHost *host.Host
}

// The outcomes of a write or delete of stored state, as the metrics
// label them (writeOutcomes).
const (
	writeOK      = iota // met its write level
	writeRefused        // over the value limit: nothing written
	writeFailed         // level not met, a newer owner, resigned, closed: it may or may not have happened
	numWriteOutcomes
)

// writeOutcomes are the values of troupe_replication_writes_total's
// outcome label.
var writeOutcomes = [numWriteOutcomes]string{"ok", "refused", "failed"}

// counted counts the outcome of a write that returned err (stateErr's),
// and returns err.
func (s *states) counted(err error) error {
	switch {
	case err == nil:
		s.writes[writeOK].Add(1)
	case errors.Is(err, actor.ErrMessageTooLarge):
		s.writes[writeRefused].Add(1)
	default:
		s.writes[writeFailed].Add(1)
	}
	return err
}

var _ host.Store = (*states)(nil)

// aliveHosts returns a function listing the members r's view holds alive
// that host one of defs' durable types (and so run a replication node).
func aliveHosts(r *remote.Router, defs []actor.Definition) func() []ring.NodeID {
	return durableHosts(r, defs, func(st cluster.Status) bool { return st == cluster.StatusAlive })
}

// anyHosts is aliveHosts for members in any status but left: those that
// may hold copies.
func anyHosts(r *remote.Router, defs []actor.Definition) func() []ring.NodeID {
	return durableHosts(r, defs, func(st cluster.Status) bool { return st != cluster.StatusLeft })
}

// durableHosts lists the members of r's view in a status that holds that
// host one of defs' durable types.
func durableHosts(r *remote.Router, defs []actor.Definition, holds func(cluster.Status) bool) func() []ring.NodeID {
	var names []string
	for _, d := range defs {
		if d != nil && runtime.Durable(d) {
			names = append(names, d.Name())
		}
	}
	return func() []ring.NodeID {
		var ids []ring.NodeID
		for _, m := range r.Members() {
			if holds(m.Status) && slices.ContainsFunc(m.ActorTypes, func(t string) bool { return slices.Contains(names, t) }) {
				ids = append(ids, m.ID)
			}
		}
		return ids
	}
}

// durableTypes reports whether any definition keeps state.
func durableTypes(defs []actor.Definition) bool {
	for _, d := range defs {
		if d != nil && runtime.Durable(d) {
			return true
		}
	}
	return false
}

// openStates opens the store that cfg names (badger under DataDir, or
// memory).
func openStates(cfg Config, log *slog.Logger) (*states, error) {
	s := &states{log: log, maxValue: replicanode.DefaultMaxValue, syncRate: cfg.CatchUpRate,
		tombstoneAge: cfg.withDefaults().TombstoneAge, kinds: make(map[string]runtime.Storage), held: make(map[replica.Key]bool),
		wakeNow: make(chan struct{}, 1)}
	for _, d := range cfg.Actors {
		if d != nil && runtime.Durable(d) {
			s.kinds[d.Name()] = runtime.StorageOf(d)
		}
	}
	if cfg.DataDir == "" {
		s.timed = newTimedStore(replicastore.NewMemory(), cfg.KeptAnswers.WithDefaults().Retain)
		s.store = s.timed
		return s, nil
	}
	b, err := replicastore.Open(cfg.DataDir, replicastore.Options{Sync: cfg.Sync, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("troupe: open the store under DataDir: %w", err)
	}
	s.timed = newTimedStore(b, cfg.KeptAnswers.WithDefaults().Retain)
	s.store = s.timed
	return s, nil
}

// attach opens the node of an incarnation on ep (before ep serves).
//
// A node whose store stopped uncleanly without Sync (or stopped before a
// catch-up ended) starts receiving: its answers do not count until it
// holds what a quorum holds. Standalone, there is nobody to catch up
// from and its store is all there is: it counts at once, and says what
// may be lost. In a cluster it catches up the whole ring from every other
// member alive, in the background, and counts once they all delivered;
// once joined, a member whose view holds no other member hosting a
// durable type (a cluster of one) counts at once, as standalone.
func (s *states) attach(ctx context.Context, ep transport.Endpoint) error {
	n, err := replicanode.Open(ctx, replicanode.Config{Endpoint: ep, Store: s.store, MaxValue: s.maxValue, SyncRate: s.syncRate, Logger: s.log})
	if err != nil {
		return err
	}
	if len(n.Receiving()) > 0 && s.alive == nil {
		s.log.Warn("troupe: the store stopped uncleanly without Sync: the last writes acknowledged before the stop may be lost")
		if err := n.CountEverywhere(); err != nil {
			n.Close(ctx)
			return err
		}
	}
	s.mu.Lock()
	s.node = n
	s.mu.Unlock()
	if len(n.Receiving()) > 0 && s.alive != nil {
		s.goCatchUp(n, func(ctx context.Context) { s.catchUp(ctx, n) }, nil)
	}
	if s.tombstoneAge > 0 {
		s.goCatchUp(n, func(ctx context.Context) { s.collectTombstones(ctx, n) }, nil)
	}
	s.goCatchUp(n, s.wakeTimers, nil)
	return nil
}

// goCatchUp runs f in a goroutine that detaching n waits for, with a
// context cancelled then (and by the function stored in *cancel, if
// cancel is not nil); it runs nothing and reports false when n is no
// longer the current node.
func (s *states) goCatchUp(n *replicanode.Node, f func(ctx context.Context), cancel *context.CancelFunc) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.node != n {
		return false
	}
	if s.stopCatchUp == nil {
		s.catchCtx, s.stopCatchUp = context.WithCancel(context.Background())
	}
	ctx := s.catchCtx
	if cancel != nil {
		ctx, *cancel = context.WithCancel(ctx)
	}
	// Added under mu, where detach clears node before it waits: no
	// goroutine starts once detach waits.
	s.catching.Go(func() { f(ctx) })
	return true
}

// receivingStats returns how many ring ranges the current node still
// receives, and the bytes of state caught up since the system started.
func (s *states) receivingStats() (ranges int, bytes int64) {
	s.mu.Lock()
	n, bytes := s.node, s.received
	h := s.handoff
	if s.handoffNode != n {
		h = nil
	}
	s.mu.Unlock()
	if n != nil {
		ranges = len(n.Receiving())
		bytes += n.ReceivedBytes()
	}
	if h != nil {
		// A hand-off's ranges count from the ring change on, before the
		// node's loop took them.
		h.mu.Lock()
		ranges = max(ranges, len(h.jobs))
		h.mu.Unlock()
	}
	return ranges, bytes
}

// catchUpRetry is the pause between two attempts of a catch-up that
// could not complete (a source unreachable).
const catchUpRetry = time.Second

// catchUp copies the whole ring from every other member alive until one
// attempt completes or ctx ends. All the others, not a quorum of them:
// which members are a key's other replicas depends on the key, and every
// key's are among them. Reading all of them, it needs none caught up
// (replicanode.Node.CatchUpFromAll), so members restarted together catch
// up from each other.
func (s *states) catchUp(ctx context.Context, n *replicanode.Node) {
	s.log.Warn("troupe: the store stopped uncleanly without Sync (or before a catch-up ended): its copies count again once caught up from the other members")
	if s.viewed != nil {
		select {
		case <-s.viewed:
		case <-ctx.Done():
			return
		}
	}
	for attempt := 0; ; attempt++ {
		if s.alone(n.Self()) {
			s.log.Warn("troupe: no other member holds copies: this member's store is all there is, and it counts; the last writes acknowledged before the unclean stop may be lost")
			if err := n.CountEverywhere(); err != nil {
				s.log.Error("troupe: counting this member's copies", "err", err)
			}
			return
		}
		var sources []ring.NodeID
		for _, id := range s.alive() {
			if id != n.Self() {
				sources = append(sources, id)
			}
		}
		if len(sources) > 0 {
			err := n.CatchUpFromAll(ctx, ring.Range{}, sources)
			if err == nil {
				s.log.Info("troupe: caught up from the other members; this member's copies count", "sources", len(sources))
				s.pokeWaker()
				return
			}
			if ctx.Err() != nil {
				return
			}
			if attempt%10 == 0 {
				s.log.Warn("troupe: catching up from the other members", "err", err, "attempt", attempt+1)
			}
		}
		t := time.NewTimer(catchUpRetry)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// alone reports whether the view holds no member but self that hosts a
// durable type, alive or not: nobody else may hold copies.
func (s *states) alone(self ring.NodeID) bool {
	if s.hosts == nil {
		return false
	}
	for _, id := range s.hosts() {
		if id != self {
			return false
		}
	}
	return true
}

// detach closes the current node: what waits on it fails, and the keys it
// served are acquired again by their next activation on the next node.
func (s *states) detach(ctx context.Context) {
	s.mu.Lock()
	n := s.node
	s.node = nil // no catch-up starts from now on (goCatchUp)
	var base int64
	if n != nil {
		base = n.ReceivedBytes()
		s.received += base
	}
	stop := s.stopCatchUp
	s.stopCatchUp, s.catchCtx = nil, nil
	s.mu.Unlock()
	if stop != nil {
		stop()
		s.catching.Wait()
	}
	if n != nil {
		s.mu.Lock()
		s.received += n.ReceivedBytes() - base // what arrived while they ended
		s.mu.Unlock()
		if err := n.Close(ctx); err != nil {
			s.log.Warn("troupe: closing the replication node", "err", err)
		}
	}
}

// close detaches the node and closes the store.
func (s *states) close(ctx context.Context) error {
	s.detach(ctx)
	return s.store.Close()
}

func (s *states) current() (*replicanode.Node, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.node == nil {
		return nil, fmt.Errorf("%w: this member is between incarnations", actor.ErrUnavailable)
	}
	return s.node, nil
}

var stateSlot = replica.Slot{Kind: replica.KindState}

// Acquire implements host.Store.
//
// In a cluster the key is acquired from its set on the type's ring
// before its latest change too (a joint acquisition, see
// docs/replication.md), until the ring changes again: an owner still on
// the old set is fenced and what a quorum of the old set acknowledged is
// adopted, however long after the change the key is next used. (An owner
// whose key's set changed ends its activation at the change, so that it
// acquires the new set jointly too.) A key with one copy moves that way:
// its new owner adopts the copy of the previous one.
func (s *states) Acquire(ctx context.Context, typ, key string, n int, level replication.Level, pinned bool) error {
	// Held by the runtime from here to its Resign: the collector of
	// tombstones leaves the key served when it is done (see
	// collectTombstones).
	s.mu.Lock()
	s.held[replica.Key{Type: typ, ID: key}] = true
	s.mu.Unlock()
	return s.acquire(ctx, typ, key, n, level, pinned)
}

// maxFloorWaits is how many times an acquisition waits for the view to
// show the copier of a floor that refused it before it fails.
const maxFloorWaits = 3

// acquire acquires the key over the sets the view gives it. A floor whose
// copier or departures the acquisition did not name (its view may lag the
// change the copier fenced the range for) makes it wait until the view
// shows the copier entered and the departed members gone, then acquire
// again, naming them, over the sets the view gives then.
func (s *states) acquire(ctx context.Context, typ, key string, n int, level replication.Level, pinned bool) error {
	for waits := 0; ; waits++ {
		copiers, gone := s.named()
		err := s.acquireOnce(ctx, typ, key, n, level, pinned, copiers, gone)
		var stale *replicanode.StaleOwnerError
		if !errors.As(err, &stale) || !stale.Floor || waits == maxFloorWaits {
			return err
		}
		// The changes the floor names that the acquisition did not.
		var missing []viewFact
		for _, x := range append([]ring.NodeID{stale.Newer.Node}, stale.Copiers...) {
			// A copier the floor names departed too passes named gone
			// (below): a view that shows it gone gives sets without it,
			// whether it saw it enter or has forgotten it since.
			if !slices.Contains(copiers, x) && !slices.Contains(stale.Departed, x) {
				missing = append(missing, viewFact{id: x})
			}
		}
		for _, d := range stale.Departed {
			if !slices.Contains(gone, d) {
				missing = append(missing, viewFact{id: d, gone: true})
			}
		}
		if len(missing) == 0 {
			return err
		}
		if s.entered == nil {
			// Standalone over a store a cluster member left behind: no
			// view to wait for, and no set but this member's.
			for _, f := range missing {
				s.noteShown(f)
			}
			continue
		}
		// The lag bound runs for all of them at once, not one after
		// the other.
		now := time.Now()
		for _, f := range missing {
			if !s.shows(f) {
				s.noteUnseen(f, now)
			}
		}
		for _, f := range missing {
			if err := s.awaitView(ctx, f); err != nil {
				return fmt.Errorf("%w: %s/%s: %w", actor.ErrUnavailable, typ, key, err)
			}
		}
	}
}

func (s *states) acquireOnce(ctx context.Context, typ, key string, n int, level replication.Level, pinned bool, copiers, gone []ring.NodeID) error {
	node, err := s.current()
	if err != nil {
		return err
	}
	k := replica.Key{Type: typ, ID: key}
	set := []ring.NodeID{node.Self()}
	opts := replicanode.AcquireOptions{Copiers: copiers, Gone: gone}
	if s.viewNow != nil {
		// Taken before the sets: the view they come from shows at least
		// what it shows.
		opts.View = s.viewNow()
	}
	if pinned || s.replicas == nil {
		return stateErr(node.AcquireWith(ctx, k, set, level, opts))
	}
	tok := uint64(k.Token())
	if n > 1 {
		if set, err = s.replicas(nil, typ, tok, n); err != nil {
			return err
		}
		if !slices.Contains(set, node.Self()) {
			return fmt.Errorf("%w: %s/%s: this member is not one of its replicas %v", actor.ErrUnavailable, typ, key, set)
		}
	}
	// A single copy on a member now dead is out of reach: waiting for it
	// would only hold the key until the ring changes again.
	if prev, ok := s.previous(nil, typ, tok, n); ok && len(prev) > 0 && (n > 1 || !s.gone(prev[0])) {
		opts.Previous = prev
	}
	return stateErr(node.AcquireWith(ctx, k, set, level, opts))
}

// maxShown is how many copiers the view showed acquisitions name: a floor
// outlives the hand-off that raised it, so the last few spare the keys of
// their ranges a refusal each; a floor names up to nine copiers (the last
// and eight earlier ones).
const maxShown = 16

// maxShownGone is how many departures the view showed acquisitions name:
// a floor names up to eight (those of the range's last fences), and
// several ranges' floors name different ones.
const maxShownGone = 16

// maxUnseen bounds the changes awaitView remembers waiting for.
const maxUnseen = 64

// viewFact is a change of the view an acquisition names: a member's entry
// into the rings (a copier), or, with gone set, its departure from them.
type viewFact struct {
	id   ring.NodeID
	gone bool
}

// named returns the copiers and the departures the view showed most
// recently.
func (s *states) named() (copiers, gone []ring.NodeID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shown, s.shownGone
}

// shows reports whether the view shows f: a member's entry into the rings
// or its departure from them for good.
func (s *states) shows(f viewFact) bool {
	if f.gone {
		return s.departed(f.id)
	}
	return s.entered(f.id)
}

// awaitView returns once the view shows f (see shows), or once
// viewLag passed since the view was first found not to: a member that
// entered and was then forgotten (removed before this member heard of
// it, or a floor older than a restart of the whole cluster) is never
// shown, and the view of a live member shows a change within that time.
// It names f in later acquisitions. It fails when ctx ends first.
//
// A floor that names f refused an acquisition whose caller did not name
// it: f's member entered and fenced the key's range for a hand-off, or
// departed and a hand-off fenced the range for its departure, and the
// sets the view gave may be from before it. Acquiring above the floor over
// them could get writes acknowledged there that the copy, read after the
// fence, never saw (docs/replication.md, "Where views disagree").
func (s *states) awaitView(ctx context.Context, f viewFact) error {
	for {
		s.mu.Lock()
		next := s.viewNext
		if next == nil {
			next = make(chan struct{})
			s.viewNext = next
		}
		first, seen := s.unseen[f]
		list := s.shown
		if f.gone {
			list = s.shownGone
		}
		named := slices.Contains(list, f.id)
		s.mu.Unlock()
		if named {
			return nil
		}
		now := time.Now()
		lag := time.Duration(0)
		if seen {
			lag = now.Sub(first)
		}
		if s.shows(f) || lag >= s.viewLag {
			s.noteShown(f)
			return nil
		}
		if !seen {
			s.noteUnseen(f, now)
		}
		t := time.NewTimer(s.viewLag - lag)
		select {
		case <-next:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			if f.gone {
				return fmt.Errorf("its range was fenced by a hand-off for the departure of %v, which this member's view does not show yet: %w", f.id, ctx.Err())
			}
			return fmt.Errorf("its range was fenced by a hand-off to %v, which this member's view does not show yet: %w", f.id, ctx.Err())
		}
		t.Stop()
	}
}

// noteShown puts f first among the copiers or departures acquisitions
// name (the last few used). One named once the lag passed keeps its date
// in unseen: when it has left the list, the next wait for it ends at
// once.
func (s *states) noteShown(f viewFact) {
	s.mu.Lock()
	defer s.mu.Unlock()
	list, most := &s.shown, maxShown
	if f.gone {
		list, most = &s.shownGone, maxShownGone
	}
	if len(*list) > 0 && (*list)[0] == f.id {
		return
	}
	// A new slice: callers hold the previous one.
	shown := make([]ring.NodeID, 0, min(len(*list)+1, most))
	shown = append(shown, f.id)
	for _, id := range *list {
		if id != f.id && len(shown) < most {
			shown = append(shown, id)
		}
	}
	*list = shown
}

// noteUnseen records when the view was first found not to show f.
func (s *states) noteUnseen(f viewFact, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unseen == nil {
		s.unseen = make(map[viewFact]time.Time)
	}
	if _, ok := s.unseen[f]; ok {
		return
	}
	// Bounded: the one noted first goes (its next wait starts over).
	if len(s.unseen) >= maxUnseen {
		var oldest viewFact
		var at0 time.Time
		for g, t := range s.unseen {
			if at0.IsZero() || t.Before(at0) {
				oldest, at0 = g, t
			}
		}
		delete(s.unseen, oldest)
	}
	s.unseen[f] = at
}

// viewChanged notes the members the change brought into the stored types'
// rings and those it took out of them for good (before is the rings
// before it), to be named by every acquisition from then on (as copiers,
// and gone), so that the keys of the ranges they moved pass the floors of
// those hand-offs without a refusal each; and it wakes the acquisitions
// waiting for the view to show a
// copier.
func (s *states) viewChanged(before map[string]*ring.Ring) {
	if s.departed != nil && s.entered != nil && s.ring != nil {
		for typ, r := range before {
			after := s.ring(typ)
			for _, id := range r.Members() {
				if (after == nil || !after.Contains(id)) && s.departed(id) {
					s.noteShown(viewFact{id: id, gone: true})
				}
			}
			if after == nil {
				continue
			}
			for _, id := range after.Members() {
				if (r == nil || !r.Contains(id)) && s.entered(id) {
					s.noteShown(viewFact{id: id})
				}
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.viewNext != nil {
		close(s.viewNext)
		s.viewNext = nil
	}
}

// Read implements host.Store.
func (s *states) Read(ctx context.Context, typ, key string) ([]byte, bool, error) {
	v, ok, _, err := s.read(ctx, typ, key, false)
	return v, ok, err
}

// ReadAll implements host.Store: the records beside the state are the
// key's continuity records, by name.
func (s *states) ReadAll(ctx context.Context, typ, key string) ([]byte, bool, map[string][]byte, error) {
	return s.read(ctx, typ, key, true)
}

func (s *states) read(ctx context.Context, typ, key string, all bool) ([]byte, bool, map[string][]byte, error) {
	node, err := s.current()
	if err != nil {
		return nil, false, nil, err
	}
	recs, err := node.Read(ctx, replica.Key{Type: typ, ID: key})
	if err != nil {
		return nil, false, nil, stateErr(err)
	}
	var aside map[string][]byte
	if all {
		for slot, r := range recs {
			if slot.Kind != replica.KindContinuity || r.Tombstone {
				continue
			}
			if aside == nil {
				aside = make(map[string][]byte)
			}
			aside[slot.Name] = r.Value
		}
	}
	r, ok := recs[stateSlot]
	if !ok || r.Tombstone {
		return nil, false, aside, nil
	}
	return r.Value, true, aside, nil
}

// WriteAside implements host.Store: value goes to the key's continuity
// record name, nil erases it (a tombstone, collected with the key's
// others).
func (s *states) WriteAside(ctx context.Context, typ, key, name string, value []byte) error {
	node, err := s.current()
	if err != nil {
		return s.counted(err)
	}
	k, slot := replica.Key{Type: typ, ID: key}, replica.Slot{Kind: replica.KindContinuity, Name: name}
	if value == nil {
		return s.counted(stateErr(node.Delete(ctx, k, slot)))
	}
	return s.counted(stateErr(node.Write(ctx, k, slot, value)))
}

// Write implements host.Store.
func (s *states) Write(ctx context.Context, typ, key string, value []byte) error {
	node, err := s.current()
	if err != nil {
		return s.counted(err)
	}
	return s.counted(stateErr(node.Write(ctx, replica.Key{Type: typ, ID: key}, stateSlot, value)))
}

// WriteAsync is Write without waiting: done gets what Write would have
// returned (the runtime holds the reply of a state change on it). The
// node keeps value, which the caller must not change after the call.
func (s *states) WriteAsync(typ, key string, value []byte, done func(error)) error {
	node, err := s.current()
	if err != nil {
		return s.counted(err)
	}
	err = stateErr(node.WriteAsync(replica.Key{Type: typ, ID: key}, stateSlot, value, func(err error) { done(s.counted(stateErr(err))) }))
	if err != nil {
		return s.counted(err)
	}
	return nil
}

// Delete implements host.Store.
func (s *states) Delete(ctx context.Context, typ, key string) error {
	node, err := s.current()
	if err != nil {
		return s.counted(err)
	}
	return s.counted(stateErr(node.Delete(ctx, replica.Key{Type: typ, ID: key}, stateSlot)))
}

// Resign implements host.Store.
func (s *states) Resign(typ, key string) {
	s.mu.Lock()
	delete(s.held, replica.Key{Type: typ, ID: key})
	s.mu.Unlock()
	if s.timed != nil {
		// An activation of a key with stored timers ended (passivated,
		// released, failed, moved): unless a message comes, the waker
		// takes it up again when its first timer is due.
		s.timed.ended(replica.Key{Type: typ, ID: key}, time.Now())
	}
	if node, err := s.current(); err == nil {
		_ = node.Resign(replica.Key{Type: typ, ID: key})
	}
}

// Retry implements host.Store: an acquisition lost before anything ran
// on it is made again, up to acquireAttempts times in all, while this
// member's view still places the key here: one a newer epoch refused (a
// hand-off's fence, or another member that acquired the key while views
// disagreed), acquired again above that epoch, or one resigned meanwhile
// (its set changed with the ring). A key placed elsewhere now is left to
// its owner: the message fails, and its sender's next try goes there.
// The driver's randomised backoff comes first, so that two members that
// both think they own the key do not keep fencing each other.
func (s *states) Retry(typ, key string, err error, attempt int) (time.Duration, bool) {
	lost := errors.Is(err, replicanode.ErrStaleOwner) || errors.Is(err, replicanode.ErrResigned) || errors.Is(err, replica.ErrNotServing)
	if attempt >= acquireAttempts || !lost || (s.placed != nil && !s.placed(typ, key)) {
		return 0, false
	}
	node, cerr := s.current()
	if cerr != nil {
		return 0, false
	}
	return node.AcquireBackoff(attempt), true
}

// acquireAttempts bounds the acquisitions of one activation's start.
const acquireAttempts = 4

// MaxValue implements host.Store: the driver's limit, less the key.
func (s *states) MaxValue(typ, key string) int {
	return s.maxValue - len(typ) - len(key)
}

// stateErr maps the driver's errors to the actor API's: a value over the
// limit is ErrMessageTooLarge (nothing was written); every other failure
// (level not met, a newer owner, the key resigned, the node closed) is
// ErrUnavailable, whose write may or may not have happened.
func stateErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, replicanode.ErrValueTooLarge):
		return fmt.Errorf("%w: %w", actor.ErrMessageTooLarge, err)
	case errors.Is(err, actor.ErrUnavailable):
		return err
	}
	return fmt.Errorf("%w: %w", actor.ErrUnavailable, err)
}

// localEndpoint is the endpoint of a standalone system's node: every key's
// only replica is the node itself, whose core answers its own messages,
// so nothing is ever sent.
type localEndpoint struct{ self ring.NodeID }

func newLocalEndpoint() *localEndpoint {
	return &localEndpoint{self: ring.NodeID{Addr: "local", Incarnation: uint64(time.Now().UnixNano())}}
}

func (e *localEndpoint) Self() ring.NodeID                            { return e.self }
func (e *localEndpoint) Handle(transport.StreamID, transport.Handler) {}
func (e *localEndpoint) Release([]byte)                               {}
func (e *localEndpoint) Buffer(n int) []byte                          { return make([]byte, 0, n) }
func (e *localEndpoint) OnPeerEvent(func(transport.PeerEvent))        {}
func (e *localEndpoint) PeerDead(ring.NodeID)                         {}
func (e *localEndpoint) LastHeard(ring.NodeID) (time.Time, bool)      { return time.Time{}, false }
func (e *localEndpoint) Shutdown(context.Context) error               { return nil }
func (e *localEndpoint) Close() error                                 { return nil }
func (e *localEndpoint) Post(ring.NodeID, transport.StreamID, uint64, []byte) error {
	return errLocal
}
func (e *localEndpoint) Send(context.Context, ring.NodeID, transport.StreamID, uint64, []byte) (*transport.Receipt, error) {
	return nil, errLocal
}
func (e *localEndpoint) SendAfter(context.Context, ring.NodeID, transport.StreamID, uint64, uint64, []byte) (*transport.Receipt, error) {
	return nil, errLocal
}
func (e *localEndpoint) SendWait(context.Context, ring.NodeID, transport.StreamID, uint64, []byte) (*transport.Receipt, error) {
	return nil, errLocal
}

// errLocal is what a standalone node's endpoint answers a send with: it
// has no peers.
var errLocal = errors.New("troupe: a standalone system has no peers")
