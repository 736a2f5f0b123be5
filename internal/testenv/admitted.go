package testenv

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/doclog/doclog/client"
)

// Admitted sends a request with send and, while ingest answers 429 (its
// backpressure), waits what it advises (client.RetryAfter: Retry-After-Ms,
// else Retry-After; a second without either) and sends it again, as any well-behaved client does, for up
// to a minute. send builds a fresh request each time, since a body is read
// once. The last response is returned, open, as http.Client.Do returns it.
//
// Tests of whole apps that submit over plain HTTP go through it: a job that
// waited past the executor lag bound (the first jobs of an app that has just
// started, on a machine running other tests) still counts as waiting until
// the executor commits past it and the backlog's next measurement sees
// that, so a submit straight after such a job's status can be refused once,
// which a production client rides out and such a test must too.
func Admitted(t testing.TB, send func() (*http.Response, error)) (*http.Response, error) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := send()
		if err != nil || resp.StatusCode != http.StatusTooManyRequests || time.Now().After(deadline) {
			return resp, err
		}
		wait := client.RetryAfter(resp.Header, time.Now())
		if wait <= 0 {
			wait = time.Second
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		t.Logf("%s %s answered 429; retrying after %s", resp.Request.Method, resp.Request.URL.Path, wait)
		time.Sleep(wait)
	}
}
