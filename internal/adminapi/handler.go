package adminapi

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/placement"
	"github.com/troupe-go/troupe/noderecord"
	"github.com/troupe-go/troupe/ring"
)

// Prefix is the path the API serves under.
const Prefix = "/api/v1/"

// Root is Prefix without its slash: mounted too, so that it answers the
// API's JSON 404 rather than a mux's redirect in HTML.
const Root = "/api/v1"

// Options configures the API's handler.
type Options struct {
	// Now returns the current time; nil: time.Now. Tests fix it.
	Now func() time.Time
}

// handler serves /api/v1/ over a Source.
type handler struct {
	src Source
	now func() time.Time
}

// New returns the handler of everything under Prefix. It answers GET and
// HEAD; other methods get 405, unknown paths 404, both as JSON errors.
func New(src Source, o Options) http.Handler {
	h := &handler{src: src, now: o.Now}
	if h.now == nil {
		h.now = time.Now
	}
	return h
}

// endpoint returns the method serving path, nil if none.
func (h *handler) endpoint(path string) func(http.ResponseWriter, *http.Request) {
	switch path {
	case Prefix + "status":
		return h.status
	case Prefix + "members":
		return h.members
	case Prefix + "placement":
		return h.placement
	case Prefix + "placement/where":
		return h.where
	case Prefix + "types":
		return h.types
	case Prefix + "records":
		return h.records
	}
	return nil
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	serve := h.endpoint(r.URL.Path)
	if serve == nil {
		WriteError(w, http.StatusNotFound, CodeNotFound, "no such endpoint; /api/v1 has status, members, records, placement, placement/where and types")
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		WriteError(w, http.StatusMethodNotAllowed, CodeMethodNotAllowed, "the API is read-only: GET and HEAD only")
		return
	}
	if r.Method == http.MethodHead {
		w = bodyless{w}
	}
	serve(w, r)
}

// bodyless answers HEAD: the headers of GET, Content-Length included,
// without the body.
type bodyless struct{ http.ResponseWriter }

func (b bodyless) Write(p []byte) (int, error) { return len(p), nil }

// WriteError writes an error response: status, and a body with code and
// msg. msg must not hold a secret or a key.
func WriteError(w http.ResponseWriter, status int, code, msg string) {
	writeError(w, status, ErrorBody{Code: code, Message: msg})
}

func writeError(w http.ResponseWriter, status int, e ErrorBody) {
	b, _ := json.Marshal(ErrorResponse{Error: e})
	write(w, status, append(b, '\n'))
}

// write sends a JSON body whole, its length declared.
func write(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func writeParamError(w http.ResponseWriter, e *paramError) {
	WriteError(w, http.StatusBadRequest, e.code, e.msg)
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		WriteError(w, http.StatusInternalServerError, CodeInternal, "the response could not be encoded")
		return
	}
	write(w, http.StatusOK, append(b, '\n'))
}

// snapshot is one request's reading of the source.
type snapshot struct {
	now       time.Time
	view      View
	clustered bool
	current   []cluster.Member
	status    map[ring.NodeID]string // by identity, every record
}

func (h *handler) snapshot() *snapshot {
	v, clustered := h.src.View()
	s := &snapshot{now: h.now().UTC(), view: v, clustered: clustered,
		current: current(v.Records), status: make(map[ring.NodeID]string, len(v.Records))}
	for _, m := range v.Records {
		s.status[m.ID] = statusOf(m)
	}
	return s
}

func (s *snapshot) meta() Meta {
	mode := ModeStandalone
	if s.clustered {
		mode = ModeCluster
	}
	return Meta{SchemaVersion: SchemaVersion, GeneratedAt: s.now.Format(time.RFC3339Nano),
		Revision: revision(s.view.Records), Mode: mode}
}

func (s *snapshot) statusOf(id ring.NodeID) string {
	if st, ok := s.status[id]; ok {
		return st
	}
	return "unknown"
}

