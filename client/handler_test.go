package client_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/troupe-go/troupe/client"
	"github.com/troupe-go/troupe/internal/systemtest"
)

// readyBody is the JSON body of a client's /readyz.
type readyBody struct {
	Ready  bool `json:"ready"`
	Checks []struct {
		Name  string `json:"name"`
		OK    bool   `json:"ok"`
		Cause string `json:"cause"`
	} `json:"checks"`
}

// getPath fetches path from srv and returns its status and body.
func getPath(t *testing.T, srv *httptest.Server, path string) (int, []byte) {
	t.Helper()
	resp, body, err := systemtest.Get(systemtest.Ctx(t), srv.Client(), srv.URL+path, nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, body
}

// readyz fetches /troupe/readyz and decodes its body.
func readyz(t *testing.T, srv *httptest.Server) (int, readyBody) {
	t.Helper()
	code, body := getPath(t, srv, "/troupe/readyz")
	var rb readyBody
	if err := json.Unmarshal(body, &rb); err != nil {
		t.Fatalf("/readyz body %q: %v", body, err)
	}
	return code, rb
}

// The handler a process mounts serves the client's probes and metrics
// under the prefix it chose: ready while open with a member alive, 503
// with the failing check's cause once closed.
func TestAClientsHandlerServesItsProbesAndMetrics(t *testing.T) {
	systems := systemtest.StartCluster(t, 1, nil, Counter)
	c, _ := newMeteredClient(t, systems[0].Addr())
	mux := http.NewServeMux()
	mux.Handle("/troupe/", http.StripPrefix("/troupe", c.Handler()))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	if code, body := getPath(t, srv, "/troupe/healthz"); code != http.StatusOK || string(body) != "ok\n" {
		t.Fatalf("/healthz: %d %q, want 200 ok", code, body)
	}
	code, rb := readyz(t, srv)
	if code != http.StatusOK || !rb.Ready || len(rb.Checks) != 2 || !rb.Checks[0].OK || !rb.Checks[1].OK {
		t.Fatalf("/readyz of an open client that knows a member: %d %+v, want 200, both checks passing", code, rb)
	}
	code, body := getPath(t, srv, "/troupe/metrics")
	if code != http.StatusOK || !strings.Contains(string(body), "troupe_ready 1") || !strings.Contains(string(body), "troupe_members{") {
		t.Fatalf("/metrics: %d, want 200 with troupe_ready 1 and troupe_members:\n%s", code, body)
	}
	if code, _ := getPath(t, srv, "/troupe/api/v1/status"); code != http.StatusNotFound {
		t.Fatalf("/api/v1/status on a client: %d, want 404 (a client serves no API)", code)
	}

	c.Close()
	code, rb = readyz(t, srv)
	if code != http.StatusServiceUnavailable || rb.Ready || rb.Checks[0].Name != client.ReadyCheckOpen || rb.Checks[0].OK || rb.Checks[0].Cause != "closed" {
		t.Fatalf("/readyz of a closed client: %d %+v, want 503 with open failing, cause closed", code, rb)
	}
	if code, _ := getPath(t, srv, "/troupe/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz of a closed client: %d, want 200 (the process still answers)", code)
	}
}

// Without a Gatherer the handler does not serve /metrics, it serves GET
// only, and a client whose only member left is not ready, saying why.
func TestAClientsHandlerWithoutMetricsOrMembers(t *testing.T) {
	systems := systemtest.StartCluster(t, 1, nil, Counter)
	c, err := client.New(systemtest.Ctx(t), client.Config{ClusterName: "test", Seeds: []string{systems[0].Addr()}, SyncInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv := httptest.NewServer(http.StripPrefix("/troupe", c.Handler()))
	defer srv.Close()
	if code, _ := getPath(t, srv, "/troupe/metrics"); code != http.StatusNotFound {
		t.Fatalf("/metrics without Config.Metrics: %d, want 404", code)
	}
	resp, err := srv.Client().Post(srv.URL+"/troupe/readyz", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST /readyz: %d, want 405", resp.StatusCode)
	}
	systems[0].Close(systemtest.Ctx(t)) // it leaves: its last list says so
	systemtest.WaitUntil(t, "the client to see its only member gone and answer 503 member_alive", func() bool {
		code, rb := readyz(t, srv)
		return code == http.StatusServiceUnavailable && len(rb.Checks) == 2 && rb.Checks[0].OK &&
			!rb.Checks[1].OK && rb.Checks[1].Cause == "no_alive_member"
	})
}
