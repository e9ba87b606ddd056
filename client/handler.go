package client

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/troupe-go/troupe/internal/probe"
)

// Handler returns the client's probes and metrics as an http.Handler for
// the process's own server to mount (a client opens no listener):
//
//   - GET /healthz answers 200 "ok" while the process can answer;
//   - GET /readyz answers 200 when the client is ready (see Ready), 503
//     otherwise, with a JSON body in the shape of a member's /readyz:
//     {"ready": bool, "checks": [{"name", "ok", "cause", "reason"}]},
//     checks ReadyCheckOpen (cause "closed") and ReadyCheckMemberAlive
//     (cause "no_alive_member");
//   - GET /metrics serves Config.Metrics in Prometheus's formats when it
//     is also a prometheus.Gatherer (a *prometheus.Registry is); without
//     one the path is not served (404).
//
// Mount it under a prefix with http.StripPrefix, behind whatever
// authentication the process's server applies:
//
//	mux.Handle("/troupe/", http.StripPrefix("/troupe", c.Handler()))
func (c *Client) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", probe.Healthz)
	mux.HandleFunc("GET /readyz", probe.Readyz(func() (bool, any) {
		r := c.readiness()
		return r.Ready, r
	}))
	if g, ok := c.cfg.Metrics.(prometheus.Gatherer); ok {
		mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	}
	return mux
}

// The client's readiness checks, in the order /readyz lists them.
const (
	// ReadyCheckOpen: Close has not been called.
	ReadyCheckOpen = "open"
	// ReadyCheckMemberAlive: the client knows a member that is alive and
	// finished joining, to route to.
	ReadyCheckMemberAlive = "member_alive"
)

// readiness is the body of the client's /readyz.
type readiness struct {
	Ready  bool    `json:"ready"`
	Checks []check `json:"checks"`
}

// check is one readiness check, named and coded as a member's are.
type check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Cause  string `json:"cause,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// readiness reports the client's checks: open, and an alive member known.
func (c *Client) readiness() readiness {
	open := check{Name: ReadyCheckOpen, OK: !c.h.Closed()}
	if !open.OK {
		open.Cause, open.Reason = "closed", "the client is closed"
	}
	alive := check{Name: ReadyCheckMemberAlive, OK: aliveIn(c.Members())}
	if !alive.OK {
		alive.Cause, alive.Reason = "no_alive_member", "the client knows no alive member that finished joining"
	}
	return readiness{Ready: open.OK && alive.OK, Checks: []check{open, alive}}
}
