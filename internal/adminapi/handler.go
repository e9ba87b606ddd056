package adminapi

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	goruntime "runtime"
	"slices"
	"strings"
	"time"

	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/ring"
)

// Prefix is the path the API serves under.
const Prefix = "/api/v1/"

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
	}
	return nil
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	serve := h.endpoint(r.URL.Path)
	if serve == nil {
		WriteError(w, http.StatusNotFound, CodeNotFound, "no such endpoint; /api/v1 has status, members, placement, placement/where and types")
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		WriteError(w, http.StatusMethodNotAllowed, CodeMethodNotAllowed, "the API is read-only: GET and HEAD only")
		return
	}
	serve(w, r)
}

// WriteError writes an error response: status, and a body with code and
// msg. msg must not hold a secret or a key.
func WriteError(w http.ResponseWriter, status int, code, msg string) {
	b, _ := json.Marshal(ErrorResponse{Error: ErrorBody{Code: code, Message: msg}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
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
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(append(b, '\n'))
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

func (s *snapshot) placementVersion() string {
	if !s.clustered {
		return StandaloneVersion
	}
	return placementVersion(s.view.Rings, s.statusOf)
}

// joined reports whether a member's view holds anything yet; before,
// the member answers 503 rather than an empty cluster.
func (s *snapshot) joined(w http.ResponseWriter) bool {
	if s.clustered && len(s.view.Records) == 0 {
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
	s := h.snapshot()
	resp := StatusResponse{Meta: s.meta(), PlacementVersion: s.placementVersion(),
		Member: NodeStatus{
			Address: n.ID.Addr, Incarnation: n.ID.Incarnation,
			StartTime:     n.Started.UTC().Format(time.RFC3339Nano),
			UptimeSeconds: math.Round(s.now.Sub(n.Started).Seconds()*1000) / 1000,
			BuildVersion:  n.BuildVersion, GoVersion: goruntime.Version(),
		},
		Readiness: Readiness{Ready: n.Ready, Checks: make([]ReadinessCheck, 0, len(n.Checks))},
		Cluster:   ClusterSummary{MembersByStatus: make(map[string]int, len(statuses))},
	}
	if n.ID.Incarnation != 0 { // a member's first incarnation may not have started yet
		resp.Member.NodeID = n.ID.String()
	}
	for _, c := range n.Checks {
		resp.Readiness.Checks = append(resp.Readiness.Checks, ReadinessCheck{Name: c.Name, OK: c.OK, Reason: c.Reason})
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
	self := h.src.Node().ID
	resp := MembersResponse{Meta: s.meta(), Members: []Member{}}
	for _, m := range s.current { // by address
		st := statusOf(m)
		if len(mq.statuses) > 0 && !slices.Contains(mq.statuses, st) {
			continue
		}
		if mq.typ != "" && !slices.Contains(m.ActorTypes, mq.typ) {
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
			Status: st, ActorTypes: append([]string{}, m.ActorTypes...), Self: m.ID == self})
	}
	writeJSON(w, resp)
}

// hosted returns the types this member hosts, by name.
func (h *handler) hosted() map[string]Type {
	ts := h.src.Types()
	m := make(map[string]Type, len(ts))
	for _, t := range ts {
		m[t.Name] = t
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
		for _, typ := range sortedKeys(s.view.Rings) {
			rg := s.view.Rings[typ]
			pt := PlacementType{Name: typ, RingVersion: rg.Version().String(), Members: make([]RingMember, 0, rg.Len())}
			if t, ok := hosted[typ]; ok {
				pt.Replicas = max(t.Replicas, 1)
			}
			shares := rg.Shares()
			for i, m := range rg.Members() {
				pt.Members = append(pt.Members, RingMember{Address: m.Addr, Incarnation: m.Incarnation,
					Status: s.statusOf(m), ShareRatio: shares[i]})
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
	hosted := h.hosted()
	t, isHosted := hosted[typ]
	resp := WhereResponse{Meta: s.meta(), PlacementVersion: s.placementVersion(), Type: typ, Key: key, Replicas: []Replica{}}
	if !s.clustered {
		if !isHosted {
			WriteError(w, http.StatusNotFound, CodeUnknownType, fmt.Sprintf("this system hosts no actor type %q", clip(typ)))
			return
		}
		writeJSON(w, resp) // standalone: every key lives here
		return
	}
	rg := s.view.Rings[typ]
	if rg == nil {
		WriteError(w, http.StatusNotFound, CodeUnknownType, fmt.Sprintf("no member hosts actor type %q", clip(typ)))
		return
	}
	if isHosted && t.Pinned {
		// A pinned key names its member: "address/rest".
		addr, _, _ := strings.Cut(key, "/")
		for _, m := range s.current {
			if m.ID.Addr == addr && addr != "" {
				resp.Replicas = append(resp.Replicas, Replica{Address: addr, Incarnation: m.ID.Incarnation, Status: statusOf(m)})
				if serves(statusOf(m)) {
					resp.Owner = addr
				}
			}
		}
		writeJSON(w, resp)
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
	}
	writeJSON(w, resp)
}

func (h *handler) types(w http.ResponseWriter, r *http.Request) {
	if _, perr := query(r.URL.RawQuery); perr != nil {
		writeParamError(w, perr)
		return
	}
	s := h.snapshot()
	ts := h.src.Types()
	slices.SortFunc(ts, func(a, b Type) int { return cmp.Compare(a.Name, b.Name) })
	resp := TypesResponse{Meta: s.meta(), Types: make([]TypeInfo, 0, len(ts))}
	for _, t := range ts {
		resp.Types = append(resp.Types, TypeInfo{Name: t.Name, Activations: t.Activations, QueuedMessages: t.Queued,
			Replicas: max(t.Replicas, 1), Pinned: t.Pinned, RingMembers: s.view.Rings[t.Name].Len()})
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
