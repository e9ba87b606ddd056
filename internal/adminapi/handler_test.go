package adminapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/noderecord"
	"github.com/troupe-go/troupe/ring"
)

// fake is a Source with a fixed answer.
type fake struct {
	node      fakeNode
	records   []cluster.Member
	clustered bool
	notOwning bool // the member lost the majority
	types     []fakeType
	// nodeRecords are the node records Records gives, recordsErr its
	// error.
	nodeRecords []noderecord.Record
	recordsErr  error
	// calls counts the calls of each method, by name.
	calls map[string]int
}

// fakeNode is what the fake says of its process.
type fakeNode struct {
	ID           ring.NodeID
	Started      time.Time
	BuildVersion string
	Ready        bool
	Checks       []Check
}

// fakeType is a hosted type: its definition and its counts.
type fakeType struct {
	Name        string
	Activations int
	Queued      int
	Replicas    int
	Pinned      bool
}

func (f *fake) called(name string) {
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[name]++
}

func (f *fake) Node() Node {
	f.called("Node")
	return Node{Addr: f.node.ID.Addr, Started: f.node.Started, BuildVersion: f.node.BuildVersion, Role: "member"}
}

func (f *fake) Readiness() (bool, []Check) {
	f.called("Readiness")
	return f.node.Ready, f.node.Checks
}

// View builds the rings from the records as placement does: every
// record neither left, leaving nor joining, in the rings of its types.
func (f *fake) View() (View, bool) {
	f.called("View")
	if !f.clustered {
		return View{}, false
	}
	hosts := map[string][]ring.NodeID{}
	for _, m := range f.records {
		if m.Status == cluster.StatusLeft || m.Status == cluster.StatusLeaving || m.Joining {
			continue
		}
		for _, t := range m.ActorTypes {
			hosts[t] = append(hosts[t], m.ID)
		}
	}
	rings := map[string]*ring.Ring{}
	for t, ms := range hosts {
		rings[t] = ring.New(ms)
	}
	return View{Self: f.node.ID, Owning: !f.notOwning, Records: f.records, Rings: rings}, true
}

func (f *fake) Definitions() []Definition {
	f.called("Definitions")
	ds := make([]Definition, 0, len(f.types))
	for _, t := range f.types {
		ds = append(ds, Definition{Name: t.Name, Replicas: max(t.Replicas, 1), Pinned: t.Pinned})
	}
	return ds
}

func (f *fake) Records(context.Context) (Records, bool, error) {
	f.called("Records")
	if !f.clustered {
		return Records{}, false, nil
	}
	if f.recordsErr != nil {
		return Records{}, true, f.recordsErr
	}
	return Records{Snapshot: noderecord.Snapshot{Records: f.nodeRecords, At: testNow}, Self: noderecord.Key{Cluster: "c", Role: "member", Node: f.node.ID.Addr}}, true, nil
}

func (f *fake) Counts() []Count {
	f.called("Counts")
	cs := make([]Count, 0, len(f.types))
	for _, t := range f.types {
		cs = append(cs, Count{Name: t.Name, Activations: t.Activations, Queued: t.Queued})
	}
	return cs
}

var testNow = time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)

func id(addr string) ring.NodeID { return ring.NodeID{Addr: addr, Incarnation: 1} }

func member(addr string, st cluster.Status, types ...string) cluster.Member {
	return cluster.Member{ID: id(addr), Status: st, ActorTypes: types}
}

// threeMembers is a member at 10.0.0.2 that sees itself and two others.
func threeMembers() *fake {
	return &fake{
		clustered: true,
		node: fakeNode{ID: id("10.0.0.2:7400"), Started: testNow.Add(-90 * time.Second), BuildVersion: "v1.2.3", Ready: true,
			Checks: []Check{{Name: "joined", OK: true}, {Name: "not_closing", OK: true}}},
		records: []cluster.Member{
			member("10.0.0.3:7400", cluster.StatusSuspect, "cart", "order"),
			member("10.0.0.1:7400", cluster.StatusAlive, "cart"),
			member("10.0.0.2:7400", cluster.StatusAlive, "cart", "order"),
		},
		types: []fakeType{{Name: "order", Activations: 7, Queued: 2, Replicas: 3}, {Name: "cart", Activations: 40}},
	}
}

// do sends method path to a handler over src and returns the status,
// the headers and the body.
func do(t *testing.T, src Source, method, path string) (int, http.Header, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	New(src, Options{Now: func() time.Time { return testNow }}).ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	b, err := io.ReadAll(rec.Result().Body)
	if err != nil {
		t.Fatal(err)
	}
	return rec.Code, rec.Result().Header, string(b)
}

// getJSON GETs path, wants 200, and decodes the body into v.
func getJSON(t *testing.T, src Source, path string, v any) {
	t.Helper()
	code, _, body := do(t, src, http.MethodGet, path)
	if code != http.StatusOK {
		t.Fatalf("GET %s answered %d %s, want 200", path, code, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("GET %s: %v in %s", path, err, body)
	}
}

// wantError checks that GET path answers status with a JSON error of
// code, and returns its message.
func wantError(t *testing.T, src Source, method, path string, status int, code string) string {
	t.Helper()
	got, h, body := do(t, src, method, path)
	var e ErrorResponse
	if err := json.Unmarshal([]byte(body), &e); err != nil || got != status || e.Error.Code != code || e.Error.Message == "" {
		t.Errorf("%s %s answered %d %q (%v), want %d with a JSON error of code %q and a message", method, path, got, body, err, status, code)
	}
	if ct := h.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q, want application/json", method, path, ct)
	}
	return e.Error.Message
}

