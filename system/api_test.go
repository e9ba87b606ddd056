package system_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/client"
	"github.com/troupe-go/troupe/internal/adminapi"
	"github.com/troupe-go/troupe/internal/memrecords"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

// apiOn switches on the admin listener's API alone, on a free loopback
// port.
func apiOn(cfg *system.Config) {
	cfg.Admin = &system.AdminConfig{Bind: "127.0.0.1:0", API: true}
}

// apiGet fetches path from s's API into v, wanting 200.
func apiGet(c *http.Client, s *system.System, path string, v any) error {
	code, b, err := fetch(c, "http://"+s.AdminAddr()+path, "")
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("GET %s answered %d %s", path, code, b)
	}
	return json.Unmarshal(b, v)
}

func TestTheAPIOfThreeMembersAgreesOnMembersPlacementAndOwners(t *testing.T) {
	def := counterDef("apicounter", nil)
	replicated := counterDef("apireplicated", nil, actor.WithReplicas(2, actor.WriteMajority))
	systems := systemtest.StartCluster(t, 3, func(_ int, cfg *system.Config) { apiOn(cfg) }, def, replicated)
	var addrs []string
	for _, s := range systems {
		addrs = append(addrs, s.Addr())
	}
	slices.Sort(addrs)
	c := httpClient(t, nil)
	// Each member lists all three alive, by address.
	for _, s := range systems {
		systemtest.Await(t, func() error {
			var mr adminapi.MembersResponse
			if err := apiGet(c, s, "/api/v1/members?status=alive", &mr); err != nil {
				return err
			}
			var got []string
			for _, m := range mr.Members {
				got = append(got, m.Address)
				if m.Self != (m.Address == s.Addr()) {
					return fmt.Errorf("%s: self is %t on %s", s.Addr(), m.Self, m.Address)
				}
			}
			if !slices.Equal(got, addrs) || mr.Total != 3 {
				return fmt.Errorf("%s lists %v alive (total %d), want %v", s.Addr(), got, mr.Total, addrs)
			}
			return nil
		})
	}
	// They agree on the placement version, and on the revision of the view.
	before := agreedVersion(t, c, systems, 3)
	// where agrees with the ring each member places keys on.
	for _, s := range systems {
		for i := range 10 {
			key := "k" + strconv.Itoa(i)
			for _, typ := range []string{def.Name(), replicated.Name()} {
				var wr adminapi.WhereResponse
				if err := apiGet(c, s, "/api/v1/placement/where?type="+typ+"&key="+key, &wr); err != nil {
					t.Fatal(err)
				}
				want := system.RingOwnerOf(s, typ, key)
				if len(wr.Replicas) == 0 || wr.Replicas[0].Address != want || wr.Owner != want {
					t.Errorf("%s: where %s/%s = replicas %+v owner %q, want %s first and owning", s.Addr(), typ, key, wr.Replicas, wr.Owner, want)
				}
				if typ == replicated.Name() {
					reps := system.ReplicasOf(s, typ, key, 2)
					var got []string
					for _, r := range wr.Replicas {
						got = append(got, r.Address)
					}
					if !slices.Equal(got, reps) {
						t.Errorf("%s: where %s/%s = %v, want the replica set %v", s.Addr(), typ, key, got, reps)
					}
				}
			}
		}
	}
	// placement: each type's ring holds the three, their shares sum to 1.
	var pr adminapi.PlacementResponse
	if err := apiGet(c, systems[0], "/api/v1/placement", &pr); err != nil {
		t.Fatal(err)
	}
	for _, pt := range pr.Types {
		sum := 0.0
		for _, m := range pt.Members {
			sum += m.ShareRatio
		}
		if len(pt.Members) != 3 || sum < 0.999999 || sum > 1.000001 {
			t.Errorf("%s: %d ring members, shares summing to %v: want 3 and 1", pt.Name, len(pt.Members), sum)
		}
	}
	if len(pr.Types) != 2 || pr.Types[1].Name != replicated.Name() || pr.Types[1].Replicas != 2 {
		t.Errorf("placement types %+v, want both, %s with 2 replicas", pr.Types, replicated.Name())
	}
	// A member leaves: the two others agree on a new placement version.
	closeNow(t, systems[2])
	if after := agreedVersion(t, c, systems[:2], 2); after == before {
		t.Errorf("the placement version stayed %s after a member left, want a new one", after)
	}
}

