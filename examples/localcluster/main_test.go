package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/troupe-go/troupe/system"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestLocalClusterMovesTheKeysOfAMemberThatLeaves(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	o, err := runCluster(ctx, &out, nil)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	nodes := map[string]bool{}
	for _, n := range o.served {
		nodes[n] = true
	}
	if len(o.served) != len(keys) || len(nodes) < 2 {
		t.Errorf("before the leave, %d keys were served by %d members; want all %d keys spread over several members",
			len(o.served), len(nodes), len(keys))
	}
	for key, n := range o.served {
		if n != o.left {
			continue
		}
		to, ok := o.movedTo[key]
		if !ok || to == o.left || !slices.Contains(o.members, to) {
			t.Errorf("%s, served by %s which left, was then served by %q; want another member", key, o.left, to)
		}
	}
	for _, want := range []string{"left the cluster", "keys moved", "stayed put with their counts"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q; got:\n%s", want, out.String())
		}
	}
	t.Logf("\n%s", out.String())
}

func TestEveryMembersAdminListenerAnswersReady(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	held := false
	o, err := runCluster(ctx, &out, func(survivors []*system.System) {
		held = true
		// The survivors still answer while the example holds them.
		for _, s := range survivors {
			if code, err := readyz(ctx, s.AdminAddr()); err != nil || code != 200 {
				t.Errorf("survivor %s's /readyz answered %d (%v) while held, want 200", s.Addr(), code, err)
			}
			tr := &http.Transport{}
			resp, err := (&http.Client{Transport: tr}).Get("http://" + s.AdminAddr() + "/api/v1/members")
			if err != nil {
				t.Errorf("survivor %s's API: %v", s.Addr(), err)
				continue
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			tr.CloseIdleConnections()
			if resp.StatusCode != 200 || !strings.Contains(string(body), s.Addr()) {
				t.Errorf("survivor %s's /api/v1/members answered %d %s, want 200 listing it", s.Addr(), resp.StatusCode, body)
			}
			resp, err = (&http.Client{Transport: tr}).Get("http://" + s.AdminAddr() + "/")
			if err != nil {
				t.Errorf("survivor %s's UI: %v", s.Addr(), err)
				continue
			}
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			tr.CloseIdleConnections()
			if resp.StatusCode != 200 || !strings.Contains(string(body), `<table id="members">`) {
				t.Errorf("survivor %s's UI answered %d %s, want 200 with the page", s.Addr(), resp.StatusCode, body)
			}
		}
	})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if !held {
		t.Error("hold was not called")
	}
	if len(o.readyz) != 3 {
		t.Fatalf("%d members answered /readyz, want 3", len(o.readyz))
	}
	for i, code := range o.readyz {
		if code != 200 {
			t.Errorf("member %s's /readyz answered %d, want 200", o.members[i], code)
		}
		if want := "UI, for a browser: http://" + o.admins[i] + "/\n"; !strings.Contains(out.String(), want) {
			t.Errorf("output lacks the UI's URL %q", want)
		}
		for _, path := range []string{"/metrics", "/api/v1/status"} {
			if want := "http://" + o.admins[i] + path; !strings.Contains(out.String(), want) {
				t.Errorf("output lacks %s", want)
			}
		}
	}
}