var endpoints = []string{"/api/v1/status", "/api/v1/members", "/api/v1/placement", "/api/v1/placement/where?type=cart&key=k1", "/api/v1/types"}

func TestEveryResponseCarriesSchemaVersionGenerationTimeRevisionAndMode(t *testing.T) {
	for _, src := range []*fake{threeMembers(), {node: fakeNode{Started: testNow}, types: []fakeType{{Name: "cart"}}}} {
		for _, p := range endpoints {
			var m map[string]any
			getJSON(t, src, p, &m)
			if m["schema_version"] != 1.0 {
				t.Errorf("%s: schema_version %v, want 1", p, m["schema_version"])
			}
			if at, err := time.Parse(time.RFC3339, fmt.Sprint(m["generated_at"])); err != nil || !at.Equal(testNow) || !strings.HasSuffix(fmt.Sprint(m["generated_at"]), "Z") {
				t.Errorf("%s: generated_at %v (%v), want %v in RFC 3339 UTC", p, m["generated_at"], err, testNow)
			}
			if rev, _ := m["revision"].(string); rev == "" {
				t.Errorf("%s: no revision in %v", p, m)
			}
			want := ModeStandalone
			if src.clustered {
				want = ModeCluster
			}
			if m["mode"] != want {
				t.Errorf("%s: mode %v, want %s", p, m["mode"], want)
			}
		}
	}
}

func TestStatusDescribesTheMemberItsReadinessAndTheClusterBySize(t *testing.T) {
	var st StatusResponse
	getJSON(t, threeMembers(), "/api/v1/status", &st)
	if st.Member.Address != "10.0.0.2:7400" || st.Member.NodeID != "10.0.0.2:7400#1" || st.Member.Incarnation != 1 || st.Member.BuildVersion != "v1.2.3" {
		t.Errorf("member %+v, want 10.0.0.2:7400, incarnation 1, build v1.2.3", st.Member)
	}
	if st.Member.UptimeSeconds != 90 || st.Member.StartTime != "2026-12-03T09:58:30Z" {
		t.Errorf("uptime %v s from %s, want 90 s from 2026-12-03T09:58:30Z", st.Member.UptimeSeconds, st.Member.StartTime)
	}
	if !st.Readiness.Ready || len(st.Readiness.Checks) != 2 {
		t.Errorf("readiness %+v, want ready with the source's two checks", st.Readiness)
	}
	want := map[string]int{"alive": 2, "suspect": 1, "dead": 0, "leaving": 0, "joining": 0}
	if st.Cluster.Members != 3 || fmt.Sprint(st.Cluster.MembersByStatus) != fmt.Sprint(want) {
		t.Errorf("cluster %+v, want 3 members, by status %v", st.Cluster, want)
	}
	if st.PlacementVersion == "" || st.PlacementVersion == StandaloneVersion {
		t.Errorf("placement_version %q, want a cluster's digest", st.PlacementVersion)
	}
}

func TestStatusCarriesAFailingChecksCauseAndReason(t *testing.T) {
	f := threeMembers()
	f.node.Ready = false
	f.node.Checks = []Check{{Name: "joined", OK: true}, {Name: "majority", Cause: "no_majority", Reason: "sees no majority"}}
	_, _, body := do(t, f, http.MethodGet, "/api/v1/status")
	if !strings.Contains(body, `"cause": "no_majority"`) || strings.Count(body, `"cause"`) != 1 {
		t.Errorf("status body:\n%s\nwant the failing check's cause no_majority, and no cause on the passing one", body)
	}
	var st StatusResponse
	getJSON(t, f, "/api/v1/status", &st)
	if c := st.Readiness.Checks[1]; st.Readiness.Ready || c.Cause != "no_majority" || c.Reason != "sees no majority" {
		t.Errorf("readiness %+v, want unready, majority failing with its cause and reason", st.Readiness)
	}
}

func TestIncarnationsTravelAsDecimalStrings(t *testing.T) {
	f := threeMembers()
	big := uint64(1<<63 + 12345) // beyond a float64's exact integers
	f.records[0].ID.Incarnation = big
	_, _, body := do(t, f, http.MethodGet, "/api/v1/members")
	if !strings.Contains(body, fmt.Sprintf(`"incarnation": "%d"`, big)) {
		t.Errorf("the body does not hold the incarnation %d as a string: %s", big, body)
	}
}

