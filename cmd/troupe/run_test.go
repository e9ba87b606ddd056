package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/admin"
	"github.com/troupe-go/troupe/internal/adminapi"
	"github.com/troupe-go/troupe/noderecord"
	"github.com/troupe-go/troupe/ring"
	"github.com/troupe-go/troupe/system"
)

// fakeSource is a member at 10.0.0.2 that sees three members.
type fakeSource struct {
	records   []cluster.Member
	clustered bool
	// labels are the labels of the members' node records, by address.
	labels map[string]map[string]string
}

func (f *fakeSource) Node() adminapi.Node {
	return adminapi.Node{Addr: "10.0.0.2:7400", Started: time.Now().Add(-time.Hour), BuildVersion: "v0.9.0", Role: system.RecordRole}
}

func (f *fakeSource) Readiness() (bool, []adminapi.Check) {
	return true, []adminapi.Check{{Name: "joined", OK: true}, {Name: "majority", OK: true}}
}

func (f *fakeSource) View() (adminapi.View, bool) {
	if !f.clustered {
		return adminapi.View{}, false
	}
	var ids []ring.NodeID
	for _, m := range f.records {
		if m.Status != cluster.StatusLeft && !m.Joining {
			ids = append(ids, m.ID)
		}
	}
	return adminapi.View{Self: ring.NodeID{Addr: "10.0.0.2:7400", Incarnation: 2}, Owning: true,
		Records: f.records, Rings: map[string]*ring.Ring{"cart": ring.New(ids)}}, true
}

func (f *fakeSource) Definitions() []adminapi.Definition {
	return []adminapi.Definition{{Name: "cart", Replicas: 2}}
}

func (f *fakeSource) Counts() []adminapi.Count {
	return []adminapi.Count{{Name: "cart", Activations: 12, Queued: 1}}
}

func (f *fakeSource) Records(context.Context) (adminapi.Records, bool, error) {
	if !f.clustered {
		return adminapi.Records{}, false, nil
	}
	var snap noderecord.Snapshot
	for _, m := range f.records {
		snap.Records = append(snap.Records, noderecord.Record{Cluster: "c", Role: system.RecordRole, Node: m.ID.Addr,
			Incarnation: strconv.FormatUint(m.ID.Incarnation, 10), Labels: f.labels[m.ID.Addr]})
	}
	return adminapi.Records{Snapshot: snap, Self: noderecord.Key{Cluster: "c", Role: system.RecordRole, Node: "10.0.0.2:7400"}}, true, nil
}

func cluster3() *fakeSource {
	f := &fakeSource{clustered: true}
	for i, st := range []cluster.Status{cluster.StatusAlive, cluster.StatusAlive, cluster.StatusSuspect} {
		f.records = append(f.records, cluster.Member{ID: ring.NodeID{Addr: fmt.Sprintf("10.0.0.%d:7400", i+1), Incarnation: uint64(i + 1)},
			Status: st, ActorTypes: []string{"cart"}})
	}
	return f
}

// serveAPI runs an admin listener serving src's API on loopback (with o's
// token and TLS), closed when the test ends, and returns its address.
func serveAPI(t *testing.T, src adminapi.Source, o admin.Options) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o.Listener, o.API = ln, adminapi.New(src, adminapi.Options{})
	s := admin.Serve(o)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Close(ctx)
	})
	return s.Addr().String()
}