// agreedVersion waits until systems all report n members alive, one
// placement version and one revision, and returns the version.
func agreedVersion(t *testing.T, c *http.Client, systems []*system.System, n int) string {
	t.Helper()
	var version string
	systemtest.Await(t, func() error {
		var versions, revisions []string
		for _, s := range systems {
			var st adminapi.StatusResponse
			if err := apiGet(c, s, "/api/v1/status", &st); err != nil {
				return err
			}
			if st.Mode != adminapi.ModeCluster || st.Member.Address != s.Addr() || st.Cluster.Members != n || st.Cluster.MembersByStatus["alive"] != n {
				return fmt.Errorf("%s's status %+v: want cluster mode, its own address, %d members alive", s.Addr(), st, n)
			}
			versions, revisions = append(versions, st.PlacementVersion), append(revisions, st.Revision)
		}
		if len(slices.Compact(versions)) != 1 {
			return fmt.Errorf("placement versions %v, want one on all", versions)
		}
		if len(slices.Compact(revisions)) != 1 {
			return fmt.Errorf("revisions %v, want one on all (same view)", revisions)
		}
		version = versions[0]
		return nil
	})
	return version
}

func TestTheAPICountsEachTypesActivationsOnAStandaloneSystem(t *testing.T) {
	cfg := system.Config{}
	apiOn(&cfg)
	a, b := counterDef("acnt", nil), counterDef("bcnt", nil)
	s := newStandalone(t, cfg, a, b)
	for i := range 5 {
		add(t, a.Ref(s, "k"+strconv.Itoa(i)), 1)
	}
	add(t, b.Ref(s, "x"), 1)
	c := httpClient(t, nil)
	var tr adminapi.TypesResponse
	if err := apiGet(c, s, "/api/v1/types", &tr); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, ty := range tr.Types {
		got[ty.Name] = ty.Activations
	}
	if got["acnt"] != 5 || got["bcnt"] != 1 || tr.Mode != adminapi.ModeStandalone {
		t.Errorf("types %+v (mode %s), want acnt with 5 activations, bcnt with 1, standalone", tr.Types, tr.Mode)
	}
	var st adminapi.StatusResponse
	if err := apiGet(c, s, "/api/v1/status", &st); err != nil {
		t.Fatal(err)
	}
	if st.PlacementVersion != adminapi.StandaloneVersion || !st.Readiness.Ready || st.Member.NodeID != "" {
		t.Errorf("status %+v, want standalone, ready, no node id", st)
	}
	if code, _, _ := fetch(c, "http://"+s.AdminAddr()+"/readyz", ""); code != http.StatusNotFound {
		t.Errorf("/readyz answered %d with only the API on, want 404", code)
	}
}

func TestTheAPIRequiresTheTokenAndNeverPrintsIt(t *testing.T) {
	const token = "api-Token.9"
	cfg := system.Config{}
	apiOn(&cfg)
	cfg.Admin.Token = token
	s := newStandalone(t, cfg, counterDef("tokcnt", nil))
	c := httpClient(t, nil)
	for _, p := range []string{"/api/v1/status", "/api/v1/members", "/api/v1/nowhere"} {
		code, body, err := fetch(c, "http://"+s.AdminAddr()+p, "")
		if err != nil || code != http.StatusUnauthorized || !strings.Contains(string(body), `"unauthorized"`) {
			t.Errorf("%s without the token: %d %s (%v), want 401 with code unauthorized", p, code, body, err)
		}
	}
	code, body, err := fetch(c, "http://"+s.AdminAddr()+"/api/v1/status", "Bearer "+token)
	if err != nil || code != http.StatusOK || strings.Contains(string(body), token) {
		t.Errorf("status with the token: %d (%v), want 200 and a body without the token", code, err)
	}
}