func TestMembersListTheNewestProcessAtEachAddressByAddress(t *testing.T) {
	f := threeMembers()
	f.records = append(f.records,
		cluster.Member{ID: ring.NodeID{Addr: "10.0.0.1:7400", Incarnation: 0}, Status: cluster.StatusDead}, // an older process
		member("10.0.0.9:7400", cluster.StatusLeft, "cart"),
		cluster.Member{ID: id("10.0.0.0:7400"), Status: cluster.StatusAlive, Joining: true})
	var mr MembersResponse
	getJSON(t, f, "/api/v1/members", &mr)
	var got []string
	for _, m := range mr.Members {
		got = append(got, m.Address+" "+m.Status)
	}
	want := []string{"10.0.0.0:7400 joining", "10.0.0.1:7400 alive", "10.0.0.2:7400 alive", "10.0.0.3:7400 suspect"}
	if !slices.Equal(got, want) {
		t.Errorf("members %q, want %q (by address, newest process, no one who left)", got, want)
	}
	if mr.Total != 4 || mr.Next != "" {
		t.Errorf("total %d next %q, want 4 and no next page", mr.Total, mr.Next)
	}
	for _, m := range mr.Members {
		if m.Self != (m.Address == "10.0.0.2:7400") {
			t.Errorf("%s: self %t, want it only on the member answering", m.Address, m.Self)
		}
		if m.ActorTypes == nil {
			t.Errorf("%s: actor_types is null, want a list", m.Address)
		}
	}
}

func addresses(ms []Member) []string {
	var a []string
	for _, m := range ms {
		a = append(a, m.Address)
	}
	return a
}

func TestMembersFilterByStatusRepeatedOrListedAndByHostedType(t *testing.T) {
	f := threeMembers()
	f.records = append(f.records, member("10.0.0.4:7400", cluster.StatusDead, "cart"))
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"status=alive", []string{"10.0.0.1:7400", "10.0.0.2:7400"}},
		{"status=suspect,dead", []string{"10.0.0.3:7400", "10.0.0.4:7400"}},
		{"status=suspect&status=dead", []string{"10.0.0.3:7400", "10.0.0.4:7400"}},
		{"status=leaving", nil},
		{"type=order", []string{"10.0.0.2:7400", "10.0.0.3:7400"}},
		{"type=order&status=alive", []string{"10.0.0.2:7400"}},
		{"type=nobody", nil},
	} {
		var mr MembersResponse
		getJSON(t, f, "/api/v1/members?"+tc.query, &mr)
		if got := addresses(mr.Members); !slices.Equal(got, tc.want) || mr.Total != len(tc.want) {
			t.Errorf("?%s: %v (total %d), want %v", tc.query, got, mr.Total, tc.want)
		}
		if mr.Members == nil {
			t.Errorf("?%s: members is null, want []", tc.query)
		}
	}
}

// labelled is threeMembers with node records: 10.0.0.1 and .2 in zone
// a (racks 1 and 2), .3 in zone b, and a client's record at .3's
// address in zone a, which says nothing of the member there.
func labelled() *fake {
	f := threeMembers()
	rec := func(role, node string, labels map[string]string) noderecord.Record {
		return noderecord.Record{Cluster: "c", Role: role, Node: node, Incarnation: "1", Labels: labels}
	}
	f.nodeRecords = []noderecord.Record{
		rec("client", "10.0.0.3:7400", map[string]string{"zone": "a"}),
		rec("member", "10.0.0.1:7400", map[string]string{"zone": "a", "rack": "1"}),
		rec("member", "10.0.0.2:7400", map[string]string{"zone": "a", "rack": "2"}),
		rec("member", "10.0.0.3:7400", map[string]string{"zone": "b"}),
	}
	return f
}

func TestMembersFilterByRoleAndByLabelsANDedWithTheOtherFilters(t *testing.T) {
	f := labelled()
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"role=member", []string{"10.0.0.1:7400", "10.0.0.2:7400", "10.0.0.3:7400"}},
		{"role=client", nil},
		{"label=zone=a", []string{"10.0.0.1:7400", "10.0.0.2:7400"}},
		{"label=zone=a&label=rack=2", []string{"10.0.0.2:7400"}},
		{"label=rack=2&label=zone=b", nil},
		{"label=zone=b", []string{"10.0.0.3:7400"}},
		{"label=zone=a&status=suspect", nil},
		{"label=zone=a&type=order&role=member", []string{"10.0.0.2:7400"}},
		{"label=rack=1&label=rack=1", []string{"10.0.0.1:7400"}},
		{"label=zone=", nil},
		{"label=zone=c", nil},
		{"label=zone%3Da", []string{"10.0.0.1:7400", "10.0.0.2:7400"}},
	} {
		var mr MembersResponse
		getJSON(t, f, "/api/v1/members?"+tc.query, &mr)
		if got := addresses(mr.Members); !slices.Equal(got, tc.want) || mr.Total != len(tc.want) {
			t.Errorf("?%s: %v (total %d), want %v", tc.query, got, mr.Total, tc.want)
		}
		for _, m := range mr.Members {
			if m.Role != "member" {
				t.Errorf("?%s: %s has role %q, want member", tc.query, m.Address, m.Role)
			}
		}
	}
}

func TestMembersReadTheRecordsOnlyForALabelFilter(t *testing.T) {
	f := labelled()
	getJSON(t, f, "/api/v1/members?role=member&status=alive", new(MembersResponse))
	if f.calls["Records"] != 0 {
		t.Errorf("members without a label filter read the records %d times, want 0", f.calls["Records"])
	}
	getJSON(t, f, "/api/v1/members?label=zone=a", new(MembersResponse))
	if f.calls["Records"] != 1 {
		t.Errorf("members with a label filter read the records %d times, want once", f.calls["Records"])
	}
}

