package systemtest

import (
	"context"
	"io"
	"net/http"
)

// Get sends GET url through c with the headers h (none if nil), within
// ctx, and returns the response with its body read whole and closed:
// the one HTTP GET of the tests of an admin listener.
func Get(ctx context.Context, c *http.Client, url string, h http.Header) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, nil, err
	}
	if h != nil {
		req.Header = h.Clone()
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, err
	}
	return resp, b, nil
}

// Header returns the headers of the name, value pairs kv.
func Header(kv ...string) http.Header {
	if len(kv)%2 != 0 {
		panic("systemtest.Header: an odd number of arguments (name, value pairs)")
	}
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}
