// Package probe answers the liveness and readiness probes of a Troupe
// process, a member's admin listener or a client's handler, in one
// shape: GET /healthz says "ok" while the process can answer at all, GET
// /readyz answers 200 or 503 with a JSON body that says which check
// fails.
package probe

import (
	"encoding/json"
	"net/http"
)

// Healthz answers a liveness probe: 200 "ok".
func Healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte("ok\n"))
}

// Readyz returns a readiness probe's handler: ready reports whether the
// process is ready and the body that says why, encoded as JSON. A body
// that cannot be encoded fails the probe (fail closed: a readiness that
// cannot be told is none).
func Readyz(ready func() (bool, any)) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		ok, body := ready()
		b, err := json.MarshalIndent(body, "", "  ")
		if err != nil {
			ok, b = false, []byte(`{"ready":false}`)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if ok {
			w.WriteHeader(http.StatusOK)
		} else {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_, _ = w.Write(append(b, '\n'))
	}
}
