package adminapi

// SchemaVersion is the schema_version of every response of /api/v1.
const SchemaVersion = 1

// Modes: whether the process is a cluster member or a standalone system.
const (
	ModeCluster    = "cluster"
	ModeStandalone = "standalone"
)

// StandaloneVersion is the placement_version of a standalone system,
// which places nothing: every key of a hosted type lives in it.
const StandaloneVersion = "standalone"

// Meta is what every successful response starts with.
type Meta struct {
	SchemaVersion int `json:"schema_version"`
	// GeneratedAt is when the response was built, RFC 3339 in UTC.
	GeneratedAt string `json:"generated_at"`
	// Revision identifies the membership view the response was built
	// from; compare for equality only.
	Revision string `json:"revision"`
	// Mode is ModeCluster or ModeStandalone.
	Mode string `json:"mode"`
}

// StatusResponse is GET /api/v1/status.
type StatusResponse struct {
	Meta
	Member    NodeStatus     `json:"member"`
	Readiness Readiness      `json:"readiness"`
	Cluster   ClusterSummary `json:"cluster"`
	// PlacementVersion changes when where a key lives could change;
	// compare for equality only.
	// It is "" while a member has not joined.
	PlacementVersion string `json:"placement_version"`
}

// NodeStatus describes the member answering.
type NodeStatus struct {
	// NodeID is "address#incarnation" (empty for a standalone system).
	NodeID  string `json:"node_id,omitempty"`
	Address string `json:"address,omitempty"`
	// Incarnation is a decimal string: 64 bits, beyond the integers a
	// JSON number keeps exactly in many clients.
	Incarnation   uint64  `json:"incarnation,omitempty,string"`
	StartTime     string  `json:"start_time"`
	UptimeSeconds float64 `json:"uptime_seconds"`
	BuildVersion  string  `json:"build_version"`
	GoVersion     string  `json:"go_version"`
}

// Readiness is the member's readiness, as /readyz reports it.
type Readiness struct {
	Ready  bool             `json:"ready"`
	Checks []ReadinessCheck `json:"checks"`
}

