package app_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/doclog/doclog/app"
	"github.com/doclog/doclog/internal/depwait"
	"github.com/doclog/doclog/internal/localpg"
	"github.com/doclog/doclog/internal/testenv"
	"github.com/doclog/doclog/kafka"
)

// Every role starts with the broker down: each serves /healthz at once and
// answers /readyz 503 naming Kafka, except the readstore, which needs no
// broker and is ready as soon as Postgres answers. Once the broker starts,
// the roles create the topics and become ready, and a job submitted through
// ingest is applied by the executor, projected and read back.
func TestRolesStartWithKafkaDown(t *testing.T) {
	t.Parallel()
	broker := testenv.StartKafkaNode(t)
	kenv := testenv.KafkaAt(t, broker.Seeds)
	broker.Stop() // it keeps its port: the roles are configured with it
	db := testenv.PostgresSchema(t)

	roles := map[string]*running{}
	for _, role := range app.AllRoles {
		roles[role] = start(t, settings([]string{role}, db, kenv))
	}
	for _, role := range app.AllRoles {
		r := roles[role]
		r.requireHealthy()
		if role == app.RoleReadstore {
			r.awaitReadyz(http.StatusOK, time.Minute)
			continue
		}
		// Postgres answers; only Kafka is waited for.
		r.awaitReadyz(http.StatusServiceUnavailable, time.Minute, `"failing":["kafka","startup"]`, "waiting for kafka: connection refused")
	}
	// The wait goes on for as long as the broker is away.
	for _, role := range []string{app.RoleIngest, app.RoleExecutor, app.RoleProjectors} {
		code, body := roles[role].readyz()
		require.Equal(t, http.StatusServiceUnavailable, code, "%s: %s", role, body)
		require.Contains(t, body, "starting: waiting for kafka")
	}

	broker.Start()
	for _, role := range app.AllRoles {
		roles[role].awaitReadyz(http.StatusOK, 3*time.Minute)
	}
	ingestURL := "http://" + roles[app.RoleIngest].app.Addr(app.RoleIngest)
	job, doc := submit(t, ingestURL)
	awaitStatus(t, ingestURL, job, "READ_READY", 3*time.Minute)
	requireDocument(t, "http://"+roles[app.RoleReadstore].app.Addr(app.RoleReadstore), doc)
}

// Every role starts with Postgres down: /readyz names Postgres with a reason
// that shows neither the user, the host nor the password of the URL, also
// while the server answers but refuses the user. Once the user can log in,
// the process migrates, starts and does its work.
func TestRolesStartWithPostgresDown(t *testing.T) {
	t.Parallel()
	const user, password = "doclog_secret_user", "hunter2"
	addr := testenv.UnusedAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	db := "postgres://" + user + ":" + password + "@" + addr + "/postgres?sslmode=disable"
	r := start(t, settings(app.AllRoles, db, testenv.Kafka(t)))
	r.requireHealthy()

	leaks := []string{user, password, "127.0.0.1", port, "user="}
	body := r.awaitReadyz(http.StatusServiceUnavailable, time.Minute, "waiting for postgres: connection refused")
	requireNone(t, body, leaks...)

	p, _ := strconv.Atoi(port)
	srv, err := localpg.Start(context.Background(), localpg.Config{DataDir: filepath.Join(t.TempDir(), "pg"), Port: p})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = srv.Stop(context.Background())
		_ = os.RemoveAll(srv.Dir())
	})

	// The server answers, but the user does not exist yet.
	body = r.awaitReadyz(http.StatusServiceUnavailable, time.Minute, "waiting for postgres: authentication refused")
	requireNone(t, body, leaks...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, srv.URL())
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE ROLE "+user+" LOGIN SUPERUSER PASSWORD '"+password+"'")
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))

	r.awaitReadyz(http.StatusOK, 3*time.Minute)
	ingestURL := "http://" + r.app.Addr(app.RoleIngest)
	job, doc := submit(t, ingestURL)
	awaitStatus(t, ingestURL, job, "READ_READY", 3*time.Minute)
	requireDocument(t, "http://"+r.app.Addr(app.RoleReadstore), doc)
}

