package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

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