func TestMembersPageThroughALabelFilterInAddressOrder(t *testing.T) {
	f := labelled()
	var got []string
	path := "/api/v1/members?limit=1&label=zone=a"
	for range 3 {
		var mr MembersResponse
		getJSON(t, f, path, &mr)
		if mr.Total != 2 {
			t.Errorf("%s: total %d, want 2", path, mr.Total)
		}
		got = append(got, addresses(mr.Members)...)
		if mr.Next == "" {
			break
		}
		path = "/api/v1/members?limit=1&label=zone=a&after=" + mr.Next
	}
	if want := []string{"10.0.0.1:7400", "10.0.0.2:7400"}; !slices.Equal(got, want) {
		t.Errorf("pages of one gave %v, want %v", got, want)
	}
}

func TestMembersWithALabelFilterFailClosedWhenTheRecordsCannotBeRead(t *testing.T) {
	f := labelled()
	f.recordsErr = fmt.Errorf("etcd at 10.9.9.9:2379: %w", noderecord.ErrTimeout)
	msg := wantError(t, f, http.MethodGet, "/api/v1/members?label=zone=a", http.StatusServiceUnavailable, CodeRecordsUnavailable)
	if strings.Contains(msg, "10.9.9.9") || !strings.Contains(msg, "in time") {
		t.Errorf("the 503 says %q: want the timeout told, the store's error not repeated", msg)
	}
	var mr MembersResponse
	getJSON(t, f, "/api/v1/members?role=member", &mr)
	if len(mr.Members) != 3 {
		t.Errorf("?role=member with the records unreadable: %v, want the three members (the role needs no record)", addresses(mr.Members))
	}
}

func TestMembersPageThroughTheCursorUntilNoNextRemains(t *testing.T) {
	f := threeMembers()
	f.records = nil
	var all []string
	for i := range 25 {
		addr := fmt.Sprintf("10.0.1.%02d:7400", i)
		f.records = append(f.records, member(addr, cluster.StatusAlive, "cart"))
		all = append(all, addr)
	}
	slices.Reverse(f.records) // the source's order does not matter
	var got []string
	var sizes []int
	path := "/api/v1/members?limit=10"
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatalf("more than 3 pages of 10 for 25 members: %v", sizes)
		}
		var mr MembersResponse
		getJSON(t, f, path, &mr)
		if mr.Total != 25 {
			t.Errorf("page %d: total %d, want 25 on every page", pages, mr.Total)
		}
		got = append(got, addresses(mr.Members)...)
		sizes = append(sizes, len(mr.Members))
		if mr.Next == "" {
			break
		}
		if strings.Contains(mr.Next, "10.0.1") {
			t.Errorf("the cursor %q spells an address out: it is meant opaque", mr.Next)
		}
		path = "/api/v1/members?limit=10&after=" + mr.Next
	}
	if !slices.Equal(got, all) || !slices.Equal(sizes, []int{10, 10, 5}) {
		t.Errorf("pages of %v gave %v, want pages of [10 10 5] giving %v", sizes, got, all)
	}
}

func TestMembersDefaultToPagesOf100(t *testing.T) {
	f := threeMembers()
	f.records = nil
	for i := range 150 {
		f.records = append(f.records, member(fmt.Sprintf("10.0.%03d.1:7400", i), cluster.StatusAlive))
	}
	var mr MembersResponse
	getJSON(t, f, "/api/v1/members", &mr)
	if len(mr.Members) != 100 || mr.Next == "" || mr.Total != 150 {
		t.Errorf("%d members, next %q, total %d: want 100, a next cursor and 150", len(mr.Members), mr.Next, mr.Total)
	}
	var all MembersResponse
	getJSON(t, f, "/api/v1/members?limit=1000", &all)
	if len(all.Members) != 150 || all.Next != "" {
		t.Errorf("limit=1000: %d members, next %q, want all 150 and no next", len(all.Members), all.Next)
	}
}

func TestMembersRefuseBadParametersWith400(t *testing.T) {
	for _, q := range []string{"limit=0", "limit=-1", "limit=1001", "limit=ten", "limit=", "limit=1&limit=2",
		"status=bogus", "status=alive,", "status=", "type=", "type=a&type=b", "after=", "after=xyz", "after=a1.%21%21",
		"after=" + encodeCursor("x") + "%0A", "nosuch=1", "%zz",
		"role=", "role=a/b", "role=member&role=client", "role=%07",
		"label=", "label=zone", "label==a", "label=zone%00=a", "label=zone=a%0A",
		"label=" + strings.Repeat("k", noderecord.MaxLabelKeyBytes+1) + "=v",
		"label=zone=" + strings.Repeat("v", noderecord.MaxFieldBytes+1),
		seventeenLabels()} {
		wantError(t, threeMembers(), http.MethodGet, "/api/v1/members?"+q, http.StatusBadRequest, CodeBadParameter)
	}
	for _, p := range []string{"/api/v1/status?x=1", "/api/v1/placement?type=cart", "/api/v1/types?limit=1"} {
		wantError(t, threeMembers(), http.MethodGet, p, http.StatusBadRequest, CodeBadParameter)
	}
}

// seventeenLabels is a query of more distinct label filters than a
// record has labels.
func seventeenLabels() string {
	var q []string
	for i := range noderecord.MaxLabels + 1 {
		q = append(q, fmt.Sprintf("label=k%d=v", i))
	}
	return strings.Join(q, "&")
}

