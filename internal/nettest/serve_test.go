package nettest_test

import (
	"io"
	"net"
	"testing"

	"github.com/troupe-go/troupe/internal/nettest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestServeEchoesAndClosesItsConnectionsWhenTheTestEnds(t *testing.T) {
	var client net.Conn
	t.Run("serve", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		nettest.Serve(t, ln, nettest.Echo)
		if client, err = net.Dial("tcp", ln.Addr().String()); err != nil {
			t.Fatal(err)
		}
		if _, err := client.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 4)
		if _, err := io.ReadFull(client, got); err != nil || string(got) != "ping" {
			t.Fatalf("echo: %q, %v; want ping", got, err)
		}
	})
	defer client.Close()
	// The subtest ended: Serve closed the server's end.
	if _, err := io.ReadAll(client); err != nil {
		t.Fatalf("read after the server closed: %v, want EOF", err)
	}
}