func TestTheAPIAloneIsASurfaceAndTheConfigSaysSo(t *testing.T) {
	cfg := system.Config{Admin: &system.AdminConfig{API: true, Token: "t0k"}}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate() of an admin config serving the API only = %v, want nil", err)
	}
	dump, err := json.Marshal(cfg.Admin)
	if err != nil {
		t.Fatal(err)
	}
	logs := new(strings.Builder)
	slog.New(slog.NewJSONHandler(logs, nil)).Info("config", "admin", *cfg.Admin)
	for _, p := range []string{cfg.Admin.String(), string(dump), logs.String()} {
		if !strings.Contains(strings.ToLower(p), `api`) || !strings.Contains(p, "true") {
			t.Errorf("%s does not say the API is on", p)
		}
		if strings.Contains(p, "t0k") {
			t.Errorf("%s prints the token", p)
		}
	}
	if s := cfg.Admin.String(); !strings.Contains(s, "API:true") {
		t.Errorf("String() = %s, want API:true", s)
	}
	if !strings.Contains(string(dump), `"api":true`) || !strings.Contains(logs.String(), `"api":true`) {
		t.Errorf("MarshalJSON %s / LogValue %s, want \"api\":true", dump, logs)
	}
}

// whereOwner asks s's API where typ/key lives: the owner, or the error
// code when it answers one.
func whereOwner(t *testing.T, c *http.Client, s *system.System, typ, key string) (owner, code string) {
	t.Helper()
	status, b, err := fetch(c, "http://"+s.AdminAddr()+"/api/v1/placement/where?type="+typ+"&key="+url.QueryEscape(key), "")
	if err != nil {
		t.Fatal(err)
	}
	if status != http.StatusOK {
		var e adminapi.ErrorResponse
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatalf("where %s/%s answered %d %s", typ, key, status, b)
		}
		return "", e.Error.Code
	}
	var wr adminapi.WhereResponse
	if err := json.Unmarshal(b, &wr); err != nil {
		t.Fatal(err)
	}
	return wr.Owner, ""
}

// A member answers where only for the types it hosts, and then as its
// router routes: a pinned key to the member it names, a replicated key
// among its replicas; for the others it sends the client to their hosts.
func TestTheAPIWhereAgreesWithTheRouterWhenMembersHostDifferentTypes(t *testing.T) {
	plain := counterDef("whplain", nil)
	replicated := counterDef("whrep", nil, actor.WithReplicas(2, actor.WriteMajority))
	pinned := counterDef("whpin", nil, actor.Pinned())
	hosted := [][]actor.Definition{{plain, pinned}, {plain, replicated}, {plain, replicated, pinned}}
	systems := systemtest.StartCluster(t, 3, func(i int, cfg *system.Config) {
		apiOn(cfg)
		cfg.Actors = hosted[i]
	})
	c := httpClient(t, nil)
	agreedVersion(t, c, systems, 3)
	hostsOf := func(typ string) []string {
		var hs []string
		for i, s := range systems {
			if slices.ContainsFunc(hosted[i], func(d actor.Definition) bool { return d.Name() == typ }) {
				hs = append(hs, s.Addr())
			}
		}
		slices.Sort(hs)
		return hs
	}
	var pinnedKeys []string
	for _, s := range systems {
		pinnedKeys = append(pinnedKeys, s.Addr()+"/p")
	}
	pinnedKeys = append(pinnedKeys, "127.0.0.1:1/nobody")
	for i, s := range systems {
		for _, d := range []actor.Definition{plain, replicated, pinned} {
			typ := d.Name()
			keys := pinnedKeys
			if d != actor.Definition(pinned) {
				keys = []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9"}
			}
			isHost := slices.Contains(hosted[i], d)
			for _, key := range keys {
				owner, code := whereOwner(t, c, s, typ, key)
				if !isHost {
					if code != adminapi.CodeTypeNotHostedHere {
						t.Errorf("%s (not hosting %s): where %s answered owner %q code %q, want %s", s.Addr(), typ, key, owner, code, adminapi.CodeTypeNotHostedHere)
					}
					continue
				}
				want := system.OwnerOf(s, typ, key)
				if strings.HasPrefix(want, "error: ") {
					want = "" // the router refuses it: no owner
				}
				if code != "" || owner != want {
					t.Errorf("%s: where %s/%s = owner %q (code %q), the router sends it to %q", s.Addr(), typ, key, owner, code, want)
				}
			}
		}
	}
	// The error names the members that host the type.
	_, b, err := fetch(c, "http://"+systems[0].AdminAddr()+"/api/v1/placement/where?type=whrep&key=k", "")
	var e adminapi.ErrorResponse
	if err != nil || json.Unmarshal(b, &e) != nil || !slices.Equal(e.Error.Hosts, hostsOf("whrep")) {
		t.Errorf("where of whrep on a member not hosting it: %s (%v), want hosts %v", b, err, hostsOf("whrep"))
	}
	// A pinned key that names no member: the router refuses it, and so
	// does where.
	if _, code := whereOwner(t, c, systems[2], "whpin", "nokeyslash"); code != adminapi.CodeBadParameter {
		t.Errorf("where of a pinned key naming no member answered code %q, want %s", code, adminapi.CodeBadParameter)
	}
	if got := system.OwnerOf(systems[2], "whpin", "nokeyslash"); !strings.Contains(got, "names no member") {
		t.Errorf("the router places a pinned key naming no member at %q, want it refused", got)
	}
}