// troupe runs the CLI with args and returns its exit status, stdout and
// stderr.
func troupe(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// columnsAligned reports whether every line of a table starts its
// second column at the same offset (tabwriter's alignment).
func columnsAligned(lines []string) bool {
	at := -1
	for _, l := range lines {
		i := strings.Index(l, "  ")
		if i < 0 {
			return false
		}
		j := i + len(l[i:]) - len(strings.TrimLeft(l[i:], " "))
		if at >= 0 && j != at {
			return false
		}
		at = j
	}
	return true
}

func lines(s string) []string { return strings.Split(strings.TrimRight(s, "\n"), "\n") }

func TestStatusPrintsTheMemberAsAnAlignedTable(t *testing.T) {
	addr := serveAPI(t, cluster3(), admin.Options{})
	code, out, errOut := troupe("--addr", addr, "status")
	if code != 0 {
		t.Fatalf("status exited %d: %s", code, errOut)
	}
	for _, want := range []string{"ADDRESS", "10.0.0.2:7400", "NODE", "10.0.0.2:7400#2", "READY", "yes", "joined ok", "MEMBERS", "3: alive 2, suspect 1", "PLACEMENT", "v0.9.0"} {
		if !strings.Contains(out, want) {
			t.Errorf("status output lacks %q:\n%s", want, out)
		}
	}
	if !columnsAligned(lines(out)) {
		t.Errorf("the values do not start in one column:\n%s", out)
	}
}

func TestJSONPrintsTheAPIsAnswerAsItCame(t *testing.T) {
	addr := serveAPI(t, cluster3(), admin.Options{})
	for _, cmd := range [][]string{{"status"}, {"placement"}, {"types"}, {"where", "cart", "k1"}, {"members"}} {
		code, out, errOut := troupe(append([]string{"--addr", addr, "--json"}, cmd...)...)
		var m map[string]any
		if code != 0 || json.Unmarshal([]byte(out), &m) != nil || m["schema_version"] != 1.0 {
			t.Errorf("%v --json exited %d with %q (%s), want the API's JSON document", cmd, code, out, errOut)
		}
	}
}

func TestFlagsMayFollowTheCommandAndItsArguments(t *testing.T) {
	addr := serveAPI(t, cluster3(), admin.Options{})
	code, out, errOut := troupe("where", "cart", "k1", "--addr", addr, "--json")
	var wr adminapi.WhereResponse
	if code != 0 || json.Unmarshal([]byte(out), &wr) != nil || wr.Key != "k1" || len(wr.Replicas) != 2 {
		t.Errorf("where cart k1 --addr .. --json exited %d: %s %s; want the two replicas of k1 as JSON", code, out, errOut)
	}
	// "--" ends the flags: a key may start with a dash.
	code, out, errOut = troupe("--addr", addr, "--json", "where", "cart", "--", "-k")
	if code != 0 || json.Unmarshal([]byte(out), &wr) != nil || wr.Key != "-k" {
		t.Errorf("where cart -- -k exited %d: %s %s; want the key -k", code, out, errOut)
	}
}

func TestMembersTableListsEveryMemberAndFiltersByStatus(t *testing.T) {
	addr := serveAPI(t, cluster3(), admin.Options{})
	code, out, errOut := troupe("members", "--addr", addr)
	ls := lines(out)
	if code != 0 || len(ls) != 4 || !strings.HasPrefix(ls[0], "ADDRESS") || !strings.Contains(ls[2], "(this member)") {
		t.Fatalf("members exited %d with\n%s%s\nwant a header and three rows, the second this member", code, out, errOut)
	}
	if !columnsAligned(ls) {
		t.Errorf("the columns are not aligned:\n%s", out)
	}
	for _, l := range ls {
		if strings.TrimRight(l, " ") != l {
			t.Errorf("the line %q ends in blanks", l)
		}
	}
	code, out, _ = troupe("members", "--addr", addr, "--status", "suspect")
	if ls := lines(out); code != 0 || len(ls) != 2 || !strings.HasPrefix(ls[1], "10.0.0.3:7400") {
		t.Errorf("members --status suspect exited %d with\n%s\nwant only 10.0.0.3", code, out)
	}
	code, _, errOut = troupe("members", "--addr", addr, "--status", "sleepy")
	if code != 1 || !strings.Contains(errOut, "bad_parameter") {
		t.Errorf("members --status sleepy exited %d (%s), want 1 with the API's bad_parameter", code, errOut)
	}
}

func TestMembersFiltersByRoleAndLabelsTheServerANDs(t *testing.T) {
	f := cluster3()
	f.labels = map[string]map[string]string{
		"10.0.0.1:7400": {"zone": "a", "rack": "1"},
		"10.0.0.2:7400": {"zone": "a", "rack": "2"},
		"10.0.0.3:7400": {"zone": "b"},
	}
	addr := serveAPI(t, f, admin.Options{})
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--label", "zone=a"}, []string{"10.0.0.1:7400", "10.0.0.2:7400"}},
		{[]string{"--label", "zone=a", "--label", "rack=2"}, []string{"10.0.0.2:7400"}},
		{[]string{"--role", "member", "--label", "zone=b", "--status", "suspect"}, []string{"10.0.0.3:7400"}},
		{[]string{"--role", "member"}, []string{"10.0.0.1:7400", "10.0.0.2:7400", "10.0.0.3:7400"}},
		{[]string{"--role", "client"}, nil},
	} {
		code, out, errOut := troupe(append([]string{"members", "--addr", addr}, tc.args...)...)
		var got []string
		for _, l := range lines(out)[1:] {
			got = append(got, strings.Fields(l)[0])
		}
		if code != 0 || !slices.Equal(got, tc.want) {
			t.Errorf("members %q exited %d listing %v (%s), want %v", tc.args, code, got, errOut, tc.want)
		}
	}
	code, out, _ := troupe("members", "--addr", addr, "--json", "--label", "zone=a", "--label", "rack=1")
	var mr adminapi.MembersResponse
	if err := json.Unmarshal([]byte(out), &mr); code != 0 || err != nil || len(mr.Members) != 1 || mr.Members[0].Role != system.RecordRole {
		t.Errorf("members --json --label zone=a --label rack=1 exited %d with %s, want the one member of role %s", code, out, system.RecordRole)
	}
	code, _, errOut := troupe("members", "--addr", addr, "--role", "a/b")
	if code != 1 || !strings.Contains(errOut, "bad_parameter") {
		t.Errorf("members --role a/b exited %d (%s), want 1 with the API's bad_parameter", code, errOut)
	}
	code, _, errOut = troupe("members", "--addr", addr, "--label", "zone")
	if code != 2 || !strings.Contains(errOut, "key=value") {
		t.Errorf("members --label zone exited %d (%s), want 2 saying key=value", code, errOut)
	}
}

