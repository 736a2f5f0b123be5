package app_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/app"
	"github.com/doclog/doclog/executor"
	"github.com/doclog/doclog/executor/cache"
	"github.com/doclog/doclog/ingest"
	"github.com/doclog/doclog/internal/config"
	"github.com/doclog/doclog/internal/testenv"
	"github.com/doclog/doclog/kafka"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/projectors"
	"github.com/doclog/doclog/projectors/analytics"
	"github.com/doclog/doclog/readstore"
	"github.com/doclog/doclog/record"
)

var update = flag.Bool("update", false, "rewrite the tuning table of docs/configuration.md from the flags")

func bind(t *testing.T, args ...string) (*app.Settings, *pflag.FlagSet, error) {
	t.Helper()
	s := &app.Settings{}
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	app.BindFlags(fs, s)
	return s, fs, fs.Parse(append([]string{"--database-url=postgres://x"}, args...))
}

// Each tuning flag's default is its component's own: the settings the flags
// leave alone equal the component's WithDefaults, field for field, and
// every field a flag sets is one of them.
func TestTuningDefaultsAreTheComponents(t *testing.T) {
	t.Parallel()
	s, fs, err := bind(t)
	require.NoError(t, err)
	require.NoError(t, s.Validate())
	tuned := 0
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"executor", s.Tuning.Executor, executor.Config{}.WithDefaults()},
		{"cache", s.Tuning.Cache, cache.Config{}.WithDefaults()},
		{"projectors", s.Tuning.Projectors, projectors.Config{}.WithDefaults()},
		{"analytics", s.Tuning.Analytics, analytics.Config{}.WithDefaults()},
		{"readstore", s.Tuning.Readstore, readstore.Config{}.WithDefaults()},
		{"ingest", s.Tuning.Ingest, ingest.Config{}.WithDefaults()},
		{"log", struct{ CopyThreshold int }{s.Tuning.CopyThreshold}, struct{ CopyThreshold int }{postgres.DefaultCopyThreshold}},
	} {
		got, want := reflect.ValueOf(c.got), reflect.ValueOf(c.want)
		for i := range got.NumField() {
			f := got.Field(i)
			if !got.Type().Field(i).IsExported() {
				continue // no flag can set it
			}
			switch f.Kind() {
			case reflect.Int, reflect.Int32, reflect.Int64:
			default:
				continue
			}
			if f.IsZero() {
				continue // not tuned
			}
			tuned++
			require.Equal(t, want.Field(i).Interface(), f.Interface(), "%s.%s", c.name, got.Type().Field(i).Name)
		}
	}
	flags := app.TuningFlags(fs)
	// Every flag sets a field: the numbers above, and the switches, each
	// off as its component's default is.
	switches := 0
	for _, f := range flags {
		if f.Value.Type() == "bool" {
			switches++
			require.Equal(t, "false", f.DefValue, "--%s", f.Name)
		}
	}
	require.False(t, executor.Config{}.WithDefaults().AsyncAnnounce)
	require.Equal(t, len(flags), tuned+switches)
	require.Equal(t, "5m0s", fs.Lookup("executor-job-timeout").DefValue)
	for _, f := range flags {
		require.True(t, strings.HasPrefix(app.ValuesKey(f), "tuning."), f.Name)
		require.Contains(t, f.Usage, ": raising it ", "--%s says what raising it trades", f.Name)
	}
}

