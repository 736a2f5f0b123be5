package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/doclog/doclog/internal/httpapi"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestBearer(t *testing.T) {
	off := httpapi.NewBearer([]string{" "}, []string{"", "  "})
	require.True(t, off.Off())
	require.Nil(t, off.Check(httptest.NewRequest(http.MethodGet, "/", nil), httpapi.ScopeWrite))

	b := httpapi.NewBearer(nil, []string{"old", "new"})
	for header, want := range map[string]string{
		"":              "a bearer token is required",
		"Basic abc":     "a bearer token is required",
		"Bearer ":       "a bearer token is required",
		"Bearer wrong":  "the bearer token is not valid",
		"Bearer new":    "",
		"bearer  old  ": "",
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if header != "" {
			r.Header.Set("Authorization", header)
		}
		e := b.Check(r, httpapi.ScopeWrite)
		if want == "" {
			require.Nil(t, e, header)
			continue
		}
		require.NotNil(t, e, header)
		require.Equal(t, http.StatusUnauthorized, e.Status)
		require.Equal(t, httpapi.CodeUnauthorized, e.Code)
		require.Equal(t, "Authorization", e.Field)
		require.Contains(t, e.Message, want)
	}
}

func TestWriteError(t *testing.T) {
	w := httptest.NewRecorder()
	httpapi.WriteError(w, &httpapi.Error{Status: 503, Code: "unavailable", Message: "down"})
	require.Equal(t, 503, w.Code)
	require.Equal(t, "1", w.Header().Get("Retry-After"))
	require.JSONEq(t, `{"error":{"code":"unavailable","message":"down"}}`, w.Body.String())

	w = httptest.NewRecorder()
	httpapi.WriteError(w, &httpapi.Error{Status: 401, Code: "unauthorized", Field: "Authorization", Message: "no"})
	require.Equal(t, `Bearer realm="doclog"`, w.Header().Get("WWW-Authenticate"))
	var body map[string]map[string]string
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body))
	require.Equal(t, "Authorization", body["error"]["field"])
}

func TestServerLifecycle(t *testing.T) {
	release := make(chan struct{})
	stopped := false
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release // a request held open, like a long poll
		_, _ = io.WriteString(w, "done")
	})
	srv := httpapi.NewServer(httpapi.ServerConfig{Name: "test", Addr: "127.0.0.1:0"}, h, nil, nil)
	require.Nil(t, srv.Addr())
	require.NoError(t, srv.Stop(context.Background()), "stopping a server never started is harmless")

	srv = httpapi.NewServer(httpapi.ServerConfig{Name: "test", Addr: "127.0.0.1:0", ShutdownTimeout: 10 * time.Second},
		h, func() { stopped = true; close(release) }, nil)
	require.NoError(t, srv.Start(context.Background()))
	require.ErrorContains(t, srv.Start(context.Background()), "already started")
	got := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + srv.Addr().String() + "/")
		if err != nil {
			got <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got <- string(b)
	}()
	time.Sleep(50 * time.Millisecond) // let the request arrive; Stop must still finish it
	require.NoError(t, srv.Stop(context.Background()))
	require.True(t, stopped, "onStop runs first, answering held requests")
	require.Equal(t, "done", <-got, "the in-flight request finished before the server closed")
	require.NoError(t, srv.Stop(context.Background()), "stopping twice is harmless")
}
