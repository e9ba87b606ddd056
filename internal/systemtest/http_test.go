package systemtest_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/troupe-go/troupe/internal/systemtest"
)

func TestGetSendsTheHeadersAndReturnsTheWholeBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
		_, _ = io.WriteString(w, r.Method+" "+r.Header.Get("Authorization")+" "+r.Header.Get("X-Forwarded-User"))
	}))
	t.Cleanup(srv.Close)
	c := srv.Client()
	resp, body, err := systemtest.Get(t.Context(), c, srv.URL, systemtest.Header("Authorization", "Bearer t", "X-Forwarded-User", "alice"))
	if err != nil || resp.StatusCode != http.StatusTeapot || string(body) != "GET Bearer t alice" {
		t.Errorf("Get = %v, %q, %v; want 418 and the method and headers echoed", resp, body, err)
	}
	if _, _, err := systemtest.Get(t.Context(), c, "http://127.0.0.1:1/", nil); err == nil {
		t.Error("Get of a closed port succeeded, want an error")
	}
}