// placementVersion is "" while the member has not joined: the digest of
// an empty view would look like a version and equal that of every other
// member not joined yet.
func (s *snapshot) placementVersion() string {
	if !s.clustered {
		return StandaloneVersion
	}
	if !s.hasView() {
		return ""
	}
	return placement.Version(s.view.Rings, func(id ring.NodeID) bool { return serves(s.statusOf(id)) })
}

// hasView reports whether a member's view holds anything yet.
func (s *snapshot) hasView() bool { return !s.clustered || len(s.view.Records) > 0 }

// joined reports whether a member's view holds anything yet; before,
// the member answers 503 rather than an empty cluster.
func (s *snapshot) joined(w http.ResponseWriter) bool {
	if !s.hasView() {
		WriteError(w, http.StatusServiceUnavailable, CodeUnavailable, "this member has no membership view yet: it is joining")
		return false
	}
	return true
}

func (h *handler) status(w http.ResponseWriter, r *http.Request) {
	if _, perr := query(r.URL.RawQuery); perr != nil {
		writeParamError(w, perr)
		return
	}
	n := h.src.Node()
	ready, checks := h.src.Readiness()
	s := h.snapshot()
	self := s.view.Self
	resp := StatusResponse{Meta: s.meta(), PlacementVersion: s.placementVersion(),
		Member: NodeStatus{
			Address: n.Addr, Incarnation: self.Incarnation,
			StartTime:     n.Started.UTC().Format(time.RFC3339Nano),
			UptimeSeconds: math.Round(s.now.Sub(n.Started).Seconds()*1000) / 1000,
			BuildVersion:  n.BuildVersion, GoVersion: goruntime.Version(),
		},
		Readiness: Readiness{Ready: ready, Checks: make([]ReadinessCheck, 0, len(checks))},
		Cluster:   ClusterSummary{MembersByStatus: make(map[string]int, len(statuses))},
	}
	if self.Incarnation != 0 { // a member's first incarnation may not have started yet
		resp.Member.NodeID = self.String()
	}
	for _, c := range checks {
		resp.Readiness.Checks = append(resp.Readiness.Checks, ReadinessCheck{Name: c.Name, OK: c.OK, Cause: c.Cause, Reason: c.Reason})
	}
	for _, st := range statuses {
		resp.Cluster.MembersByStatus[st] = 0
	}
	for _, m := range s.current {
		resp.Cluster.MembersByStatus[statusOf(m)]++
	}
	resp.Cluster.Members = len(s.current)
	writeJSON(w, resp)
}

func (h *handler) members(w http.ResponseWriter, r *http.Request) {
	mq, perr := parseMembersQuery(r.URL.RawQuery)
	if perr != nil {
		writeParamError(w, perr)
		return
	}
	s := h.snapshot()
	if !s.joined(w) {
		return
	}
	role := h.src.Node().Role
	var labels map[string]map[string]string // by address: the members' records' labels
	if len(mq.labels) > 0 && s.clustered {
		var ok bool
		if labels, ok = h.memberLabels(w, r, role); !ok {
			return
		}
	}
	self := s.view.Self
	resp := MembersResponse{Meta: s.meta(), Members: []Member{}}
	for _, m := range s.current { // by address
		st := statusOf(m)
		if len(mq.statuses) > 0 && !slices.Contains(mq.statuses, st) {
			continue
		}
		if mq.typ != "" && !slices.Contains(m.ActorTypes, mq.typ) {
			continue
		}
		if mq.role != "" && mq.role != role {
			continue
		}
		if !hasLabels(labels[m.ID.Addr], mq.labels) {
			continue
		}
		resp.Total++
		if mq.after != "" && m.ID.Addr <= mq.after {
			continue // on an earlier page
		}
		if len(resp.Members) == mq.limit {
			resp.Next = encodeCursor(resp.Members[len(resp.Members)-1].Address)
			continue
		}
		resp.Members = append(resp.Members, Member{NodeID: m.ID.String(), Address: m.ID.Addr, Incarnation: m.ID.Incarnation,
			Status: st, ActorTypes: append([]string{}, m.ActorTypes...), Role: role, Self: m.ID == self})
	}
	writeJSON(w, resp)
}

