package testkit

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestSend(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Method", r.Method)
		w.WriteHeader(http.StatusTeapot)
		w.Write([]byte("short and stout"))
	}))
	defer srv.Close()
	req, err := http.NewRequest(http.MethodPut, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, b := Send(t, req)
	if resp.StatusCode != http.StatusTeapot || resp.Header.Get("X-Method") != http.MethodPut || string(b) != "short and stout" {
		t.Fatalf("%d %v %q", resp.StatusCode, resp.Header, b)
	}
}
