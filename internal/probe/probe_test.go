package probe

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestReadyzAnswersTheBodyAndItsStatus(t *testing.T) {
	for _, c := range []struct {
		name  string
		ready bool
		body  any
		code  int
		want  string
	}{
		{"ready", true, map[string]bool{"ready": true}, http.StatusOK, "{\n  \"ready\": true\n}\n"},
		{"not ready", false, map[string]bool{"ready": false}, http.StatusServiceUnavailable, "{\n  \"ready\": false\n}\n"},
		// A body that cannot be told fails the probe, whatever ready said.
		{"unencodable", true, map[string]any{"f": func() {}}, http.StatusServiceUnavailable, "{\"ready\":false}\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			Readyz(func() (bool, any) { return c.ready, c.body })(w, httptest.NewRequest("GET", "/readyz", nil))
			if w.Code != c.code || w.Body.String() != c.want {
				t.Fatalf("got %d %q, want %d %q", w.Code, w.Body.String(), c.code, c.want)
			}
			if ct := w.Header().Get("Content-Type"); ct != "application/json" {
				t.Fatalf("Content-Type %q", ct)
			}
		})
	}
}

func TestHealthzSaysOK(t *testing.T) {
	w := httptest.NewRecorder()
	Healthz(w, httptest.NewRequest("GET", "/healthz", nil))
	if w.Code != http.StatusOK || w.Body.String() != "ok\n" {
		t.Fatalf("got %d %q", w.Code, w.Body.String())
	}
}