// A tuning flag refuses what its field cannot hold, a 0 that the field would
// silently take as its default included, and the components' own Validate
// refuses what only makes sense together; a variable sets a flag as any.
func TestTuningValidation(t *testing.T) {
	t.Parallel()
	for arg, want := range map[string]string{
		"--executor-job-timeout=0":            "must be positive",
		"--executor-max-retries=-1":           "must be at least 0",
		"--executor-cache-max-bytes=10":       fmt.Sprintf("must be at least %d", cache.EntryOverhead),
		"--executor-produce-timeout=500ms":    "must be at least 1s",
		"--projectors-reconcile-interval=0":   "must not be 0",
		"--projectors-head-cache-bytes=0":     "must not be 0",
		"--analytics-batch-delay=1ms":         "must be at least 10ms",
		"--readstore-poll-batch=-3":           "must be at least 1",
		"--ingest-max-actions-per-job=banana": "not an integer",
		"--executor-copy-threshold=0":         "must not be 0",
		"--executor-fetch-max-wait=1ms":       "must be at least 10ms",
		"--executor-rebalance-timeout=50ms":   "must be at least 100ms",
		"--projectors-fetch-max-wait=0s":      "must be at least 10ms",
		"--projectors-rebalance-timeout=99ms": "must be at least 100ms",
	} {
		_, _, err := bind(t, arg)
		require.ErrorContains(t, err, want, arg)
		require.ErrorContains(t, err, strings.SplitN(arg, "=", 2)[0][2:], arg)
	}
	for _, args := range [][]string{
		{"--projectors-reconcile-interval=-1s", "--projectors-head-cache-bytes=-1"},
		{"--executor-copy-threshold=-1", "--executor-fetch-max-wait=10ms", "--projectors-rebalance-timeout=100ms"},
	} {
		s, _, err := bind(t, args...)
		require.NoError(t, err, args)
		require.NoError(t, s.Validate(), args)
	}
	s, _, err := bind(t, "--projectors-reconcile-interval=-1s")
	require.NoError(t, err)
	require.Equal(t, -time.Second, s.Tuning.Projectors.ReconcileInterval)

	// 0 retries is NoRetries, which the executor's defaults keep; any other
	// value clears it again.
	s, fs, err := bind(t, "--executor-max-retries=0")
	require.NoError(t, err)
	require.NoError(t, s.Validate())
	require.True(t, s.Tuning.Executor.NoRetries)
	require.Zero(t, s.Tuning.Executor.WithDefaults().MaxRetries)
	require.Equal(t, "0", fs.Lookup("executor-max-retries").Value.String())
	require.NoError(t, fs.Set("executor-max-retries", "2"))
	require.False(t, s.Tuning.Executor.NoRetries)
	require.Equal(t, 2, s.Tuning.Executor.WithDefaults().MaxRetries)

	s, _, err = bind(t, "--executor-retry-base-delay=10s", "--executor-retry-max-delay=1s",
		"--readstore-default-wait=1m", "--ingest-max-body-bytes=2000000", "--analytics-batch-delay=2m",
		"--projectors-retry-base-delay=1m")
	require.NoError(t, err)
	err = s.Validate()
	for _, want := range []string{
		"--executor-* settings: executor retry max delay 1s is below the base delay 10s",
		"--readstore-* settings: read store default wait 1m0s exceeds the max wait 30s",
		"--ingest-* settings: ingest max body bytes 2000000 exceeds the 1048576 bytes a job record may have",
		"--analytics-* settings:", "batch delay",
		"--projectors-* settings: projector retry delays must be positive with the maximum (10s) at least the base (1m0s)",
	} {
		require.ErrorContains(t, err, want)
	}

	s, fs, err = bind(t)
	require.NoError(t, err)
	env := map[string]string{"DOCLOG_EXECUTOR_JOB_TIMEOUT": "42s", "DOCLOG_EXECUTOR_CACHE_MAX_STREAMS": "77"}
	require.NoError(t, config.ApplyEnv(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok }))
	require.Equal(t, 42*time.Second, s.Tuning.Executor.JobTimeout)
	require.Equal(t, 77, s.Tuning.Cache.MaxStreams)
	env = map[string]string{"DOCLOG_EXECUTOR_JOB_TIMEOUT": "0s"}
	_, fs, _ = bind(t)
	require.ErrorContains(t, config.ApplyEnv(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok }), "DOCLOG_EXECUTOR_JOB_TIMEOUT")
}

const (
	tuningBegin = "<!-- tuning flags: generated by `go test ./app -run TestTuningDocumented -update` -->\n"
	tuningEnd   = "<!-- end of tuning flags -->\n"
)

// docs/configuration.md lists every tuning flag with its variable, its key
// in the chart's values, its default and what it trades: the table between
// the markers is what the flags say, and -update rewrites it.
func TestTuningDocumented(t *testing.T) {
	t.Parallel()
	_, fs, err := bind(t)
	require.NoError(t, err)
	var b strings.Builder
	b.WriteString(tuningBegin)
	group := ""
	for _, f := range app.TuningFlags(fs) {
		if g, _, _ := strings.Cut(f.Name, "-"); g != group {
			group = g
			fmt.Fprintf(&b, "\n| %s flag | variable | chart value | default | what raising it trades |\n| --- | --- | --- | --- | --- |\n", g)
		}
		what := strings.SplitN(f.Usage, ": raising it ", 2)
		fmt.Fprintf(&b, "| `--%s` | `%s` | `%s` | `%s` | %s: raising it %s |\n", f.Name, config.EnvName(f.Name), app.ValuesKey(f), f.DefValue,
			strings.ReplaceAll(what[0], "|", "\\|"), strings.ReplaceAll(what[1], "|", "\\|"))
	}
	b.WriteString("\n" + tuningEnd)
	const path = "../docs/configuration.md"
	doc, err := os.ReadFile(path)
	require.NoError(t, err)
	start, end := strings.Index(string(doc), tuningBegin), strings.Index(string(doc), tuningEnd)
	require.True(t, start >= 0 && end > start, "docs/configuration.md has no tuning table between the markers %q and %q", tuningBegin, tuningEnd)
	got := string(doc[start : end+len(tuningEnd)])
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(string(doc[:start])+b.String()+string(doc[end+len(tuningEnd):])), 0o644))
		return
	}
	require.Equal(t, b.String(), got, "docs/configuration.md's tuning table is stale: run go test ./app -run TestTuningDocumented -update")
}

