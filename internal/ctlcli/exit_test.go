package ctlcli

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// Every argument error exits 2, as docs/cli.md documents, whatever part of
// cobra finds it, and says what was wrong.
func TestArgumentErrorsExitTwo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args    []string
		message string
	}{
		{[]string{"nope"}, `unknown command "nope" for "doclogctl"`},
		{[]string{"jobs", "nope"}, `unknown command "nope" for "doclogctl jobs" (commands: `},
		{[]string{"docs", "gte", "d"}, `unknown command "gte" for "doclogctl docs"`},
		{[]string{"docs", "get"}, "accepts 1 arg(s), received 0 (usage: doclogctl docs get DOCUMENT_ID"},
		{[]string{"docs", "get", "a", "b"}, "accepts 1 arg(s), received 2"},
		{[]string{"jobs", "get"}, "requires at least 1 arg(s)"},
		{[]string{"status", "extra"}, `unknown command "extra" for "doclogctl status"`},
		{[]string{"completion", "nope"}, `unknown command "nope" for "doclogctl completion"`},
		{[]string{"docs", "get", "--no-such-flag"}, "unknown flag: --no-such-flag"},
		// Malformed arguments are refused before anything is read.
		{[]string{"jobs", "get", "nope"}, `"nope" is not a job id`},
		{[]string{"jobs", "get", "0193A000-0000-7000-8000-0000000000AA"}, "is not a job id"},
		{[]string{"dlq", "show", "x"}, `"x" is not PARTITION:OFFSET`},
		{[]string{"dlq", "redrive", "0:1", "7"}, `"7" is not PARTITION:OFFSET`},
		{[]string{"projector", "rebuild", "nope"}, `unknown projector "nope": the projectors are docview, indexer, analytics`},
	} {
		code, _, errOut := ctl(t, tc.args...)
		require.Equal(t, exitUsage, code, "%v: %s", tc.args, errOut)
		require.Contains(t, errOut, tc.message, "%v", tc.args)
	}
	// A group alone, or asked for help, prints its help.
	code, out, _ := ctl(t, "jobs")
	require.Equal(t, exitOK, code)
	require.Contains(t, out, "Available Commands")
}

// Lookups agree with the HTTP APIs: what they do not hold is not found
// (exit 1, with a message), where the APIs answer 404.
func TestLookupsNotFoundExitOne(t *testing.T) {
	t.Parallel()
	url := migrated(t)
	d := storeDoc(t, url, 2)
	db := []string{"--database-url", url}

	for _, tc := range []struct {
		args    []string
		message string
	}{
		{[]string{"docs", "get", "nope"}, "document not found"},
		{[]string{"docs", "ops", "nope"}, "reading the operations of nope on main: document not found"},
		{[]string{"docs", "ops", d.ID, "--branch", "elsewhere"}, "document not found"},
		{[]string{"docs", "validate", "nope"}, "document not found"},
		{[]string{"docs", "rebuild-keyframes", "nope"}, "document not found"},
	} {
		code, out, errOut := ctl(t, append(tc.args, db...)...)
		require.Equal(t, exitFailed, code, "%v: %s%s", tc.args, out, errOut)
		require.Contains(t, errOut, tc.message, "%v", tc.args)
	}

	// A stream of a document that exists but holds nothing is empty, not
	// missing, as /operations answers it.
	code, out, errOut := ctl(t, append([]string{"docs", "ops", d.ID, "--scope", "local", "-o", "json"}, db...)...)
	require.Equal(t, exitOK, code, errOut)
	require.JSONEq(t, "[]", out)

	// A UUIDv7 older than the jobs topic's retention without a result is a
	// job that will never run: not found, as GET /v1/jobs/{id} answers 404.
	// The jobs found are printed first.
	old := v7At(t, time.Now().Add(-30*24*time.Hour))
	code, out, errOut = ctl(t, append([]string{"jobs", "get", d.JobID, old.String()}, db...)...)
	require.Equal(t, exitFailed, code, "%s%s", out, errOut)
	require.Contains(t, out, d.JobID)
	require.Contains(t, errOut, "no such job: "+old.String()+" has no result and was submitted more than 168h0m0s ago")
	code, _, errOut = ctl(t, append([]string{"jobs", "get", old.String(), "--topics-jobs-retention", "1000h"}, db...)...)
	require.Equal(t, exitOK, code, "within the retention given it may still run: %s", errOut)
}

// v7At makes a UUIDv7 carrying time at.
func v7At(t *testing.T, at time.Time) uuid.UUID {
	t.Helper()
	u := uuid.Must(uuid.NewV7())
	ms := uint64(at.UnixMilli())
	for i := range 6 {
		u[i] = byte(ms >> (40 - 8*i))
	}
	return u
}