// memberLabels reads the node records for /members' label filters and
// returns the labels of the members' records (those of role), by node.
// A store that cannot give a snapshot fails the request closed, as
// /records does: a filter answered without the labels would be wrong.
func (h *handler) memberLabels(w http.ResponseWriter, r *http.Request, role string) (map[string]map[string]string, bool) {
	rs, ok, err := h.src.Records(r.Context())
	if !ok {
		return nil, true
	}
	if err != nil {
		writeRecordsError(w, err)
		return nil, false
	}
	labels := make(map[string]map[string]string)
	for _, rec := range rs.Snapshot.Records {
		if rec.Role == role {
			labels[rec.Node] = rec.Labels
		}
	}
	return labels, true
}

// hasLabels reports whether have holds every label of want.
func hasLabels(have map[string]string, want []label) bool {
	for _, l := range want {
		if v, ok := have[l.key]; !ok || v != l.value {
			return false
		}
	}
	return true
}

// writeRecordsError answers 503 for a record store that could not give a
// snapshot. Its error may name the store's endpoints: not repeated.
func writeRecordsError(w http.ResponseWriter, err error) {
	msg := "the node record store failed to give a snapshot"
	switch {
	case errors.Is(err, noderecord.ErrTimeout):
		msg = "the node record store did not give a snapshot in time"
	case errors.Is(err, noderecord.ErrUnavailable):
		msg = "the node record store is unavailable"
	}
	WriteError(w, http.StatusServiceUnavailable, CodeRecordsUnavailable, msg)
}

// hosted returns the definitions of the types this member hosts, by
// name.
func (h *handler) hosted() map[string]Definition {
	ds := h.src.Definitions()
	m := make(map[string]Definition, len(ds))
	for _, d := range ds {
		m[d.Name] = d
	}
	return m
}

func (h *handler) placement(w http.ResponseWriter, r *http.Request) {
	if _, perr := query(r.URL.RawQuery); perr != nil {
		writeParamError(w, perr)
		return
	}
	s := h.snapshot()
	if !s.joined(w) {
		return
	}
	hosted := h.hosted()
	resp := PlacementResponse{Meta: s.meta(), PlacementVersion: s.placementVersion(), Types: []PlacementType{}}
	if s.clustered {
		// Types hosted by the same members share a ring: its shares
		// are computed once.
		shared := make(map[*ring.Ring][]ring.Share, len(s.view.Rings))
		for _, typ := range sortedKeys(s.view.Rings) {
			rg := s.view.Rings[typ]
			pt := PlacementType{Name: typ, RingVersion: rg.Version().String(), Members: make([]RingMember, 0, rg.Len())}
			if t, ok := hosted[typ]; ok {
				pt.Replicas = max(t.Replicas, 1)
			}
			shares, ok := shared[rg]
			if !ok {
				shares = rg.Shares()
				shared[rg] = shares
			}
			for _, sh := range shares {
				pt.Members = append(pt.Members, RingMember{Address: sh.Node.Addr, Incarnation: sh.Node.Incarnation,
					Status: s.statusOf(sh.Node), ShareRatio: sh.Ratio})
			}
			slices.SortFunc(pt.Members, func(a, b RingMember) int {
				return cmp.Or(cmp.Compare(a.Address, b.Address), cmp.Compare(a.Incarnation, b.Incarnation))
			})
			resp.Types = append(resp.Types, pt)
		}
	}
	writeJSON(w, resp)
}

