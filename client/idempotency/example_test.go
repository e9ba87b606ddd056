package idempotency_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/troupe-go/troupe/client/idempotency"
)

// A payment endpoint that a client may retry: the second POST with the
// same key gets the first one's response and charges nothing.
func ExampleNew() {
	store, err := idempotency.NewMemoryStore(idempotency.MemoryConfig{})
	if err != nil {
		panic(err)
	}
	guard, err := idempotency.New(idempotency.Config{Store: store, App: "shop"})
	if err != nil {
		panic(err)
	}
	charged := 0
	mux := http.NewServeMux()
	mux.HandleFunc("POST /payments", func(w http.ResponseWriter, r *http.Request) {
		charged++
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "payment %d", charged)
	})
	srv := httptest.NewServer(guard(mux))
	defer srv.Close()

	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/payments", strings.NewReader(`{"amount":10}`))
		req.Header.Set(idempotency.Header, "order-42")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Printf("%d replayed=%q\n", resp.StatusCode, resp.Header.Get(idempotency.ReplayedHeader))
	}
	fmt.Println("charged", charged, "time")
	// Output:
	// 201 replayed=""
	// 201 replayed="true"
	// charged 1 time
}
