package ctlcli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jedib0t/go-pretty/v6/table"

	"github.com/doclog/doclog/ingest"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/record"
)

// jobStatus is a job's status as `jobs get` and `jobs submit` print it: the
// ingest API's (ingest.StatusOf), so consistencyToken is the string the read
// store takes as it is and coordinates what it encodes.
type jobStatus = ingest.JobStatus

func statusOf(r oplog.JobResult) jobStatus { return ingest.StatusOf(&r) }

// written lists the index ranges a job wrote, one per stream.
func written(s jobStatus) string {
	var parts []string
	for _, rg := range s.Streams {
		parts = append(parts, fmt.Sprintf("%s %d..%d", rg.Stream.Scope, rg.FromIndex, rg.ToIndex))
	}
	return strings.Join(parts, ", ")
}

// failure is the reason a FAILED job gives: its last error.
func failure(s jobStatus) string {
	if s.ErrorHistory == nil || len(*s.ErrorHistory) == 0 {
		return ""
	}
	h := *s.ErrorHistory
	return h[len(h)-1].Error()
}

// renderStatuses prints job statuses: a table of what each wrote (with its
// consistency token) or why it failed, or the JSON list.
func (g *globals) renderStatuses(list []jobStatus) error {
	return g.render(list, func(t table.Writer) {
		t.AppendHeader(table.Row{"job", "status", "document", "written", "consistency token", "error"})
		for _, s := range list {
			t.AppendRow(table.Row{s.JobID, s.Status, s.DocumentID, written(s), s.ConsistencyToken, failure(s)})
		}
	})
}

// checkJobIDs refuses, as a usage error, an id that is not a job id (the
// ingest API answers it 404 without looking).
func checkJobIDs(ids []string) error {
	for _, id := range ids {
		if record.ClassifyUnresolved(id, -1, time.Time{}) == record.MalformedJobID {
			return usagef("%q is not a job id (a UUID in lowercase 8-4-4-4-12 form)", id)
		}
	}
	return nil
}

// lookUpJobs reads the stored results of ids (checked by checkJobIDs) and
// answers as GET /v1/jobs/{id} does (record.ClassifyUnresolved): an id with
// no result is PENDING, unless it is a UUIDv7 older than retention, whose job
// will never have one: not found. It returns what it found and, when an id
// was not found, an error naming it.
func lookUpJobs(ctx context.Context, s *postgres.Store, ids []string, retention time.Duration) ([]jobStatus, error) {
	found, err := s.JobResults(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("reading job results: %w", err)
	}
	var (
		out     []jobStatus
		missing []string
	)
	for _, id := range ids {
		r, ok := found[id]
		switch {
		case ok:
			out = append(out, statusOf(r))
		case record.ClassifyUnresolved(id, retention, time.Now()) == record.ExpiredJobID:
			missing = append(missing, id)
		default:
			out = append(out, jobStatus{JobID: id, Status: oplog.JobPending})
		}
	}
	if len(missing) > 0 {
		return out, fmt.Errorf("no such job: %s has no result and was submitted more than %s ago, past the jobs topic's retention (--topics-jobs-retention)",
			strings.Join(missing, ", "), retention)
	}
	return out, nil
}