func TestMembersFollowsEveryPage(t *testing.T) {
	f := &fakeSource{clustered: true}
	for i := range 2500 {
		f.records = append(f.records, cluster.Member{ID: ring.NodeID{Addr: fmt.Sprintf("10.%d.%d.1:7400", i/256, i%256), Incarnation: 1},
			ActorTypes: []string{"cart"}})
	}
	addr := serveAPI(t, f, admin.Options{})
	// Three pages of 2,500 under -race on a busy machine: the default
	// timeout is an operator's, not this test's.
	code, out, errOut := troupe("members", "--addr", addr, "--timeout", "2m")
	if n := len(lines(out)) - 1; code != 0 || n != 2500 {
		t.Errorf("members exited %d with %d rows (%s), want all 2500 over three pages", code, n, errOut)
	}
	code, out, _ = troupe("members", "--addr", addr, "--json", "--timeout", "2m")
	var mr adminapi.MembersResponse
	if err := json.Unmarshal([]byte(out), &mr); err != nil {
		t.Fatalf("members --json over three pages is not one JSON document: %v", err)
	}
	if code != 0 || len(mr.Members) != 2500 || mr.Total != 2500 || mr.Next != "" || mr.SchemaVersion != adminapi.SchemaVersion {
		t.Errorf("members --json exited %d with %d members (total %d, next %q, schema %d), want one document of all 2500 and no next",
			code, len(mr.Members), mr.Total, mr.Next, mr.SchemaVersion)
	}
}