// A client computes its placement version from its own view: once the
// members agree after a join, it reports theirs, long before its
// SyncInterval (the members push their lists when they change).
func TestAClientsPlacementVersionIsTheAPIsAfterAJoin(t *testing.T) {
	def := counterDef("pvcounter", nil)
	systems := systemtest.StartCluster(t, 2, func(_ int, cfg *system.Config) { apiOn(cfg) }, def)
	cl, err := client.New(systemtest.Ctx(t), client.Config{ClusterName: "test", Seeds: []string{systems[0].Addr()}, SyncInterval: time.Hour})
	if err != nil {
		t.Fatalf("client.New: %v", err)
	}
	defer cl.Close()
	c := httpClient(t, nil)
	before := agreedVersion(t, c, systems, 2)
	systemtest.WaitUntil(t, "the client's placement version is the members' "+before, func() bool { return cl.PlacementVersion() == before })
	joined := systemtest.Join(t, []string{systems[0].Addr()}, apiOn, def)
	after := agreedVersion(t, c, append(systems, joined), 3)
	if after == before {
		t.Fatalf("the placement version stayed %s after a join, want another", after)
	}
	systemtest.WaitUntil(t, "the client's placement version is the members' "+after, func() bool { return cl.PlacementVersion() == after })
}

// After a member crashes, the survivors agree on a new placement version
// once they find it dead.
func TestTheAPIsPlacementVersionMovesWhenAMemberCrashes(t *testing.T) {
	var victim systemtest.Net
	def := counterDef("crashcounter", nil)
	systems := systemtest.StartCluster(t, 3, func(i int, cfg *system.Config) {
		apiOn(cfg)
		if i == 2 {
			victim.Attach(t, cfg)
		}
	}, def)
	c := httpClient(t, nil)
	before := agreedVersion(t, c, systems, 3)
	systemtest.Crash(systems[2], &victim)
	systemtest.Await(t, func() error {
		var versions []string
		for _, s := range systems[:2] {
			var st adminapi.StatusResponse
			if err := apiGet(c, s, "/api/v1/status", &st); err != nil {
				return err
			}
			if st.Cluster.MembersByStatus["alive"] != 2 || st.Cluster.MembersByStatus["suspect"] != 0 {
				return fmt.Errorf("%s counts %v, want 2 alive and none suspect", s.Addr(), st.Cluster.MembersByStatus)
			}
			versions = append(versions, st.PlacementVersion)
		}
		if versions[0] != versions[1] || versions[0] == before || versions[0] == "" {
			return fmt.Errorf("survivors' placement versions %v (before the crash %s), want one new version on both", versions, before)
		}
		return nil
	})
}

