package system_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

// uiOn switches on the API and the UI over it on a free loopback port.
func uiOn(cfg *system.Config) {
	cfg.Admin = &system.AdminConfig{Bind: "127.0.0.1:0", API: true, UI: true}
}

// getUI sends GET url with the Authorization header auth (none if
// empty) and returns the response and its body, failing the test if
// there is none.
func getUI(t *testing.T, c *http.Client, url, auth string) (*http.Response, string) {
	t.Helper()
	var h http.Header
	if auth != "" {
		h = systemtest.Header("Authorization", auth)
	}
	resp, b, err := systemtest.Get(t.Context(), c, url, h)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp, string(b)
}

func TestTheUIServesItsPageAndAssetsWithTheirTypesAndASelfOnlyPolicy(t *testing.T) {
	cfg := system.Config{}
	uiOn(&cfg)
	s := newStandalone(t, cfg, counterDef("uipage", nil))
	c := httpClient(t, nil)
	base := "http://" + s.AdminAddr()
	resp, page := getUI(t, c, base+"/", "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, `<table id="members">`) || !strings.Contains(page, `src="ui/ui.js"`) {
		t.Errorf("GET / answered %d, want 200 with the page (its members table and script); got:\n%s", resp.StatusCode, page)
	}
	csp := resp.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
		t.Errorf("GET / Content-Security-Policy %q, want this origin's script only, nothing inline", csp)
	}
	for path, ctype := range map[string]string{
		"/":          "text/html; charset=utf-8",
		"/ui/ui.js":  "text/javascript; charset=utf-8",
		"/ui/ui.css": "text/css; charset=utf-8",
	} {
		resp, body := getUI(t, c, base+path, "")
		if resp.StatusCode != http.StatusOK || body == "" || resp.Header.Get("Content-Type") != ctype {
			t.Errorf("GET %s answered %d, %d bytes of %q; want 200 with %s", path, resp.StatusCode, len(body), resp.Header.Get("Content-Type"), ctype)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Content-Security-Policy") != csp {
			t.Errorf("GET %s: nosniff %q, policy %q; want nosniff and the page's policy", path,
				resp.Header.Get("X-Content-Type-Options"), resp.Header.Get("Content-Security-Policy"))
		}
	}
	if resp, _ := getUI(t, c, base+"/api/v1/status", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("the API the page reads answered %d, want 200", resp.StatusCode)
	}
}

func TestWithTheUIOffTheRootIs404(t *testing.T) {
	cfg := system.Config{}
	apiOn(&cfg)
	s := newStandalone(t, cfg, counterDef("uioff", nil))
	c := httpClient(t, nil)
	for _, p := range []string{"/", "/ui/ui.js"} {
		if resp, _ := getUI(t, c, "http://"+s.AdminAddr()+p, ""); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s answered %d with the UI off, want 404", p, resp.StatusCode)
		}
	}
}

func TestTheUIIsBehindTheTokenLikeEveryPath(t *testing.T) {
	const token = "ui-Token.5"
	cfg := system.Config{}
	uiOn(&cfg)
	cfg.Admin.Token = token
	s := newStandalone(t, cfg, counterDef("uitok", nil))
	c := httpClient(t, nil)
	for _, p := range []string{"/", "/ui/ui.js"} {
		if resp, body := getUI(t, c, "http://"+s.AdminAddr()+p, ""); resp.StatusCode != http.StatusUnauthorized || strings.Contains(body, "<html") {
			t.Errorf("GET %s without the token answered %d, want 401 and no page", p, resp.StatusCode)
		}
		if resp, _ := getUI(t, c, "http://"+s.AdminAddr()+p, "Bearer "+token); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s with the token answered %d, want 200", p, resp.StatusCode)
		}
	}
}

func TestTheUIWithoutTheAPIIsRefusedNamingTheField(t *testing.T) {
	cfg := system.Config{Admin: &system.AdminConfig{Bind: "127.0.0.1:0", Health: true, UI: true}}
	err := cfg.Validate()
	if !errors.Is(err, system.ErrInvalidConfig) || !strings.Contains(fmt.Sprint(err), "Admin.UI") || !strings.Contains(fmt.Sprint(err), "API") {
		t.Errorf("Validate() of the UI without the API = %v, want ErrInvalidConfig naming Admin.UI and the API", err)
	}
	if s, err := system.New(cfg); !errors.Is(err, system.ErrInvalidConfig) {
		if s != nil {
			closeNow(t, s)
		}
		t.Errorf("New with the UI but not the API = %v, want ErrInvalidConfig", err)
	}
	cfg.Admin.API = true
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate() of the UI with the API = %v, want nil", err)
	}
	if s := cfg.Admin.String(); !strings.Contains(s, "UI:true") {
		t.Errorf("String() = %s, want UI:true", s)
	}
	if dump, err := json.Marshal(cfg.Admin); err != nil || !strings.Contains(string(dump), `"ui":true`) {
		t.Errorf("MarshalJSON = %s (%v), want \"ui\":true", dump, err)
	}
}