func TestOnlyGETAndHEADAreServed(t *testing.T) {
	for _, p := range endpoints {
		for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
			wantError(t, threeMembers(), m, p, http.StatusMethodNotAllowed, CodeMethodNotAllowed)
			if _, h, _ := do(t, threeMembers(), m, p); h.Get("Allow") != "GET, HEAD" {
				t.Errorf("%s %s: Allow %q, want \"GET, HEAD\"", m, p, h.Get("Allow"))
			}
		}
	}
}

func TestHEADAnswersGETsHeadersWithoutABody(t *testing.T) {
	srv := httptest.NewServer(New(threeMembers(), Options{Now: func() time.Time { return testNow }}))
	t.Cleanup(srv.Close)
	for _, p := range append(endpoints, "/api/v1/nope") {
		_, _, getBody := do(t, threeMembers(), http.MethodGet, p)
		resp, err := srv.Client().Head(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if len(body) != 0 {
			t.Errorf("HEAD %s sent a body of %d bytes, want none", p, len(body))
		}
		if want := fmt.Sprint(len(getBody)); resp.Header.Get("Content-Length") != want {
			t.Errorf("HEAD %s: Content-Length %q, want %s (GET's body)", p, resp.Header.Get("Content-Length"), want)
		}
		if resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("HEAD %s: Content-Type %q, want application/json", p, resp.Header.Get("Content-Type"))
		}
	}
	if code, _, _ := do(t, threeMembers(), http.MethodHead, "/api/v1/status"); code != http.StatusOK {
		t.Errorf("HEAD /api/v1/status answered %d, want 200", code)
	}
}

func TestTheRootWithoutItsSlashIsAJSON404(t *testing.T) {
	wantError(t, threeMembers(), http.MethodGet, "/api/v1", http.StatusNotFound, CodeNotFound)
}

func TestUnknownPathsAnswerAJSON404(t *testing.T) {
	for _, p := range []string{"/api/v1/", "/api/v1/nope", "/api/v1/status/", "/api/v1/placement/where/x", "/api/v1/members/10.0.0.1"} {
		wantError(t, threeMembers(), http.MethodGet, p, http.StatusNotFound, CodeNotFound)
	}
}

func TestPlacementReportsEachTypesSharesAndReplicas(t *testing.T) {
	var pr PlacementResponse
	getJSON(t, threeMembers(), "/api/v1/placement", &pr)
	if len(pr.Types) != 2 || pr.Types[0].Name != "cart" || pr.Types[1].Name != "order" {
		t.Fatalf("types %+v, want cart and order", pr.Types)
	}
	cart, order := pr.Types[0], pr.Types[1]
	if cart.Replicas != 1 || order.Replicas != 3 {
		t.Errorf("replicas cart %d order %d, want 1 and 3 (the hosted definitions')", cart.Replicas, order.Replicas)
	}
	if len(cart.Members) != 3 || len(order.Members) != 2 {
		t.Errorf("cart's ring has %d members, order's %d: want 3 and 2", len(cart.Members), len(order.Members))
	}
	for _, pt := range pr.Types {
		sum := 0.0
		for i, m := range pt.Members {
			sum += m.ShareRatio
			if m.ShareRatio <= 0 || m.ShareRatio >= 1 {
				t.Errorf("%s: %s owns %v of the ring, want a fraction strictly between 0 and 1", pt.Name, m.Address, m.ShareRatio)
			}
			if i > 0 && pt.Members[i-1].Address >= m.Address {
				t.Errorf("%s: members not ordered by address: %s before %s", pt.Name, pt.Members[i-1].Address, m.Address)
			}
		}
		if math.Abs(sum-1) > 1e-9 {
			t.Errorf("%s: shares sum to %v, want 1", pt.Name, sum)
		}
		if pt.RingVersion == "" {
			t.Errorf("%s: no ring_version", pt.Name)
		}
	}
	if cart.Members[2].Status != "suspect" {
		t.Errorf("10.0.0.3's status in cart's ring: %q, want suspect", cart.Members[2].Status)
	}
}

func TestPlacementOmitsTheReplicasOfATypeHostedElsewhere(t *testing.T) {
	f := threeMembers()
	f.records = append(f.records, member("10.0.0.5:7400", cluster.StatusAlive, "ledger"))
	_, _, body := do(t, f, http.MethodGet, "/api/v1/placement")
	var raw struct {
		Types []map[string]any `json:"types"`
	}
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		t.Fatal(err)
	}
	for _, pt := range raw.Types {
		if _, has := pt["replicas"]; has != (pt["name"] != "ledger") {
			t.Errorf("%v: replicas present %t, want it only for the types this member hosts", pt["name"], has)
		}
	}
}

func TestEqualViewsGiveEqualVersionsAndRevisionsWhateverTheirOrder(t *testing.T) {
	a, b := threeMembers(), threeMembers()
	slices.Reverse(b.records)
	b.node.ID = id("10.0.0.1:7400") // another member, same view
	var sa, sb StatusResponse
	getJSON(t, a, "/api/v1/status", &sa)
	getJSON(t, b, "/api/v1/status", &sb)
	if sa.PlacementVersion != sb.PlacementVersion || sa.Revision != sb.Revision {
		t.Errorf("same view, two members: versions %s / %s, revisions %s / %s: want both equal",
			sa.PlacementVersion, sb.PlacementVersion, sa.Revision, sb.Revision)
	}
}