func (h *handler) where(w http.ResponseWriter, r *http.Request) {
	q, perr := query(r.URL.RawQuery, "type", "key")
	if perr != nil {
		writeParamError(w, perr)
		return
	}
	typ, perr := single(q, "type")
	if perr != nil {
		writeParamError(w, perr)
		return
	}
	key, perr := single(q, "key")
	if perr != nil {
		// The message names the parameter only: a key is not repeated.
		writeParamError(w, perr)
		return
	}
	if typ == "" || key == "" {
		WriteError(w, http.StatusBadRequest, CodeMissingParameter, "where needs a type and a key: ?type=T&key=K")
		return
	}
	s := h.snapshot()
	if !s.joined(w) {
		return
	}
	t, isHosted := h.hosted()[typ]
	resp := WhereResponse{Meta: s.meta(), PlacementVersion: s.placementVersion(), Type: typ, Key: key, Replicas: []Replica{}}
	if !s.clustered {
		if !isHosted {
			WriteError(w, http.StatusNotFound, CodeUnknownType, fmt.Sprintf("this system hosts no actor type %q", clip(typ)))
			return
		}
		writeJSON(w, resp) // standalone: every key lives here
		return
	}
	if !isHosted {
		// How a type places its keys (replicas, pinned) is in its
		// definition, which only the members hosting it have: guessing
		// would answer with a placement the router does not use.
		if hosts := s.hosts(typ); len(hosts) > 0 || s.view.Rings[typ] != nil {
			writeError(w, http.StatusConflict, ErrorBody{Code: CodeTypeNotHostedHere, Hosts: hosts,
				Message: fmt.Sprintf("this member does not host actor type %q: ask a member that hosts it", clip(typ))})
			return
		}
		WriteError(w, http.StatusNotFound, CodeUnknownType, fmt.Sprintf("no member hosts actor type %q", clip(typ)))
		return
	}
	if t.Pinned {
		s.wherePinned(w, &resp)
		return
	}
	rg := s.view.Rings[typ]
	if rg == nil {
		WriteError(w, http.StatusNotFound, CodeUnknownType, fmt.Sprintf("no member hosts actor type %q", clip(typ)))
		return
	}
	tok := ring.KeyToken(typ, key)
	resp.KeyToken = fmt.Sprintf("%016x", uint64(tok))
	n := max(t.Replicas, 1)
	for _, id := range rg.AppendReplicas(nil, tok, n) {
		resp.Replicas = append(resp.Replicas, Replica{Address: id.Addr, Incarnation: id.Incarnation, Status: s.statusOf(id)})
	}
	// The owner walks on past the replicas of a type without copies,
	// as the router does: any member can serve its keys.
	walk := rg.Len()
	if n > 1 {
		walk = n
	}
	if id, err := rg.Owner(tok, walk, func(id ring.NodeID) bool { return serves(s.statusOf(id)) }); err == nil {
		resp.Owner = id.Addr
		if id == s.view.Self && !s.view.Owning {
			resp.OwnerRefuses = RefusesNoMajority
		}
	}
	writeJSON(w, resp)
}

// wherePinned answers where for a key of a pinned type, which names its
// member: "address/rest". The owner is chosen as the router chooses it
// (internal/remote's view.dest): this member for its own address, else
// the newest process at the address that is neither left, leaving nor
// joining, if it serves.
func (s *snapshot) wherePinned(w http.ResponseWriter, resp *WhereResponse) {
	addr, _, ok := strings.Cut(resp.Key, "/")
	if !ok || addr == "" {
		// The router refuses such a key (ErrInvalidRef); the message
		// does not repeat it.
		WriteError(w, http.StatusBadRequest, CodeBadParameter, fmt.Sprintf("a key of the pinned actor type %q names its member: address/rest", clip(resp.Type)))
		return
	}
	if self := s.view.Self; addr == self.Addr {
		resp.Replicas = append(resp.Replicas, Replica{Address: addr, Incarnation: self.Incarnation, Status: s.statusOf(self)})
		resp.Owner = addr
		writeJSON(w, resp)
		return
	}
	if id, ok := pinnedAt(s.view.Records, addr); ok {
		st := s.statusOf(id)
		resp.Replicas = append(resp.Replicas, Replica{Address: addr, Incarnation: id.Incarnation, Status: st})
		if serves(st) {
			resp.Owner = addr
		}
	} else if i, ok := slices.BinarySearchFunc(s.current, addr, func(m cluster.Member, a string) int { return cmp.Compare(m.ID.Addr, a) }); ok {
		m := s.current[i] // there, but leaving or joining: no owner
		resp.Replicas = append(resp.Replicas, Replica{Address: addr, Incarnation: m.ID.Incarnation, Status: statusOf(m)})
	}
	writeJSON(w, resp)
}