// ReadinessCheck is one readiness check.
type ReadinessCheck struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	// Cause is why the check fails, as a stable code (docs/operations.md
	// lists them); omitted when it passes.
	Cause  string `json:"cause,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// ClusterSummary counts the current members (one per address) by status.
type ClusterSummary struct {
	Members int `json:"members"`
	// MembersByStatus holds every status (alive, suspect, dead, leaving,
	// joining), zero included.
	MembersByStatus map[string]int `json:"members_by_status"`
}

// MembersResponse is GET /api/v1/members.
type MembersResponse struct {
	Meta
	// Members is one page, ordered by address.
	Members []Member `json:"members"`
	// Total counts the members that match the filters, on every page.
	Total int `json:"total"`
	// Next, when set, is the after cursor of the next page.
	Next string `json:"next,omitempty"`
}

// Member is one member of the view: the newest process at its address.
type Member struct {
	NodeID      string   `json:"node_id"`
	Address     string   `json:"address"`
	Incarnation uint64   `json:"incarnation,string"`
	Status      string   `json:"status"`
	ActorTypes  []string `json:"actor_types"`
	// Role is the role of its node record: every member of the view
	// has the members' role ("member").
	Role string `json:"role"`
	// Self is set on the member answering.
	Self bool `json:"self"`
}

// PlacementResponse is GET /api/v1/placement.
type PlacementResponse struct {
	Meta
	PlacementVersion string `json:"placement_version"`
	// Types are the actor types some member hosts, by name.
	Types []PlacementType `json:"types"`
}

// PlacementType is one actor type's ring.
type PlacementType struct {
	Name string `json:"name"`
	// Replicas is how many copies of each key's state the type keeps;
	// omitted when this member does not host the type (its definition,
	// which sets the count, lives on the members that do).
	Replicas int `json:"replicas,omitempty"`
	// RingVersion identifies the ring's member set; equality only.
	RingVersion string `json:"ring_version"`
	// Members are the ring's members by address, dead ones included.
	Members []RingMember `json:"members"`
}

// RingMember is a member's part of a ring.
type RingMember struct {
	Address     string `json:"address"`
	Incarnation uint64 `json:"incarnation,string"`
	Status      string `json:"status"`
	// ShareRatio is the fraction of the ring (0 to 1) it is primary
	// for; a type's shares sum to 1.
	ShareRatio float64 `json:"share_ratio"`
}

// WhereResponse is GET /api/v1/placement/where.
type WhereResponse struct {
	Meta
	PlacementVersion string `json:"placement_version"`
	Type             string `json:"type"`
	Key              string `json:"key"`
	// KeyToken is the key's position on the ring, in hexadecimal.
	KeyToken string `json:"key_token,omitempty"`
	// Replicas are the key's replicas in ring order: the first is its
	// primary, which owns it while it serves.
	Replicas []Replica `json:"replicas"`
	// Owner is the address of the member that serves the key now: the
	// primary, or the next live member when the primary is dead. Empty
	// when no member can serve it, and in standalone mode.
	Owner string `json:"owner"`
	// OwnerRefuses, when set, says why the owner refuses the key now
	// although the ring gives it: RefusesNoMajority. Only the owner
	// itself knows this, so only its own answer carries it.
	OwnerRefuses string `json:"owner_refuses,omitempty"`
}

// RefusesNoMajority is OwnerRefuses when the owner, the member
// answering, lost the majority of the cluster: its router refuses the
// keys the ring gives it until it regains it.
const RefusesNoMajority = "no_majority"

// Replica is one replica of a key.
type Replica struct {
	Address     string `json:"address"`
	Incarnation uint64 `json:"incarnation,string"`
	Status      string `json:"status"`
}

// TypesResponse is GET /api/v1/types.
type TypesResponse struct {
	Meta
	// Types are the actor types this member hosts, by name.
	Types []TypeInfo `json:"types"`
}

// TypeInfo is an actor type this member hosts.
type TypeInfo struct {
	Name           string `json:"name"`
	Activations    int    `json:"activations"`
	QueuedMessages int    `json:"queued_messages"`
	Replicas       int    `json:"replicas"`
	Pinned         bool   `json:"pinned"`
	// RingMembers counts the members of the type's ring (0 in
	// standalone mode).
	RingMembers int `json:"ring_members"`
}

// RecordsResponse is GET /api/v1/records: the node records of the
// cluster, as the record store holds them. Its Revision is the store's
// snapshot revision (not the membership view's, as elsewhere); compare
// for equality only.
type RecordsResponse struct {
	Meta
	// Store is StoreMembership (each member's in-process store: its own
	// record, and the others' derived from its view) or StoreExternal (a
	// store every member shares).
	Store string `json:"store"`
	// SnapshotAt is when the store read the snapshot, RFC 3339 in UTC:
	// what heartbeat ages are measured against.
	SnapshotAt string `json:"snapshot_at"`
	// The records' timings, in milliseconds.
	HeartbeatMs      int64 `json:"heartbeat_ms"`
	UnhealthyAfterMs int64 `json:"unhealthy_after_ms"`
	LeaseTTLMs       int64 `json:"lease_ttl_ms"`
	// Records are ordered by role, then node.
	Records []NodeRecord `json:"records"`
	// Unreadable counts the records this binary cannot read (a newer
	// format), left out of Records.
	Unreadable int `json:"unreadable"`
}

// The values of RecordsResponse.Store.
const (
	StoreMembership = "membership"
	StoreExternal   = "external"
)

// The values of NodeRecord.Source.
const (
	// SourcePublished: the process put the record itself.
	SourcePublished = "published"
	// SourceMembership: the answering member derived it from its
	// membership view: address, incarnation, health and readiness from
	// the member's status; no counters, no admin address or version.
	SourceMembership = "membership"
)

// NodeRecord is one process's node record (docs/records.md).
type NodeRecord struct {
	Cluster string `json:"cluster"`
	Role    string `json:"role"`
	Node    string `json:"node"`
	// Incarnation is the process's incarnation, as published (a decimal
	// string for a member).
	Incarnation  string `json:"incarnation"`
	DataAddr     string `json:"data_addr,omitempty"`
	AdminAddr    string `json:"admin_addr,omitempty"`
	BuildVersion string `json:"build_version,omitempty"`
	// StartTime is RFC 3339 in UTC; omitted when unknown.
	StartTime string `json:"start_time,omitempty"`
	// Seq is the heartbeat sequence of the incarnation.
	Seq uint64 `json:"seq"`
	// ObservedAt is when the store accepted the record, RFC 3339 in UTC;
	// HeartbeatAgeMs is the snapshot's time since then.
	ObservedAt     string `json:"observed_at"`
	HeartbeatAgeMs int64  `json:"heartbeat_age_ms"`
	// Health is as read: unhealthy once the record went unhealthy_after_ms
	// without an update, else ReportedHealth, what the record says.
	Health         string            `json:"health"`
	ReportedHealth string            `json:"reported_health"`
	Ready          bool              `json:"ready"`
	Counters       RecordCounters    `json:"counters"`
	Labels         map[string]string `json:"labels,omitempty"`
	// Self is set on the answering member's own record.
	Self bool `json:"self"`
	// Source is SourcePublished or SourceMembership.
	Source string `json:"source"`
}

// RecordCounters are a record's counters, cumulative since its start.
type RecordCounters struct {
	Messages         uint64 `json:"messages"`
	Errors           uint64 `json:"errors"`
	Activations      uint64 `json:"activations"`
	Bytes            uint64 `json:"bytes"`
	ReplicationLagMs int64  `json:"replication_lag_ms"`
}

// ErrorResponse is the body of every error.
type ErrorResponse struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody says what went wrong: Code for programs, Message for people.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Hosts, with CodeTypeNotHostedHere, are the addresses of the
	// members that host the type and serve, by address.
	Hosts []string `json:"hosts,omitempty"`
}

// The error codes: stable within v1 (new ones may be added).
const (
	// CodeBadParameter (400): a query parameter is malformed, out of
	// range, repeated, or unknown to the endpoint.
	CodeBadParameter = "bad_parameter"
	// CodeMissingParameter (400): a required parameter is absent.
	CodeMissingParameter = "missing_parameter"
	// CodeUnauthorized (401): the bearer token is missing or wrong.
	CodeUnauthorized = "unauthorized"
	// CodeNotFound (404): no such endpoint.
	CodeNotFound = "not_found"
	// CodeUnknownType (404): no member hosts the actor type.
	CodeUnknownType = "unknown_type"
	// CodeTypeNotHostedHere (409): where was asked of a member that does
	// not host the type; ask one of the error's hosts.
	CodeTypeNotHostedHere = "type_not_hosted_here"
	// CodeMethodNotAllowed (405): only GET and HEAD are served.
	CodeMethodNotAllowed = "method_not_allowed"
	// CodeUnavailable (503): this member has no membership view yet.
	CodeUnavailable = "unavailable"
	// CodeRecordsUnavailable (503): the node record store could not
	// give a snapshot in time; nothing older is served in its place.
	CodeRecordsUnavailable = "records_unavailable"
	// CodeInternal (500): the response could not be built.
	CodeInternal = "internal"
)