func TestThePlacementVersionChangesWithWhereKeysLiveOnly(t *testing.T) {
	version := func(f *fake) (string, string) {
		var st StatusResponse
		getJSON(t, f, "/api/v1/status", &st)
		return st.PlacementVersion, st.Revision
	}
	base, baseRev := version(threeMembers())
	suspect := threeMembers()
	suspect.records[1].Status = cluster.StatusSuspect // still serves its keys
	if v, rev := version(suspect); v != base || rev == baseRev {
		t.Errorf("a suspicion: version %s (was %s), revision %s (was %s): want the version kept, the revision changed", v, base, rev, baseRev)
	}
	for name, change := range map[string]func(f *fake){
		"a death":         func(f *fake) { f.records[1].Status = cluster.StatusDead },
		"a join":          func(f *fake) { f.records = append(f.records, member("10.0.0.4:7400", cluster.StatusAlive, "cart")) },
		"a restart":       func(f *fake) { f.records[1].ID.Incarnation = 2 },
		"a leave":         func(f *fake) { f.records[1].Status = cluster.StatusLeaving },
		"a type retyped":  func(f *fake) { f.records[1].ActorTypes = []string{"order"} },
		"another address": func(f *fake) { f.records[1].ID.Addr = "10.0.0.7:7400" },
	} {
		f := threeMembers()
		change(f)
		if v, _ := version(f); v == base {
			t.Errorf("%s left the placement version as it was (%s)", name, v)
		}
	}
}

func TestWhereNamesTheKeysReplicasInRingOrderAndItsOwner(t *testing.T) {
	f := threeMembers()
	v, _ := f.View()
	for i := range 20 {
		key := fmt.Sprint("k", i)
		var wr WhereResponse
		getJSON(t, f, "/api/v1/placement/where?type=order&key="+key, &wr)
		want := v.Rings["order"].AppendReplicas(nil, ring.KeyToken("order", key), 3)
		var got []ring.NodeID
		for _, r := range wr.Replicas {
			got = append(got, ring.NodeID{Addr: r.Address, Incarnation: r.Incarnation})
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: replicas %v, want the ring's %v", key, got, want)
		}
		if wr.Owner != want[0].Addr { // the primary serves: it is alive or suspect
			t.Errorf("%s: owner %q, want the primary %s", key, wr.Owner, want[0].Addr)
		}
		if wr.Key != key || wr.Type != "order" || wr.KeyToken != fmt.Sprintf("%016x", uint64(ring.KeyToken("order", key))) {
			t.Errorf("%s: echoed %q/%q token %s, want the request's type, key and token", key, wr.Type, wr.Key, wr.KeyToken)
		}
	}
	var wr WhereResponse
	getJSON(t, f, "/api/v1/placement/where?type=cart&key=k1", &wr)
	if len(wr.Replicas) != 1 {
		t.Errorf("cart, a type of one copy: %d replicas, want 1", len(wr.Replicas))
	}
}

func TestWhereMovesTheOwnerPastADeadPrimary(t *testing.T) {
	f := threeMembers()
	v, _ := f.View()
	key := "k1"
	primary := v.Rings["cart"].AppendReplicas(nil, ring.KeyToken("cart", key), 2)
	for i := range f.records {
		if f.records[i].ID == primary[0] {
			f.records[i].Status = cluster.StatusDead
		}
	}
	var wr WhereResponse
	getJSON(t, f, "/api/v1/placement/where?type=cart&key="+key, &wr)
	if wr.Replicas[0].Address != primary[0].Addr || wr.Replicas[0].Status != "dead" || wr.Owner != primary[1].Addr {
		t.Errorf("replicas %+v owner %q: want the dead primary %s first and the next member %s owning", wr.Replicas, wr.Owner, primary[0].Addr, primary[1].Addr)
	}
}

func TestWhereRefusesAMissingTypeOrKeyAndAnUnknownTypeWithoutRepeatingTheKey(t *testing.T) {
	const secretKey = "user-4242-private"
	for _, q := range []string{"", "type=cart", "key=" + secretKey, "type=&key=" + secretKey, "type=cart&key="} {
		msg := wantError(t, threeMembers(), http.MethodGet, "/api/v1/placement/where?"+q, http.StatusBadRequest, CodeMissingParameter)
		if strings.Contains(msg, secretKey) {
			t.Errorf("?%s: the error %q repeats the key", q, msg)
		}
	}
	msg := wantError(t, threeMembers(), http.MethodGet, "/api/v1/placement/where?type=ledger&key="+secretKey, http.StatusNotFound, CodeUnknownType)
	if strings.Contains(msg, secretKey) {
		t.Errorf("the unknown-type error %q repeats the key", msg)
	}
	msg = wantError(t, threeMembers(), http.MethodGet, "/api/v1/placement/where?type=cart&key=a&key="+secretKey, http.StatusBadRequest, CodeBadParameter)
	if strings.Contains(msg, secretKey) {
		t.Errorf("the repeated-key error %q repeats the key", msg)
	}
}

