package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupe-go/troupe/client/idempotency"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestWebServerCountsVisitsPerPathThroughAClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	members, err := startCluster(ctx, 3)
	defer func() {
		// Closing can fail on a loaded machine (a Troupe bug, see
		// TestClosingEveryMemberInTurnSucceeds); it is not what this tests.
		if err := closeAll(members); err != nil {
			t.Logf("close the members: %v", err)
		}
	}()
	if err != nil {
		t.Fatal(err)
	}
	c, err := connect(ctx, members)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv := httptest.NewServer(Visits(c))
	defer srv.Close()

	// Visitors hit each path concurrently; every visit is counted once.
	visits := map[string]int{"/": 7, "/docs": 3, "/blog/2026/hello": 12, "/about": 1}
	var wg sync.WaitGroup
	for path, n := range visits {
		for range n {
			wg.Go(func() {
				if _, err := get(ctx, srv, path); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	for path, n := range visits {
		body, err := get(ctx, srv, path)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("%s: %d visits\n", path, n+1)
		if body != want {
			t.Errorf("GET %s = %q, want %q", path, body, want)
		}
	}
	// The counters live on the members, spread by the ring.
	active := 0
	for _, m := range members {
		active += m.Stats().Active
	}
	if active != len(visits) {
		t.Errorf("the members hold %d counters, want %d, one per path", active, len(visits))
	}
}

func get(ctx context.Context, srv *httptest.Server, path string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
	if err != nil {
		return "", err
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", path, resp.Status, body)
	}
	return string(body), nil
}

func TestADepositRetriedWithItsKeyIsCreditedOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	members, err := startCluster(ctx, 3)
	defer func() {
		if err := closeAll(members); err != nil {
			t.Logf("close the members: %v", err)
		}
	}()
	if err != nil {
		t.Fatal(err)
	}
	c, err := connect(ctx, members)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	store, err := idempotency.NewActorStore(c, idempotency.ActorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	routes, err := Routes(c, store)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(routes)
	defer srv.Close()

	deposit := func(key, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/accounts/alice/deposits", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if key != "" {
			req.Header.Set(idempotency.Header, key)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	want := `{"account":"alice","deposited":500,"balance":500}` + "\n"
	for i := range 3 {
		if code, body := deposit("dep-1", `{"amount":500}`); code != http.StatusCreated || body != want {
			t.Fatalf("attempt %d: %d %q, want 201 %q", i, code, body, want)
		}
	}
	if code, _ := deposit("dep-1", `{"amount":900}`); code != http.StatusConflict {
		t.Fatalf("the same key with another amount: %d, want 409", code)
	}
	if code, _ := deposit("", `{"amount":500}`); code != http.StatusBadRequest {
		t.Fatalf("no key: %d, want 400", code)
	}
	if code, body := deposit("dep-2", `{"amount":250}`); code != http.StatusCreated || !strings.Contains(body, `"balance":750`) {
		t.Fatalf("a second deposit: %d %q, want the balance 750", code, body)
	}
}
