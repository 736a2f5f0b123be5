package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Outcome is what became of one acknowledged job.
type Outcome struct {
	Entry
	Status   string // from GET /v1/jobs/{id}; "" when it could not be read
	Reason   string // the first error's name, for FAILED
	Written  int    // operations of the job in the log
	Distinct int    // of them, distinct op ids
	Err      error
}

// Final says whether the job ended as the guarantee demands: WRITE_READY or
// READ_READY, or FAILED with a reason.
func (o Outcome) Final() bool {
	switch o.Status {
	case "WRITE_READY", "READ_READY":
		return true
	case "FAILED":
		return o.Reason != ""
	}
	return false
}

// AppliedTwice says whether the log holds more of the job than one
// application writes: an op id repeated, or more operations than its
// actions.
func (o Outcome) AppliedTwice() bool { return o.Distinct != o.Written || o.Written > o.Ops }

// Inconsistent says whether the log disagrees with the status: a succeeded
// job missing operations, or a failed one holding some.
func (o Outcome) Inconsistent() bool {
	switch o.Status {
	case "WRITE_READY", "READ_READY":
		return o.Written < o.Ops
	case "FAILED":
		return o.Written > 0
	}
	return false
}

// CheckLedger asks ingest's status API about every acknowledged job and
// counts its operations in the log.
func CheckLedger(ctx context.Context, ingestURL string, pool *pgxpool.Pool, entries []Entry) ([]Outcome, error) {
	out := make([]Outcome, len(entries))
	for i, e := range entries {
		out[i].Entry = e
	}
	client := &http.Client{Timeout: 10 * time.Second}
	parallel(48, len(out), func(i int) {
		out[i].Status, out[i].Reason, out[i].Err = jobStatus(ctx, client, ingestURL, out[i].JobID)
	})
	if err := countOps(ctx, pool, out); err != nil {
		return out, err
	}
	return out, nil
}

type statusBody struct {
	Status       string `json:"status"`
	ErrorHistory []struct {
		Name    string `json:"name"`
		Message string `json:"message"`
	} `json:"errorHistory"`
}

// jobStatus reads one job's status, retrying a few times: ingest has just
// been through the faults too.
func jobStatus(ctx context.Context, client *http.Client, base, id string) (status, reason string, err error) {
	for attempt := range 5 {
		if attempt > 0 {
			_ = sleep(ctx, 200*time.Millisecond)
		}
		var req *http.Request
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/jobs/"+id, nil)
		if err != nil {
			return "", "", fmt.Errorf("building a status request: %w", err)
		}
		var resp *http.Response
		resp, err = client.Do(req)
		if err != nil {
			err = fmt.Errorf("reading the status of %s: %w", id, err)
			continue
		}
		var b statusBody
		derr := json.NewDecoder(resp.Body).Decode(&b)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || derr != nil {
			err = fmt.Errorf("reading the status of %s: %s (%v)", id, resp.Status, derr)
			continue
		}
		if len(b.ErrorHistory) > 0 {
			reason = b.ErrorHistory[0].Name
		}
		return b.Status, reason, nil
	}
	return "", "", err
}

func countOps(ctx context.Context, pool *pgxpool.Pool, out []Outcome) error {
	byJob := make(map[string]int, len(out))
	ids := make([]string, len(out))
	for i, o := range out {
		byJob[o.JobID] = i
		ids[i] = o.JobID
	}
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), 5000)]
		ids = ids[len(chunk):]
		rows, err := pool.Query(ctx, `SELECT job_id, count(*), count(DISTINCT op_id) FROM operations WHERE job_id = ANY($1) GROUP BY job_id`, chunk)
		if err != nil {
			return fmt.Errorf("counting the jobs' operations: %w", err)
		}
		for rows.Next() {
			var id string
			var n, u int
			if err := rows.Scan(&id, &n, &u); err != nil {
				rows.Close()
				return fmt.Errorf("counting the jobs' operations: %w", err)
			}
			out[byJob[id]].Written, out[byJob[id]].Distinct = n, u
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("counting the jobs' operations: %w", err)
		}
	}
	return nil
}