func TestWhereOfAPinnedKeyNamesTheMemberInTheKey(t *testing.T) {
	f := threeMembers()
	f.types = append(f.types, fakeType{Name: "session", Pinned: true})
	f.records[0].ActorTypes = append(f.records[0].ActorTypes, "session")
	var wr WhereResponse
	getJSON(t, f, "/api/v1/placement/where?type=session&key=10.0.0.3:7400/s1", &wr)
	if len(wr.Replicas) != 1 || wr.Replicas[0].Address != "10.0.0.3:7400" || wr.Owner != "10.0.0.3:7400" {
		t.Errorf("replicas %+v owner %q, want only 10.0.0.3:7400, named by the key", wr.Replicas, wr.Owner)
	}
}

func TestTypesReportWhatThisMemberHostsWithItsCounts(t *testing.T) {
	var tr TypesResponse
	getJSON(t, threeMembers(), "/api/v1/types", &tr)
	want := []TypeInfo{
		{Name: "cart", Activations: 40, Replicas: 1, RingMembers: 3},
		{Name: "order", Activations: 7, QueuedMessages: 2, Replicas: 3, RingMembers: 2},
	}
	if !slices.Equal(tr.Types, want) {
		t.Errorf("types %+v, want %+v", tr.Types, want)
	}
}

func TestAStandaloneSystemSaysSoEverywhere(t *testing.T) {
	f := &fake{node: fakeNode{Started: testNow, Ready: true}, types: []fakeType{{Name: "cart", Activations: 3}}}
	var st StatusResponse
	getJSON(t, f, "/api/v1/status", &st)
	if st.Mode != ModeStandalone || st.PlacementVersion != StandaloneVersion || st.Member.NodeID != "" || st.Cluster.Members != 0 {
		t.Errorf("status %+v, want standalone mode and version, no node id, no members", st)
	}
	var mr MembersResponse
	getJSON(t, f, "/api/v1/members", &mr)
	if mr.Members == nil || len(mr.Members) != 0 || mr.Total != 0 {
		t.Errorf("members %+v, want an empty list", mr)
	}
	var pr PlacementResponse
	getJSON(t, f, "/api/v1/placement", &pr)
	if pr.PlacementVersion != StandaloneVersion || pr.Types == nil || len(pr.Types) != 0 {
		t.Errorf("placement %+v, want the standalone version and no rings", pr)
	}
	var wr WhereResponse
	getJSON(t, f, "/api/v1/placement/where?type=cart&key=k", &wr)
	if wr.Mode != ModeStandalone || wr.Owner != "" || len(wr.Replicas) != 0 {
		t.Errorf("where %+v, want standalone mode: every key lives here", wr)
	}
	wantError(t, f, http.MethodGet, "/api/v1/placement/where?type=order&key=k", http.StatusNotFound, CodeUnknownType)
	var tr TypesResponse
	getJSON(t, f, "/api/v1/types", &tr)
	if len(tr.Types) != 1 || tr.Types[0].Activations != 3 || tr.Types[0].RingMembers != 0 {
		t.Errorf("types %+v, want cart with 3 activations and no ring", tr.Types)
	}
}

func TestAMemberWithoutAViewYetAnswers503(t *testing.T) {
	f := &fake{clustered: true, node: fakeNode{ID: id("10.0.0.1:7400"), Started: testNow}}
	for _, p := range []string{"/api/v1/members", "/api/v1/placement", "/api/v1/placement/where?type=cart&key=k"} {
		wantError(t, f, http.MethodGet, p, http.StatusServiceUnavailable, CodeUnavailable)
	}
	var st StatusResponse // status still answers: it is how one learns why
	getJSON(t, f, "/api/v1/status", &st)
	if st.Mode != ModeCluster || st.PlacementVersion != "" || st.Cluster.Members != 0 || st.Member.Address != "10.0.0.1:7400" {
		t.Errorf("status %+v: want cluster mode, no placement version (not joined), no members, the address", st)
	}
	if st.Readiness.Ready {
		t.Errorf("status says ready before the member joined: %+v", st.Readiness)
	}
}

func TestStatusHasNoNodeIDBeforeTheFirstIncarnation(t *testing.T) {
	f := &fake{clustered: true, node: fakeNode{ID: ring.NodeID{Addr: "10.0.0.1:7400"}, Started: testNow}}
	var st StatusResponse
	getJSON(t, f, "/api/v1/status", &st)
	if st.Member.NodeID != "" || st.Member.Incarnation != 0 || st.Member.Address != "10.0.0.1:7400" {
		t.Errorf("member %+v, want the address alone before the first incarnation", st.Member)
	}
}

func TestPlacementAndWhereReadDefinitionsNotCountsOrReadiness(t *testing.T) {
	for _, p := range []string{"/api/v1/placement", "/api/v1/placement/where?type=cart&key=k1", "/api/v1/members"} {
		f := threeMembers()
		do(t, f, http.MethodGet, p)
		if f.calls["Counts"] != 0 || f.calls["Readiness"] != 0 {
			t.Errorf("GET %s called Counts %d and Readiness %d times, want neither (they walk every activation and check)",
				p, f.calls["Counts"], f.calls["Readiness"])
		}
	}
}

