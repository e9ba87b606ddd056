package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/adminapi"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

type ping struct{}

func TestTheCLIReadsARealMember(t *testing.T) {
	def := actor.Define("clipinger", func(c *actor.Context[int, ping], _ ping) error { return nil }).WithMessages(ping{})
	s := systemtest.Join(t, nil, func(cfg *system.Config) {
		cfg.Admin = &system.AdminConfig{Bind: "127.0.0.1:0", API: true, Token: "real-Token"}
		cfg.RecordLabels = map[string]string{"zone": "a"}
	}, def)
	if err := def.Ref(s, "k1").Tell(systemtest.Ctx(t), ping{}); err != nil {
		t.Fatal(err)
	}
	base := []string{"--addr", s.AdminAddr(), "--token", "real-Token"}
	code, out, errOut := troupe(append(base, "members")...)
	if code != 0 || !strings.Contains(out, s.Addr()) || !strings.Contains(out, "alive") || !strings.Contains(out, "clipinger") {
		t.Errorf("members exited %d with\n%s%s\nwant this member alive, hosting clipinger", code, out, errOut)
	}
	systemtest.Await(t, func() error { // once its first heartbeat put its record
		code, out, errOut := troupe(append(base, "members", "--role", "member", "--label", "zone=a")...)
		if code != 0 || !strings.Contains(out, s.Addr()) {
			return fmt.Errorf("members --role member --label zone=a exited %d with\n%s%s\nwant this member", code, out, errOut)
		}
		return nil
	})
	if code, out, errOut := troupe(append(base, "members", "--label", "zone=b")...); code != 0 || strings.Contains(out, s.Addr()) {
		t.Errorf("members --label zone=b exited %d with\n%s%s\nwant no member", code, out, errOut)
	}
	code, out, errOut = troupe(append(base, "--json", "where", "clipinger", "k1")...)
	var wr adminapi.WhereResponse
	if code != 0 || json.Unmarshal([]byte(out), &wr) != nil || wr.Owner != s.Addr() {
		t.Errorf("where exited %d with %s %s, want %s owning k1", code, out, errOut, s.Addr())
	}
	systemtest.Await(t, func() error {
		var tr adminapi.TypesResponse
		code, out, errOut := troupe(append(base, "--json", "types")...)
		if code != 0 || json.Unmarshal([]byte(out), &tr) != nil || len(tr.Types) != 1 || tr.Types[0].Activations != 1 {
			return fmt.Errorf("types exited %d with %s%s, want clipinger with 1 activation", code, out, errOut)
		}
		return nil
	})
	if code, out, errOut = troupe(append(base, "status")...); code != 0 || !strings.Contains(out, "READY") || !strings.Contains(out, s.Addr()) {
		t.Errorf("status exited %d with\n%s%s", code, out, errOut)
	}
	systemtest.Await(t, func() error {
		code, out, errOut := troupe(append(base, "records")...)
		if code != 0 || !strings.Contains(out, s.Addr()+" (self)") || !strings.Contains(out, "healthy") || !strings.Contains(out, "membership store") {
			return fmt.Errorf("records exited %d with\n%s%s\nwant this member's own record, healthy, from the membership store", code, out, errOut)
		}
		return nil
	})
}
