package system_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/adminapi"
	"github.com/troupe-go/troupe/internal/memrecords"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/noderecord"
	"github.com/troupe-go/troupe/system"
)

// fastRecords are record timings for tests: a heartbeat every 50 ms.
var fastRecords = noderecord.Timings{Heartbeat: 50 * time.Millisecond, UnhealthyAfter: 3 * time.Second, LeaseTTL: 6 * time.Second}

// recordsOf fetches s's /api/v1/records.
func recordsOf(c *http.Client, s *system.System) (adminapi.RecordsResponse, error) {
	var rr adminapi.RecordsResponse
	err := apiGet(c, s, "/api/v1/records", &rr)
	return rr, err
}

// nodesOf returns the nodes of rr's records, in its order.
func nodesOf(rr adminapi.RecordsResponse) []string {
	var out []string
	for _, r := range rr.Records {
		out = append(out, r.Node)
	}
	return out
}

func sortedAddrs(systems ...*system.System) []string {
	var addrs []string
	for _, s := range systems {
		addrs = append(addrs, s.Addr())
	}
	slices.Sort(addrs)
	return addrs
}

// checkOwn checks the record s publishes of itself.
func checkOwn(s *system.System, r adminapi.NodeRecord) error {
	switch {
	case r.Cluster != "test" || r.Role != system.RecordRole || r.DataAddr != s.Addr():
		return fmt.Errorf("%s: own record is %s/%s/%s at %q", s.Addr(), r.Cluster, r.Role, r.Node, r.DataAddr)
	case r.AdminAddr != s.AdminAddr() || r.BuildVersion == "" || r.StartTime == "" || r.Incarnation == "":
		return fmt.Errorf("%s: own record lacks a field: %+v", s.Addr(), r)
	case r.Health != "healthy" || r.ReportedHealth != "healthy" || !r.Ready:
		return fmt.Errorf("%s: own record says %s (reported %s), ready %t; want healthy and ready", s.Addr(), r.Health, r.ReportedHealth, r.Ready)
	case r.Source != adminapi.SourcePublished:
		return fmt.Errorf("%s: own record's source is %q", s.Addr(), r.Source)
	}
	return nil
}

func TestEveryMemberShowsThreeRecordsWithRisingHeartbeatsAndDropsAClosedOne(t *testing.T) {
	systems := systemtest.StartCluster(t, 3, func(_ int, cfg *system.Config) {
		apiOn(cfg)
		cfg.RecordTimings = fastRecords
	})
	addrs := sortedAddrs(systems...)
	c := httpClient(t, nil)
	first := make([]map[string]uint64, len(systems))
	for i, s := range systems {
		systemtest.Await(t, func() error {
			rr, err := recordsOf(c, s)
			if err != nil {
				return err
			}
			if !slices.Equal(nodesOf(rr), addrs) || rr.Store != adminapi.StoreMembership || rr.Revision == "" {
				return fmt.Errorf("%s shows records of %v in store %q at revision %q, want %v in %q", s.Addr(), nodesOf(rr), rr.Store, rr.Revision, addrs, adminapi.StoreMembership)
			}
			first[i] = map[string]uint64{}
			for _, r := range rr.Records {
				first[i][r.Node] = r.Seq
				if r.Self != (r.Node == s.Addr()) {
					return fmt.Errorf("%s: self is %t on %s", s.Addr(), r.Self, r.Node)
				}
				if r.Self {
					if err := checkOwn(s, r); err != nil {
						return err
					}
				} else if r.Source != adminapi.SourceMembership || !r.Ready || r.Health != "healthy" {
					return fmt.Errorf("%s: record of %s is %s, %s, ready %t; want from membership, healthy and ready", s.Addr(), r.Node, r.Source, r.Health, r.Ready)
				}
			}
			return nil
		})
	}
	// Each record's heartbeat sequence goes on rising, on every member.
	for i, s := range systems {
		systemtest.Await(t, func() error {
			rr, err := recordsOf(c, s)
			if err != nil {
				return err
			}
			for _, r := range rr.Records {
				if r.Seq <= first[i][r.Node] {
					return fmt.Errorf("%s: the record of %s is still at sequence %d, first seen at %d", s.Addr(), r.Node, r.Seq, first[i][r.Node])
				}
			}
			return nil
		})
	}
	// A member that closes leaves, and its record goes from the others'.
	closed := systems[2]
	ctx, cancel := context.WithTimeout(context.Background(), systemtest.Limit)
	defer cancel()
	if err := closed.Close(ctx); err != nil {
		t.Fatalf("close %s: %v", closed.Addr(), err)
	}
	rest := sortedAddrs(systems[:2]...)
	for _, s := range systems[:2] {
		systemtest.Await(t, func() error {
			rr, err := recordsOf(c, s)
			if err != nil {
				return err
			}
			if !slices.Equal(nodesOf(rr), rest) {
				return fmt.Errorf("%s shows records of %v after %s closed, want %v", s.Addr(), nodesOf(rr), closed.Addr(), rest)
			}
			return nil
		})
	}
}