// notHostingOrder is a member at 10.0.0.1 that hosts cart only, in a
// cluster whose other members host order too.
func notHostingOrder() *fake {
	f := threeMembers()
	f.node.ID = id("10.0.0.1:7400")
	f.types = []fakeType{{Name: "cart"}}
	return f
}

func TestWhereOnAMemberNotHostingTheTypeSendsToItsHosts(t *testing.T) {
	f := notHostingOrder()
	wantError(t, f, http.MethodGet, "/api/v1/placement/where?type=order&key=k1", http.StatusConflict, CodeTypeNotHostedHere)
	_, _, body := do(t, f, http.MethodGet, "/api/v1/placement/where?type=order&key=k1")
	var e ErrorResponse
	if err := json.Unmarshal([]byte(body), &e); err != nil || !slices.Equal(e.Error.Hosts, []string{"10.0.0.2:7400", "10.0.0.3:7400"}) {
		t.Errorf("hosts %v (%v), want the members hosting order by address", e.Error.Hosts, err)
	}
	if strings.Contains(body, "k1") {
		t.Errorf("the error repeats the key: %s", body)
	}
	// A type no member hosts is still unknown.
	wantError(t, f, http.MethodGet, "/api/v1/placement/where?type=nope&key=k1", http.StatusNotFound, CodeUnknownType)
}

// pinnedCluster is threeMembers with a pinned type hosted everywhere.
func pinnedCluster() *fake {
	f := threeMembers()
	f.types = append(f.types, fakeType{Name: "session", Pinned: true})
	for i := range f.records {
		f.records[i].ActorTypes = append(f.records[i].ActorTypes, "session")
	}
	return f
}

func TestWhereRefusesAPinnedKeyThatNamesNoMemberWithoutRepeatingIt(t *testing.T) {
	for _, key := range []string{"nokeyslash", "/s9"} {
		msg := wantError(t, pinnedCluster(), http.MethodGet, "/api/v1/placement/where?type=session&key="+key, http.StatusBadRequest, CodeBadParameter)
		if strings.Contains(msg, key) {
			t.Errorf("the message %q repeats the key %q", msg, key)
		}
	}
}

func TestWhereOfAPinnedKeyPicksTheProcessTheRouterPicks(t *testing.T) {
	f := pinnedCluster()
	// 10.0.0.4: a process that serves, and a newer one still joining,
	// which the router does not pick yet.
	old := member("10.0.0.4:7400", cluster.StatusAlive, "session")
	joining := member("10.0.0.4:7400", cluster.StatusAlive, "session")
	joining.ID.Incarnation, joining.Joining = 2, true
	// 10.0.0.5: leaving, so no owner.
	leaving := member("10.0.0.5:7400", cluster.StatusLeaving, "session")
	f.records = append(f.records, old, joining, leaving)
	// This member's own record says leaving: the router takes its own
	// keys all the same.
	f.records[2].Status = cluster.StatusLeaving
	for _, tc := range []struct {
		key, owner string
		inc        uint64
	}{
		{"10.0.0.4:7400/s", "10.0.0.4:7400", 1},
		{"10.0.0.5:7400/s", "", 1},
		{"10.0.0.2:7400/s", "10.0.0.2:7400", 1},
		{"10.0.0.9:7400/s", "", 0},
	} {
		var wr WhereResponse
		getJSON(t, f, "/api/v1/placement/where?type=session&key="+tc.key, &wr)
		if wr.Owner != tc.owner {
			t.Errorf("key %s: owner %q, want %q", tc.key, wr.Owner, tc.owner)
		}
		if tc.inc != 0 && (len(wr.Replicas) != 1 || wr.Replicas[0].Incarnation != tc.inc) {
			t.Errorf("key %s: replicas %+v, want the process of incarnation %d", tc.key, wr.Replicas, tc.inc)
		}
	}
}

func TestWhereSaysWhenTheOwnerIsThisMemberAndItLostTheMajority(t *testing.T) {
	f := threeMembers()
	f.notOwning = true
	mine := 0
	for i := range 64 {
		var wr WhereResponse
		getJSON(t, f, fmt.Sprintf("/api/v1/placement/where?type=order&key=k%d", i), &wr)
		switch {
		case wr.Owner == "10.0.0.2:7400":
			mine++
			if wr.OwnerRefuses != RefusesNoMajority {
				t.Errorf("key k%d: owner is this member without a majority, owner_refuses %q, want %q", i, wr.OwnerRefuses, RefusesNoMajority)
			}
		case wr.OwnerRefuses != "":
			t.Errorf("key k%d: owner %s is another member, owner_refuses %q, want none", i, wr.Owner, wr.OwnerRefuses)
		}
	}
	if mine == 0 {
		t.Fatal("no key of 64 is owned by this member: the test proves nothing")
	}
}

func TestMembersMarksSelfFromTheViewNotTheReadiness(t *testing.T) {
	f := threeMembers()
	var mr MembersResponse
	getJSON(t, f, "/api/v1/members", &mr)
	for _, m := range mr.Members {
		if m.Self != (m.Address == "10.0.0.2:7400") {
			t.Errorf("member %s: self %t, want it on 10.0.0.2:7400 only", m.Address, m.Self)
		}
	}
	if f.calls["Readiness"] != 0 {
		t.Errorf("members called Readiness %d times, want 0", f.calls["Readiness"])
	}
}
