package testkit

import (
	"io"
	"net/http"
	"testing"
)

// Send does req with the default client and returns the response with its
// body read whole (and closed). It fails the test when the request or the
// read fails; any status is the caller's to check.
func Send(tb testing.TB, req *http.Request) (*http.Response, []byte) {
	tb.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return resp, b
}
