package depwait_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/doclog/doclog/internal/depwait"
	"github.com/doclog/doclog/internal/testenv"
)

func TestBackoffDefaults(t *testing.T) {
	c := depwait.Config{}.WithDefaults()
	require.NoError(t, c.Validate())
	want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	for i, w := range want {
		require.Equal(t, w, c.Backoff(i+1), "pause after failure %d", i+1)
	}
	require.Equal(t, 5*time.Second, c.Backoff(1000), "the cap holds however long the outage")
	require.Equal(t, depwait.DefaultProbeTimeout, c.ProbeTimeout)
	require.Equal(t, depwait.DefaultLogInterval, c.LogInterval)
}

func TestConfigValidate(t *testing.T) {
	for name, c := range map[string]depwait.Config{
		"negative initial":  {InitialBackoff: -time.Second},
		"max below initial": {InitialBackoff: time.Second, MaxBackoff: time.Millisecond},
		"shrinking":         {Multiplier: 0.5},
		"jitter of 100%":    {Jitter: 1},
		"negative probe":    {ProbeTimeout: -1},
		"negative log":      {LogInterval: -1},
	} {
		require.Error(t, c.WithDefaults().Validate(), name)
	}
}

// fast keeps the tests' pauses short; the log interval is long, so each
// wait logs once.
var fast = depwait.Config{InitialBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, LogInterval: time.Hour}

// A server that starts listening during the wait is found, and until then
// every failed attempt is reported as "connection refused".
func TestWaitUntilTheServerListens(t *testing.T) {
	addr := testenv.UnusedAddr(t)
	var reported atomic.Pointer[error]
	refusals := make(chan struct{}, 1)
	dep := depwait.Dependency{
		Name: "thing",
		Probe: func(ctx context.Context) error {
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			if err != nil {
				return err
			}
			return c.Close()
		},
		Waiting: func(err error) {
			reported.Store(&err)
			select {
			case refusals <- struct{}{}:
			default:
			}
		},
	}
	core, logs := observer.New(zap.InfoLevel)
	done := make(chan error, 1)
	go func() { done <- depwait.Wait(context.Background(), fast, dep, zap.New(core)) }()

	select {
	case <-refusals:
	case err := <-done:
		t.Fatalf("the wait ended before anything listened: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no failed attempt was reported")
	}
	require.EqualError(t, *reported.Load(), "waiting for thing: connection refused")
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	defer ln.Close()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the wait did not notice the server")
	}
	require.Equal(t, 1, logs.FilterMessage("waiting for dependency").Len(), "one entry per log interval")
	require.Equal(t, 1, logs.FilterMessage("dependency answers").Len())
}

// A stop mid-pause ends the wait at once, however long the pause.
func TestWaitStopsPromptly(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	attempted := make(chan struct{})
	var once sync.Once
	dep := depwait.Dependency{Name: "thing", Probe: func(context.Context) error {
		once.Do(func() { close(attempted) })
		return errors.New("down")
	}}
	done := make(chan error, 1)
	go func() {
		done <- depwait.Wait(ctx, depwait.Config{InitialBackoff: time.Hour, MaxBackoff: time.Hour}, dep, nil)
	}()
	<-attempted
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
		require.ErrorContains(t, err, "waiting for thing")
	case <-time.After(30 * time.Second):
		t.Fatal("the wait outlived its context")
	}
}

func TestSetupErrors(t *testing.T) {
	t.Run("transient ones are retried", func(t *testing.T) {
		var calls int
		err := depwait.Wait(context.Background(), fast, depwait.Dependency{
			Name:  "thing",
			Probe: func(context.Context) error { return nil },
			Setup: func(context.Context) error {
				if calls++; calls < 3 {
					return errors.New("not yet")
				}
				return nil
			},
		}, nil)
		require.NoError(t, err)
		require.Equal(t, 3, calls)
	})
	t.Run("a permanent one ends the wait", func(t *testing.T) {
		cause := errors.New("the topic has 3 partitions, not 4")
		var calls int
		err := depwait.Wait(context.Background(), fast, depwait.Dependency{
			Name:  "thing",
			Setup: func(context.Context) error { calls++; return depwait.Permanent(cause) },
		}, nil)
		require.ErrorIs(t, err, cause)
		require.EqualError(t, err, "thing: the topic has 3 partitions, not 4")
		require.Equal(t, 1, calls)
		require.NoError(t, depwait.Permanent(nil))
	})
}

// The probe is bounded, so an address that never answers does not hold the
// wait beyond ProbeTimeout per attempt.
func TestProbeTimeout(t *testing.T) {
	var reported atomic.Pointer[error]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- depwait.Wait(ctx, depwait.Config{ProbeTimeout: 20 * time.Millisecond, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond},
			depwait.Dependency{
				Name:    "thing",
				Probe:   func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() },
				Waiting: func(err error) { reported.Store(&err); cancel() },
			}, nil)
	}()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(30 * time.Second):
		t.Fatal("a hung probe held the wait")
	}
	require.EqualError(t, *reported.Load(), "waiting for thing: no answer in time")
}

// Reasons come from real drivers' errors and name no user, host or
// password.
func TestReason(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const user, password = "doclog_secret_user", "hunter2"

	addr := testenv.UnusedAddr(t)
	_, err := pgx.Connect(ctx, "postgres://"+user+":"+password+"@"+addr+"/db?sslmode=disable")
	require.Error(t, err)
	require.Contains(t, err.Error(), user, "pgx names the user, which is why Reason exists")
	requireSafe(t, depwait.Reason(err), "connection refused", user, password, addr)

	u, err := url.Parse(testenv.PostgresURL(t))
	require.NoError(t, err)
	u.Path = "/doclog_no_such_database"
	_, err = pgx.Connect(ctx, u.String())
	require.Error(t, err)
	requireSafe(t, depwait.Reason(err), "the database does not exist", "doclog_no_such_database", u.Host)

	u, err = url.Parse(testenv.PostgresURL(t))
	require.NoError(t, err)
	u.User = url.UserPassword(user, password)
	_, err = pgx.Connect(ctx, u.String())
	require.Error(t, err)
	requireSafe(t, depwait.Reason(err), "authentication refused (SQLSTATE 28", user, password, u.Host)

	require.Equal(t, "host name does not resolve", depwait.Reason(&net.DNSError{Err: "no such host", Name: "pg.internal", IsNotFound: true}))
	require.Equal(t, "no answer in time", depwait.Reason(context.DeadlineExceeded))
	require.Equal(t, "not answering", depwait.Reason(errors.New("user=x host=y")))
	require.Empty(t, depwait.Reason(nil))
}

func requireSafe(t *testing.T, reason, want string, secrets ...string) {
	t.Helper()
	require.True(t, strings.HasPrefix(reason, want), "reason %q, want %q", reason, want)
	for _, s := range secrets {
		require.NotContains(t, reason, s)
	}
}
