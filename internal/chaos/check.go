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
	// Load is what a load job's placement said it did, nil for other jobs
	// and for a load that did not succeed.
	Load *LoadCounts
	Err  error
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
func (o Outcome) AppliedTwice() bool { return o.Distinct != o.Written || o.Written > o.writes() }

// Inconsistent says whether the log disagrees with the status: a succeeded
// job missing operations, or a failed one holding some.
func (o Outcome) Inconsistent() bool {
	switch o.Status {
	case "WRITE_READY", "READ_READY":
		return o.Written < o.writes()
	case "FAILED":
		return o.Written > 0
	}
	return false
}

// writes is how many operations one application of the job writes: a load
// writes what its placement stored and the stored operations it moved.
func (o Outcome) writes() int {
	if o.Load != nil {
		return int(o.Load.Stored + o.Load.Reshuffled)
	}
	return o.Ops
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
		var res jobResult
		res, out[i].Err = jobStatus(ctx, client, ingestURL, out[i].JobID)
		out[i].Status, out[i].Reason, out[i].Load = res.Status, res.Reason, res.Load
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
	Load *struct {
		Streams []struct {
			Stored     int64 `json:"stored"`
			Replayed   int64 `json:"replayed"`
			Superseded int64 `json:"superseded"`
			Reshuffled int64 `json:"reshuffled"`
			Skip       int64 `json:"skip"`
		} `json:"streams"`
	} `json:"load"`
}

func (b *statusBody) result() jobResult {
	r := jobResult{Status: b.Status}
	if len(b.ErrorHistory) > 0 {
		r.Reason = b.ErrorHistory[0].Name
	}
	if b.Load != nil {
		r.Load = &LoadCounts{}
		for _, s := range b.Load.Streams {
			r.Load.Stored += s.Stored
			r.Load.Replayed += s.Replayed
			r.Load.Superseded += s.Superseded
			r.Load.Reshuffled += s.Reshuffled
			r.Load.Skip = max(r.Load.Skip, s.Skip)
		}
	}
	return r
}

// jobStatus reads one job's status, retrying a few times: ingest has just
// been through the faults too.
func jobStatus(ctx context.Context, client *http.Client, base, id string) (res jobResult, err error) {
	for attempt := range 5 {
		if attempt > 0 {
			_ = sleep(ctx, 200*time.Millisecond)
		}
		if res, err = jobStatusWait(ctx, client, base, id, 0); err == nil {
			return res, nil
		}
	}
	return res, err
}

// jobStatusWait reads one job's status once, letting ingest hold the
// answer up to wait for the job's result.
func jobStatusWait(ctx context.Context, client *http.Client, base, id string, wait time.Duration) (jobResult, error) {
	u := base + "/v1/jobs/" + id
	if wait > 0 {
		u += "?wait=" + wait.String()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return jobResult{}, fmt.Errorf("building a status request: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return jobResult{}, fmt.Errorf("reading the status of %s: %w", id, err)
	}
	defer resp.Body.Close()
	var b statusBody
	derr := json.NewDecoder(resp.Body).Decode(&b)
	if resp.StatusCode != http.StatusOK || derr != nil {
		return jobResult{}, fmt.Errorf("reading the status of %s: %s (%v)", id, resp.Status, derr)
	}
	return b.result(), nil
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