// The analytics projector waits for ClickHouse: until something listens at
// its address /readyz names ClickHouse; then it creates its tables and
// projects. What starts listening is a TCP relay to the test ClickHouse, so
// the server that answers is a real one.
func TestAnalyticsStartsWithClickHouseDown(t *testing.T) {
	t.Parallel()
	chAddr, chDB := testenv.ClickHouseDatabase(t)
	addr := testenv.UnusedAddr(t)
	s := settings(app.AllRoles, testenv.PostgresSchema(t), testenv.Kafka(t))
	s.ClickHouseURL = "clickhouse://" + addr + "/" + chDB
	r := start(t, s)
	r.requireHealthy()
	// Postgres and Kafka answer; only ClickHouse is waited for.
	r.awaitReadyz(http.StatusServiceUnavailable, time.Minute, `"failing":["clickhouse","startup"]`, "waiting for clickhouse: connection refused")

	relay(t, addr, chAddr)
	r.awaitReadyz(http.StatusOK, 3*time.Minute)
	ingestURL := "http://" + r.app.Addr(app.RoleIngest)
	job, doc := submit(t, ingestURL)
	awaitStatus(t, ingestURL, job, "READ_READY", 3*time.Minute)

	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{chAddr}})
	require.NoError(t, err)
	defer conn.Close()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var n uint64
		err := conn.QueryRow(context.Background(), "SELECT count() FROM "+chDB+".operations WHERE document_id = ?", doc).Scan(&n)
		require.NoError(t, err)
		if n > 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the document's operations never reached ClickHouse")
		time.Sleep(200 * time.Millisecond)
	}
}

// A stop while every dependency is down ends Run at once and cleanly, even
// mid-pause (the package's goleak check finds any goroutine left behind).
func TestStopWhileWaiting(t *testing.T) {
	t.Parallel()
	s := settings(app.AllRoles, "postgres://doclog@"+testenv.UnusedAddr(t)+"/doclog", &testenv.KafkaEnv{
		Config: kafka.Config{Seeds: []string{testenv.UnusedAddr(t)}, ClientID: "doclog-test"},
		Topics: kafka.TopicsConfig{JobsPartitions: 2},
	})
	s.ClickHouseURL = "clickhouse://" + testenv.UnusedAddr(t) + "/doclog"
	// After its first failure each wait pauses for an hour.
	s.Wait = depwait.Config{InitialBackoff: time.Hour, MaxBackoff: time.Hour}
	r := start(t, s)
	r.requireHealthy()
	r.awaitReadyz(http.StatusServiceUnavailable, time.Minute, `"failing":["clickhouse","kafka","postgres","startup"]`,
		"waiting for postgres: connection refused", "waiting for kafka: connection refused", "waiting for clickhouse: connection refused")
	r.cancel()
	ok, err := r.result(20 * time.Second)
	require.True(t, ok, "Run did not return after the stop")
	require.NoError(t, err)
}

// What no wait can cure fails at once.
func TestConfigurationErrorsFailFast(t *testing.T) {
	t.Parallel()
	kenv := &testenv.KafkaEnv{Config: kafka.Config{Seeds: []string{"127.0.0.1:9"}, ClientID: "doclog-test"}, Topics: kafka.TopicsConfig{JobsPartitions: 2}}
	for name, c := range map[string]struct {
		edit func(*app.Settings)
		want string
	}{
		"database URL":   {func(s *app.Settings) { s.DatabaseURL = "postgres://doclog@127.0.0.1:99999999/x" }, "parsing the database URL"},
		"ClickHouse URL": {func(s *app.Settings) { s.ClickHouseURL = "clickhouse://127.0.0.1:9000/db?secure=maybe" }, "secure"},
		"Kafka CA file": {func(s *app.Settings) {
			s.Kafka.TLS = kafka.TLSConfig{Enabled: true, CAFile: filepath.Join(t.TempDir(), "none.pem")}
		}, "none.pem"},
	} {
		s := settings(app.AllRoles, "postgres://doclog@127.0.0.1:9/doclog", kenv)
		c.edit(s)
		require.NoError(t, s.Validate(), name)
		a, err := app.New(context.Background(), s, zap.NewNop())
		require.ErrorContains(t, err, c.want, name)
		require.Nil(t, a)
	}
}

// A topic whose partition count differs is no outage: Run ends with the
// mismatch instead of waiting.
func TestPartitionMismatchEndsTheStart(t *testing.T) {
	t.Parallel()
	kenv := testenv.Kafka(t)
	kenv.CreateTopics()
	s := settings([]string{app.RoleIngest}, testenv.PostgresSchema(t), kenv)
	s.Topics.JobsPartitions = kenv.Topics.JobsPartitions + 1
	r := start(t, s)
	ok, err := r.result(2 * time.Minute)
	require.True(t, ok, "Run kept waiting on a partition mismatch")
	var mismatch *kafka.PartitionMismatchError
	require.ErrorAs(t, err, &mismatch)
	require.ErrorContains(t, err, "kafka: ensuring topics")
}