func TestRecordsFailClosedWhileTheSharedStoreIsUnavailableAndRecover(t *testing.T) {
	store := memrecords.New(memrecords.Config{})
	t.Cleanup(func() { store.Close() }) // after the members: cleanups run last first
	systems := systemtest.StartCluster(t, 3, func(_ int, cfg *system.Config) {
		cfg.Admin = &system.AdminConfig{Bind: "127.0.0.1:0", API: true, Health: true}
		cfg.Records = store
		cfg.RecordTimings = fastRecords
	})
	addrs := sortedAddrs(systems...)
	c := httpClient(t, nil)
	// Every member reads the one store: each sees what all three
	// published themselves.
	for _, s := range systems {
		systemtest.Await(t, func() error {
			rr, err := recordsOf(c, s)
			if err != nil {
				return err
			}
			if !slices.Equal(nodesOf(rr), addrs) || rr.Store != adminapi.StoreExternal {
				return fmt.Errorf("%s shows records of %v in store %q, want %v in %q", s.Addr(), nodesOf(rr), rr.Store, addrs, adminapi.StoreExternal)
			}
			for _, r := range rr.Records {
				for _, o := range systems {
					if o.Addr() == r.Node {
						if err := checkOwn(o, r); err != nil {
							return fmt.Errorf("as %s reads it: %w", s.Addr(), err)
						}
					}
				}
			}
			return nil
		})
		awaitReadyz(t, c, s.AdminAddr(), http.StatusOK)
	}

	store.SetUnavailable(errors.New("the test took it down"))
	for _, s := range systems {
		r := awaitReadyz(t, c, s.AdminAddr(), http.StatusServiceUnavailable, system.ReadyCheckRecords)
		if !slices.Contains(checkNames(r), system.ReadyCheckRecords) {
			t.Fatalf("%s: /readyz lists %v", s.Addr(), checkNames(r))
		}
		code, body, err := fetch(c, "http://"+s.AdminAddr()+"/api/v1/records", "")
		if err != nil {
			t.Fatal(err)
		}
		if code != http.StatusServiceUnavailable || !strings.Contains(string(body), `"code":"`+adminapi.CodeRecordsUnavailable+`"`) {
			t.Fatalf("%s: /api/v1/records answered %d %s while the store is unavailable, want 503 %s", s.Addr(), code, body, adminapi.CodeRecordsUnavailable)
		}
		if strings.Contains(string(body), "the test took it down") {
			t.Fatalf("%s: the 503 repeats the store's error: %s", s.Addr(), body)
		}
	}

	store.SetUnavailable(nil)
	for _, s := range systems {
		awaitReadyz(t, c, s.AdminAddr(), http.StatusOK)
		if rr, err := recordsOf(c, s); err != nil || !slices.Equal(nodesOf(rr), addrs) {
			t.Fatalf("%s: after the store came back: records of %v, %v; want %v", s.Addr(), nodesOf(rr), err, addrs)
		}
	}

	// A member that closes removes its own record on the way out.
	closed := systems[2]
	ctx, cancel := context.WithTimeout(context.Background(), systemtest.Limit)
	defer cancel()
	if err := closed.Close(ctx); err != nil {
		t.Fatalf("close %s: %v", closed.Addr(), err)
	}
	snap, err := store.Snapshot(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, r := range snap.Records {
		left = append(left, r.Node)
	}
	if want := sortedAddrs(systems[:2]...); !slices.Equal(left, want) {
		t.Fatalf("the store holds records of %v once %s closed, want %v", left, closed.Addr(), want)
	}
}

func TestRecordConfigValidateNamesTheBadField(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   system.Config
		field string
	}{
		{"timings out of order", system.Config{RecordTimings: noderecord.Timings{Heartbeat: time.Minute}}, "RecordTimings"},
		{"a store without a cluster", system.Config{Records: memrecords.New(memrecords.Config{})}, "Records"},
		{"labels without a cluster", system.Config{RecordLabels: map[string]string{"zone": "a"}}, "RecordLabels"},
		{"a label key too long", system.Config{Cluster: &cluster.Config{}, RecordLabels: map[string]string{strings.Repeat("k", 64): "a"}}, "RecordLabels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if !errors.Is(err, system.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("Validate() = %v, want ErrInvalidConfig naming %s", err, tc.field)
			}
		})
	}
}