// --executor-job-timeout reaches the executor of a running process: a job of
// a document type no member knows waits that long, not the default five
// minutes, and then fails UNKNOWN_DOCUMENT_TYPE. The ingest limit and the
// readstore's page limit given with it reach their servers too.
func TestTuningReachesTheComponents(t *testing.T) {
	t.Parallel()
	const timeout = 3 * time.Second
	kenv := testenv.Kafka(t)
	s, _, err := bind(t, "--executor-job-timeout="+timeout.String(), "--ingest-max-actions-per-job=1", "--readstore-max-page-limit=150")
	require.NoError(t, err)
	base := settings(app.AllRoles, testenv.PostgresSchema(t), kenv)
	base.Tuning = s.Tuning
	r := start(t, base)
	r.awaitReadyz(http.StatusOK, 3*time.Minute)
	ingestURL := "http://" + r.app.Addr(app.RoleIngest)
	readstoreURL := "http://" + r.app.Addr(app.RoleReadstore)

	job := &record.Job{JobID: uuid.Must(uuid.NewV7()).String(), Kind: record.KindCreate, DocumentID: uuid.NewString(), DocumentType: "acme/unknown"}
	rec, err := record.NewJobRecord(kenv.Names.Jobs, job)
	require.NoError(t, err)
	cl, err := kafka.NewClient(kenv.Config, nil)
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sent := time.Now()
	require.NoError(t, cl.ProduceSync(ctx, rec).FirstErr())

	var status struct {
		Status       string
		ErrorHistory []oplog.ErrorInfo
	}
	for status.Status != "FAILED" {
		require.Less(t, time.Since(sent), time.Minute, "the job did not fail within a minute (last %q)", status.Status)
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Get(ingestURL + "/v1/jobs/" + job.JobID + "?wait=5s")
		require.NoError(t, err)
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&status))
		resp.Body.Close()
	}
	took := time.Since(sent)
	require.GreaterOrEqual(t, took, timeout, "the job failed before it waited --executor-job-timeout")
	require.NotEmpty(t, status.ErrorHistory)
	require.Equal(t, model.NameModelNotFound, status.ErrorHistory[len(status.ErrorHistory)-1].Name)
	require.Contains(t, status.ErrorHistory[len(status.ErrorHistory)-1].Message, "acme/unknown")

	resp, err := http.Post(ingestURL+"/v1/documents", "application/json", strings.NewReader(
		`{"documentType":"doclog/json","name":"two","actions":[{"type":"MERGE_PATCH","scope":"global","input":{"a":1}}]}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "a create with a name and an action is two actions, above --ingest-max-actions-per-job=1")

	for limit, want := range map[string]int{"150": http.StatusOK, "151": http.StatusBadRequest} {
		resp, err := http.Get(readstoreURL + "/v1/documents?limit=" + limit)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, want, resp.StatusCode, "?limit=%s with --readstore-max-page-limit=150", limit)
	}
}

// A switch is on given alone or as true, by its flag or its variable, and
// refuses what is not a boolean.
func TestTuningSwitch(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--executor-async-announce"}, {"--executor-async-announce=true"}} {
		s, _, err := bind(t, args...)
		require.NoError(t, err)
		require.True(t, s.Tuning.Executor.AsyncAnnounce, "%v", args)
	}
	s, fs, err := bind(t)
	require.NoError(t, err)
	require.False(t, s.Tuning.Executor.AsyncAnnounce)
	env := map[string]string{"DOCLOG_EXECUTOR_ASYNC_ANNOUNCE": "true"}
	require.NoError(t, config.ApplyEnv(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok }))
	require.True(t, s.Tuning.Executor.AsyncAnnounce)
	_, _, err = bind(t, "--executor-async-announce=sometimes")
	require.ErrorContains(t, err, "not true or false")
}