func settings(roles []string, databaseURL string, kenv *testenv.KafkaEnv) *app.Settings {
	return &app.Settings{
		Roles:            roles,
		OpsAddr:          "127.0.0.1:0",
		IngestAddr:       "127.0.0.1:0",
		ReadstoreAddr:    "127.0.0.1:0",
		DatabaseURL:      databaseURL,
		DatabaseMaxConns: 4,
		Migrate:          "auto",
		Kafka:            kenv.Config,
		Topics:           kenv.Topics,
		CreateTopics:     true,
		Projectors:       []string{"docview"},
		// Short pauses: a dependency that came back is seen within half a
		// second.
		Wait: depwait.Config{MaxBackoff: 500 * time.Millisecond},
	}
}

// running is an App under Run, stopped when the test ends.
type running struct {
	t      *testing.T
	app    *app.App
	cancel context.CancelFunc
	done   chan error
	ops    string
}

func start(t *testing.T, s *app.Settings) *running {
	t.Helper()
	require.NoError(t, s.Validate())
	a, err := app.New(context.Background(), s, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{t: t, app: a, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- a.Run(ctx, nil) }()
	t.Cleanup(func() {
		cancel()
		if ok, _ := r.result(time.Minute); !ok {
			t.Error("Run did not return within a minute of the stop")
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for r.ops = a.Addr("ops"); r.ops == ""; r.ops = a.Addr("ops") {
		if ok, err := r.result(0); ok {
			t.Fatalf("Run ended before it served /healthz: %v", err)
		}
		require.True(t, time.Now().Before(deadline), "the ops endpoints never listened")
		time.Sleep(10 * time.Millisecond)
	}
	return r
}

// result is what Run returned, if it returns within the time given.
func (r *running) result(within time.Duration) (ended bool, err error) {
	select {
	case err := <-r.done:
		r.done <- err // for the next look
		return true, err
	case <-time.After(within):
		return false, nil
	}
}

func (r *running) get(path string) (int, string) {
	r.t.Helper()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + r.ops + path)
	require.NoError(r.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(r.t, err)
	return resp.StatusCode, string(body)
}

func (r *running) requireHealthy() {
	r.t.Helper()
	code, body := r.get("/healthz")
	require.Equal(r.t, http.StatusOK, code, body)
}

func (r *running) readyz() (int, string) { return r.get("/readyz") }

// awaitReadyz polls /readyz until it answers code with a body containing
// every want, and returns the body.
func (r *running) awaitReadyz(code int, within time.Duration, want ...string) string {
	r.t.Helper()
	deadline := time.Now().Add(within)
	for {
		got, body := r.readyz()
		if got == code && containsAll(body, want) {
			return body
		}
		if !time.Now().Before(deadline) {
			r.t.Fatalf("/readyz did not answer %d with %q within %s; last %d: %s", code, want, within, got, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

func submit(t *testing.T, ingestURL string) (jobID, documentID string) {
	t.Helper()
	resp, err := testenv.Admitted(t, func() (*http.Response, error) {
		return (&http.Client{Timeout: 30 * time.Second}).Post(ingestURL+"/v1/documents", "application/json",
			strings.NewReader(`{"documentType":"doclog/json","name":"waited","actions":[{"type":"MERGE_PATCH","scope":"global","input":{"greeting":"hi"}}]}`))
	})
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, string(body))
	var accepted struct{ JobID, DocumentID string }
	require.NoError(t, json.Unmarshal(body, &accepted))
	return accepted.JobID, accepted.DocumentID
}

func awaitStatus(t *testing.T, ingestURL, jobID, want string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	var status struct{ Status string }
	for status.Status != want {
		require.True(t, time.Now().Before(deadline), "job %s never became %s (last %q)", jobID, want, status.Status)
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Get(ingestURL + "/v1/jobs/" + jobID + "?wait=5s")
		require.NoError(t, err)
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&status))
		resp.Body.Close()
		require.NotEqual(t, "FAILED", status.Status)
	}
}

func requireDocument(t *testing.T, readstoreURL, documentID string) {
	t.Helper()
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Get(readstoreURL + "/v1/documents/" + documentID)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Contains(t, string(body), `"greeting":"hi"`)
}

func requireNone(t *testing.T, body string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		require.NotContains(t, body, s, "/readyz leaks %q", s)
	}
}

// relay listens on addr and copies every connection to and from target
// until the test ends.
func relay(t *testing.T, addr, target string) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		_ = dst.Close()
		_ = src.Close()
	}
	wg.Go(func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				_ = in.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, in, out)
			mu.Unlock()
			wg.Go(func() { pipe(in, out) })
			wg.Go(func() { pipe(out, in) })
		}
	})
}