// hosts returns the addresses of the current members that host typ and
// serve, by address.
func (s *snapshot) hosts(typ string) []string {
	var out []string
	for _, m := range s.current {
		if serves(statusOf(m)) && slices.Contains(m.ActorTypes, typ) {
			out = append(out, m.ID.Addr)
		}
	}
	return out
}

func (h *handler) types(w http.ResponseWriter, r *http.Request) {
	if _, perr := query(r.URL.RawQuery); perr != nil {
		writeParamError(w, perr)
		return
	}
	s := h.snapshot()
	counts := make(map[string]Count)
	for _, c := range h.src.Counts() {
		counts[c.Name] = c
	}
	ds := slices.Clone(h.src.Definitions())
	slices.SortFunc(ds, func(a, b Definition) int { return cmp.Compare(a.Name, b.Name) })
	resp := TypesResponse{Meta: s.meta(), Types: make([]TypeInfo, 0, len(ds))}
	for _, d := range ds {
		c := counts[d.Name]
		resp.Types = append(resp.Types, TypeInfo{Name: d.Name, Activations: c.Activations, QueuedMessages: c.Queued,
			Replicas: max(d.Replicas, 1), Pinned: d.Pinned, RingMembers: s.view.Rings[d.Name].Len()})
	}
	writeJSON(w, resp)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func (h *handler) records(w http.ResponseWriter, r *http.Request) {
	if _, perr := query(r.URL.RawQuery); perr != nil {
		writeParamError(w, perr)
		return
	}
	rs, ok, err := h.src.Records(r.Context())
	if !ok {
		WriteError(w, http.StatusNotFound, CodeNotFound, "a standalone system publishes no node records")
		return
	}
	if err != nil {
		writeRecordsError(w, err)
		return
	}
	snap, t := rs.Snapshot, rs.Timings.WithDefaults()
	resp := RecordsResponse{
		Meta: Meta{SchemaVersion: SchemaVersion, GeneratedAt: h.now().UTC().Format(time.RFC3339Nano),
			Revision: string(snap.Revision), Mode: ModeCluster},
		Store: StoreExternal, SnapshotAt: snap.At.UTC().Format(time.RFC3339Nano),
		HeartbeatMs: t.Heartbeat.Milliseconds(), UnhealthyAfterMs: t.UnhealthyAfter.Milliseconds(), LeaseTTLMs: t.LeaseTTL.Milliseconds(),
		Records: make([]NodeRecord, 0, len(snap.Records)), Unreadable: snap.Unreadable,
	}
	if rs.Derived {
		resp.Store = StoreMembership
	}
	for _, rec := range snap.Records {
		nr := NodeRecord{Cluster: rec.Cluster, Role: rec.Role, Node: rec.Node, Incarnation: rec.Incarnation,
			DataAddr: rec.DataAddr, AdminAddr: rec.AdminAddr, BuildVersion: rec.BuildVersion, Seq: rec.Seq,
			ObservedAt: rec.Observed.UTC().Format(time.RFC3339Nano), HeartbeatAgeMs: max(snap.At.Sub(rec.Observed).Milliseconds(), 0),
			Health: t.Health(rec, snap.At).String(), ReportedHealth: rec.Health.String(), Ready: rec.Ready,
			Counters: RecordCounters{Messages: rec.Counters.Messages, Errors: rec.Counters.Errors, Activations: rec.Counters.Activations,
				Bytes: rec.Counters.Bytes, ReplicationLagMs: rec.Counters.ReplicationLag.Milliseconds()},
			Labels: rec.Labels, Self: rec.Key() == rs.Self, Source: SourcePublished}
		if !rec.Started.IsZero() {
			nr.StartTime = rec.Started.UTC().Format(time.RFC3339Nano)
		}
		if rs.Derived && !nr.Self {
			nr.Source = SourceMembership
		}
		resp.Records = append(resp.Records, nr)
	}
	writeJSON(w, resp)
}