func TestMembersStopsWhenTheCursorDoesNotAdvance(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) > 10 {
			http.Error(w, "looping", http.StatusTeapot)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"schema_version":1,"mode":"cluster","members":[{"address":"a:1","incarnation":"1"}],"total":9,"next":"a1.stuck"}`)
	}))
	t.Cleanup(srv.Close)
	code, _, errOut := troupe("members", "--addr", srv.URL)
	if code != 1 || !strings.Contains(errOut, "does not advance") || requests.Load() != 2 {
		t.Errorf("members against a stuck cursor exited %d after %d requests (%s), want 1 after 2, saying the cursor does not advance",
			code, requests.Load(), errOut)
	}
}

func TestWhereOnAMemberNotHostingTheTypeNamesItsHosts(t *testing.T) {
	// cluster3's member hosts cart only; another member hosts order too.
	f := cluster3()
	f.records[0].ActorTypes = append(f.records[0].ActorTypes, "order")
	addr := serveAPI(t, f, admin.Options{})
	code, _, errOut := troupe("where", "--addr", addr, "order", "k1")
	if code != 1 || !strings.Contains(errOut, "type_not_hosted_here") || !strings.Contains(errOut, "10.0.0.1:7400") || strings.Contains(errOut, "k1") {
		t.Errorf("where of a type hosted elsewhere exited %d with %q, want 1 naming 10.0.0.1:7400 as a host, not the key", code, errOut)
	}
}

func TestAMisplacedTokenIsNeverRepeated(t *testing.T) {
	for _, args := range [][]string{{"--token", "status", "s3cr3t"}, {"status", "s3cr3t"}, {"--token", "status", "types", "s3cr3t"}} {
		code, out, errOut := troupe(args...)
		if code != 2 || strings.Contains(errOut+out, "s3cr3t") {
			t.Errorf("troupe %q exited %d with stderr %q, want 2 without repeating the argument", args, code, errOut)
		}
	}
}

func TestTheClientIgnoresProxiesFromTheEnvironment(t *testing.T) {
	t.Setenv("HTTP_PROXY", "http://proxy.invalid:3128")
	t.Setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
	c, err := newClient(&options{addr: "10.0.0.1:7401", token: "t0k"})
	if err != nil {
		t.Fatal(err)
	}
	if c.tr.Proxy != nil {
		t.Error("the transport takes a proxy from the environment: the bearer token would go to it")
	}
}

func TestPlacementAndWhereTables(t *testing.T) {
	addr := serveAPI(t, cluster3(), admin.Options{})
	code, out, errOut := troupe("placement", "--addr", addr)
	if code != 0 || !strings.Contains(out, "placement version ") || strings.Count(out, "%") != 3 || !strings.Contains(out, "cart") {
		t.Errorf("placement exited %d with\n%s%s\nwant the version and cart's three shares", code, out, errOut)
	}
	code, out, errOut = troupe("where", "--addr", addr, "cart", "k1")
	if code != 0 || !strings.Contains(out, "primary, owner") || strings.Count(out, "10.0.0.") != 2 {
		t.Errorf("where exited %d with\n%s%s\nwant two replicas, the primary owning", code, out, errOut)
	}
	code, out, _ = troupe("types", "--addr", addr)
	if code != 0 || !strings.Contains(out, "ACTIVATIONS") || !strings.Contains(out, "12") {
		t.Errorf("types exited %d with\n%s\nwant cart's 12 activations", code, out)
	}
}

func TestAStandaloneSystemIsSaidPlainly(t *testing.T) {
	addr := serveAPI(t, &fakeSource{}, admin.Options{})
	for cmd, want := range map[string]string{"members": "standalone system", "placement": "standalone system", "status": "standalone"} {
		if code, out, errOut := troupe("--addr", addr, cmd); code != 0 || !strings.Contains(out, want) {
			t.Errorf("%s exited %d with %q (%s), want it to say %q", cmd, code, out, errOut, want)
		}
	}
}

func TestBadUsageExits2(t *testing.T) {
	for _, args := range [][]string{
		{}, {"nope"}, {"status", "extra"}, {"where", "cart"}, {"where"}, {"--bogus", "status"}, {"status", "--timeout", "soon"},
		{"--addr", "nocolon", "status"}, {"--addr", "ftp://h:1", "status"}, {"--token", "two words", "status"},
		{"--tls-cert", "c.pem", "status"}, {"--addr", "http://127.0.0.1:1", "--tls-ca", "x", "status"},
		{"--token", "two-words", "status", "--bogus"}, {"--token", "two-words", "members", "--status"},
		{"members", "--label", "two-words"}, {"members", "--label", "=two-words"},
		{"status", "--timeout", "0s"}, {"--timeout", "-1s", "status"},
		{"--addr", "http://127.0.0.1:1/?x=1", "status"}, {"--addr", "http://127.0.0.1:1/#frag", "status"}, {"--addr", "http://127.0.0.1:1/?", "status"},
	} {
		code, out, errOut := troupe(args...)
		if code != 2 || !strings.Contains(errOut, "usage:") || out != "" {
			t.Errorf("troupe %q exited %d with stderr %q, want 2 with the usage", args, code, errOut)
		}
		if strings.Contains(errOut, "two words") || strings.Contains(errOut, "two-words") {
			t.Errorf("troupe %q: the error repeats the token", args)
		}
	}
	if code, out, _ := troupe("-h"); code != 0 || !strings.Contains(out, "usage:") {
		t.Errorf("troupe -h exited %d, want 0 with the usage on stdout", code)
	}
}

func TestTheTokenComesFromTheFlagOrTheEnvironmentAndIsNeverPrinted(t *testing.T) {
	const token = "cli-Secret_42"
	addr := serveAPI(t, cluster3(), admin.Options{Token: token})
	t.Setenv(tokenEnv, "")
	code, out, errOut := troupe("--addr", addr, "status")
	if code != 1 || !strings.Contains(errOut, "401") || !strings.Contains(errOut, "--token") {
		t.Errorf("without a token: exit %d, %q; want 1 saying 401 and how to pass a token", code, errOut)
	}
	code, _, errOut = troupe("--addr", addr, "--token", token+"x", "status")
	if code != 1 || !strings.Contains(errOut, "refused the token") {
		t.Errorf("a wrong token: exit %d, %q; want 1 saying it was refused", code, errOut)
	}
	if strings.Contains(errOut, token) {
		t.Errorf("the error repeats the token: %s", errOut)
	}
	if code, out, errOut = troupe("--addr", addr, "--token", token, "status"); code != 0 || strings.Contains(out+errOut, token) {
		t.Errorf("--token: exit %d (%s), want 0 and the token nowhere in the output", code, errOut)
	}
	t.Setenv(tokenEnv, token)
	if code, out, errOut = troupe("--addr", addr, "members", "--json"); code != 0 || strings.Contains(out+errOut, token) {
		t.Errorf("$%s: exit %d (%s), want 0 and the token nowhere in the output", tokenEnv, code, errOut)
	}
}

func TestA503IsReportedPlainly(t *testing.T) {
	addr := serveAPI(t, &fakeSource{clustered: true}, admin.Options{}) // no view yet: joining
	code, out, errOut := troupe("--addr", addr, "members")
	if code != 1 || out != "" || !strings.Contains(errOut, "unavailable (503)") || !strings.Contains(errOut, "joining") {
		t.Errorf("members of a joining member: exit %d, stdout %q, stderr %q; want 1 and a plain 503", code, out, errOut)
	}
}

func TestStatusSaysThereIsNoPlacementBeforeJoining(t *testing.T) {
	addr := serveAPI(t, &fakeSource{clustered: true}, admin.Options{}) // no view yet: joining
	code, out, errOut := troupe("--addr", addr, "status")
	if code != 0 || !strings.Contains(out, "not joined") {
		t.Errorf("status of a joining member: exit %d, stdout %q, stderr %q; want 0 and no placement version yet", code, out, errOut)
	}
}

func TestAListenerWithoutTheAPIIsNamed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := admin.Serve(admin.Options{Listener: ln, Ready: func() (bool, any) { return true, nil }})
	t.Cleanup(func() { s.Close(context.Background()) })
	code, _, errOut := troupe("--addr", s.Addr().String(), "status")
	if code != 1 || !strings.Contains(errOut, "AdminConfig.API") {
		t.Errorf("status against a listener without the API: exit %d, %q; want 1 naming AdminConfig.API", code, errOut)
	}
}

func TestTheTimeoutBoundsTheWholeCommand(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hang := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	s := admin.Serve(admin.Options{Listener: ln, API: hang})
	t.Cleanup(func() { s.Close(context.Background()) })
	code, _, errOut := troupe("--addr", s.Addr().String(), "--timeout", "200ms", "status")
	if code != 1 || !strings.Contains(errOut, "--timeout") {
		t.Errorf("status against a listener that never answers: exit %d, %q; want 1 naming the timeout", code, errOut)
	}
}

func TestTLSWithACAAndAClientCertificate(t *testing.T) {
	dir := t.TempDir()
	cert, pemCert, pemKey := certificate(t)
	ca, certFile, keyFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "client.pem"), filepath.Join(dir, "client.key")
	for name, b := range map[string][]byte{ca: pemCert, certFile: pemCert, keyFile: pemKey} {
		if err := os.WriteFile(name, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemCert)
	addr := serveAPI(t, cluster3(), admin.Options{TLS: &tls.Config{Certificates: []tls.Certificate{cert},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}})
	code, out, errOut := troupe("--addr", addr, "--tls-ca", ca, "--tls-cert", certFile, "--tls-key", keyFile, "status")
	if code != 0 || !strings.Contains(out, "10.0.0.2:7400") {
		t.Errorf("over mutual TLS: exit %d, %s %s; want the status", code, out, errOut)
	}
	if code, _, errOut = troupe("--addr", addr, "--tls-ca", ca, "status"); code != 1 {
		t.Errorf("without the client certificate: exit %d (%s), want 1", code, errOut)
	}
	if code, _, errOut = troupe("--addr", "https://"+addr, "status"); code != 1 || !strings.Contains(errOut, "certificate") {
		t.Errorf("without trusting the CA: exit %d (%s), want 1 about the certificate", code, errOut)
	}
}

func TestTheDefaultAddressIsTheSystemsDefaultAdminBind(t *testing.T) {
	if defaultAddr != system.DefaultAdminBind {
		t.Errorf("the CLI defaults to %s, the system binds %s by default: want one", defaultAddr, system.DefaultAdminBind)
	}
}

// certificate returns a self-signed certificate for 127.0.0.1, fit for a
// server and a client, with its PEM and its key's.
func certificate(t *testing.T) (tls.Certificate, []byte, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "troupe cli test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pemCert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	cert, err := tls.X509KeyPair(pemCert, pemKey)
	if err != nil {
		t.Fatal(err)
	}
	return cert, pemCert, pemKey
}