// membersOf fetches s's /api/v1/members?query and returns the
// addresses, in the answer's order.
func membersOf(c *http.Client, s *system.System, query string) ([]string, error) {
	var mr adminapi.MembersResponse
	if err := apiGet(c, s, "/api/v1/members?"+query, &mr); err != nil {
		return nil, err
	}
	var addrs []string
	for _, m := range mr.Members {
		if m.Role != system.RecordRole {
			return nil, fmt.Errorf("?%s: %s has role %q, want %q", query, m.Address, m.Role, system.RecordRole)
		}
		addrs = append(addrs, m.Address)
	}
	return addrs, nil
}

func TestTheAPIFiltersMembersByTheRoleAndLabelsOfTheirRecords(t *testing.T) {
	store := memrecords.New(memrecords.Config{})
	t.Cleanup(func() { store.Close() }) // after the members
	zones := []string{"a", "a", "b"}
	systems := systemtest.StartCluster(t, 3, func(i int, cfg *system.Config) {
		apiOn(cfg)
		cfg.Records = store
		cfg.RecordTimings = fastRecords
		cfg.RecordLabels = map[string]string{"zone": zones[i], "host": "h" + strconv.Itoa(i)}
	})
	c := httpClient(t, nil)
	zoneA := sortedAddrs(systems[0], systems[1])
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"label=zone=a", zoneA},
		{"label=zone=b", []string{systems[2].Addr()}},
		{"label=zone=a&label=host=h1", []string{systems[1].Addr()}},
		{"label=zone=b&label=host=h1", nil},
		{"role=member&label=zone=a&status=alive", zoneA},
		{"role=member", sortedAddrs(systems...)},
		{"role=client", nil},
	} {
		for _, s := range systems { // every member reads the one store: all agree
			systemtest.Await(t, func() error {
				got, err := membersOf(c, s, tc.query)
				if err != nil {
					return err
				}
				if !slices.Equal(got, tc.want) {
					return fmt.Errorf("%s ?%s lists %v, want %v", s.Addr(), tc.query, got, tc.want)
				}
				return nil
			})
		}
	}
	code, body, err := fetch(c, "http://"+systems[0].AdminAddr()+"/api/v1/members?label=zone", "")
	if err != nil || code != http.StatusBadRequest || !strings.Contains(string(body), `"code":"bad_parameter"`) {
		t.Errorf("?label=zone answered %d %s (%v), want 400 bad_parameter", code, body, err)
	}
	store.SetUnavailable(errors.New("down for the test"))
	systemtest.Await(t, func() error {
		code, body, err := fetch(c, "http://"+systems[0].AdminAddr()+"/api/v1/members?label=zone=a", "")
		if err != nil || code != http.StatusServiceUnavailable || !strings.Contains(string(body), adminapi.CodeRecordsUnavailable) {
			return fmt.Errorf("?label=zone=a with the store down answered %d %s (%v), want 503 %s", code, body, err, adminapi.CodeRecordsUnavailable)
		}
		return nil
	})
	store.SetUnavailable(nil)
}

func TestWithTheInProcessStoreAMemberKnowsOnlyItsOwnLabels(t *testing.T) {
	systems := systemtest.StartCluster(t, 2, func(i int, cfg *system.Config) {
		apiOn(cfg)
		cfg.RecordTimings = fastRecords
		cfg.RecordLabels = map[string]string{"zone": "a"}
	})
	c := httpClient(t, nil)
	for _, s := range systems {
		// The other's record is derived from the view, which carries no
		// labels: only the member itself matches.
		systemtest.Await(t, func() error {
			got, err := membersOf(c, s, "label=zone=a")
			if err != nil {
				return err
			}
			if !slices.Equal(got, []string{s.Addr()}) {
				return fmt.Errorf("%s ?label=zone=a lists %v, want itself only", s.Addr(), got)
			}
			return nil
		})
	}
}
