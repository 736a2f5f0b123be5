package bench

import (
	"slices"
	"time"

	"github.com/doclog/doclog/admin/bench/pgprobe"
)

// Report is a run's outcome; its JSON form is `doclogctl bench -o json`.
type Report struct {
	Mode          string  `json:"mode"`
	Via           string  `json:"via"`
	Loop          string  `json:"loop"` // closed or open
	RateOpsPerSec float64 `json:"rateOpsPerSec,omitempty"`
	Embedded      bool    `json:"embedded"`
	// Schema is the embedded run's own Postgres schema, dropped after it.
	Schema             string `json:"schema,omitempty"`
	Documents          int    `json:"documents"`
	ActionsPerDocument int    `json:"actionsPerDocument"`
	// DurationSeconds is zero for a fixed workload (Rounds or Operations).
	DurationSeconds float64 `json:"durationSeconds"`
	Rounds          int     `json:"rounds,omitempty"`
	Operations      int     `json:"operations,omitempty"`
	// Workload says what was submitted: "for 30s", "1 round(s) per
	// document, 10000 operations" or "10000 operations".
	Workload string `json:"workload"`
	// JobsPerRequest is Config.JobsPerRequest: above 1, jobs went through
	// POST /v1/jobs:batch.
	JobsPerRequest int `json:"jobsPerRequest"`
	// Coalesce is Config.Coalesce: above 0, jobs went through the client
	// package's Batcher, up to this many per request.
	Coalesce int `json:"coalesce,omitempty"`
	// StateBytes is workload W2's state size (0: workload W1).
	StateBytes       int     `json:"stateBytes,omitempty"`
	SampleIntervalMs float64 `json:"sampleIntervalMs"`
	// SamplePollOnly: READ_READY was sampled by the interval alone, not
	// also at the view's notified commits.
	SamplePollOnly bool `json:"samplePollOnly,omitempty"`
	// AsyncAnnounce: the embedded executor announced without waiting.
	AsyncAnnounce bool `json:"asyncAnnounce,omitempty"`

	// Submitted counts the acknowledged submissions; SubmitSeconds is how
	// long submitting took (the duration, plus the last acknowledgements).
	Submitted      Count   `json:"submitted"`
	SubmitSeconds  float64 `json:"submitSeconds"`
	SubmitFailures int64   `json:"submitFailures"`
	// Refusals counts the submissions ingest answered 429 (backpressure:
	// its executor_lag bound), each waited out for its Retry-After and
	// sent again; RefusedSeconds is the sum of those waits over all
	// documents. Jobs sent via kafka bypass ingest and are never refused.
	Refusals       int64   `json:"refusals"`
	RefusedSeconds float64 `json:"refusedSeconds"`
	LastSubmitErr  string  `json:"lastSubmitError,omitempty"`
	// Drained is true when every submitted job reached READ_READY or
	// FAILED within the drain time.
	Drained bool `json:"drained"`
	Failed  int  `json:"failed"`

	WriteReady Stage `json:"writeReady"`
	ReadReady  Stage `json:"readReady"`
	// Legs split the READ_READY latency at the timestamps of each job's
	// records (see Leg); LegsError says why they are missing when the
	// records could not be read back.
	Legs      []Leg  `json:"legs,omitempty"`
	LegsError string `json:"legsError,omitempty"`

	// PeakRSS is empty when no doclog process was found on this host.
	PeakRSS []ProcessRSS `json:"peakRss"`
	// CPU is the CPU time of the pipeline's processes on this host over
	// the measured phase, per operation submitted.
	CPU      *CPU      `json:"cpu,omitempty"`
	Postgres Postgres  `json:"postgres"`
	Baseline *Baseline `json:"baseline,omitempty"`
}

// Count is a number of jobs and the operations they carry.
type Count struct {
	Jobs       int `json:"jobs"`
	Operations int `json:"operations"`
}

// Stage is throughput and latency to one job status.
type Stage struct {
	Count
	// Seconds is from the first submission to the last job reaching the
	// stage; the rates are over it.
	Seconds       float64 `json:"seconds"`
	JobsPerSec    float64 `json:"jobsPerSec"`
	OpsPerSec     float64 `json:"opsPerSec"`
	LatencyP50Ms  float64 `json:"latencyP50Ms"`
	LatencyP95Ms  float64 `json:"latencyP95Ms"`
	LatencyP99Ms  float64 `json:"latencyP99Ms"`
	LatencyMaxMs  float64 `json:"latencyMaxMs"`
	LatencySource string  `json:"latencySource"`
}

// Postgres is the database's activity over the measured phase (submission
// and drain), the benchmark's own probes subtracted.
type Postgres struct {
	// Source names the counters: pg_stat_statements when installed (for
	// statements), pg_stat_database always.
	Source             string   `json:"source"`
	Transactions       int64    `json:"transactions"`
	TransactionsPerOp  float64  `json:"transactionsPerOp"`
	Statements         *int64   `json:"statements,omitempty"`
	StatementsPerOp    *float64 `json:"statementsPerOp,omitempty"`
	TuplesInserted     int64    `json:"tuplesInserted"`
	TuplesUpdated      int64    `json:"tuplesUpdated"`
	TuplesDeleted      int64    `json:"tuplesDeleted"`
	TuplesFetched      int64    `json:"tuplesFetched"`
	TuplesWrittenPerOp float64  `json:"tuplesWrittenPerOp"`
	TuplesFetchedPerOp float64  `json:"tuplesFetchedPerOp"`
	ProbeStatements    int64    `json:"probeStatements"`
	Scope              string   `json:"scope"`
}

// Baseline is the raw COPY of the run's operation rows.
type Baseline struct {
	Rows       int     `json:"rows"`
	ChunkRows  int     `json:"chunkRows"`
	Seconds    float64 `json:"seconds"`
	RowsPerSec float64 `json:"rowsPerSec"`
	// The ratios are doclog's operations/s to the stage over the COPY's
	// rows/s.
	RatioWriteReady float64 `json:"ratioWriteReady"`
	RatioReadReady  float64 `json:"ratioReadReady"`
}

// fill computes the report's throughput and latency from the job results
// and the view samples.
func (r *runner) fill(rep *Report, start, loadDone time.Time, drained bool) {
	c := r.cfg
	rep.Mode, rep.Via, rep.Loop, rep.RateOpsPerSec = c.Mode, c.Via, "closed", c.Rate
	if c.Rate > 0 {
		rep.Loop = "open"
	}
	rep.Embedded, rep.Schema, rep.Documents, rep.ActionsPerDocument = c.Embedded, r.schema, c.Documents, c.ActionsPerDocument
	rep.StateBytes, rep.JobsPerRequest, rep.Coalesce = c.StateBytes, c.JobsPerRequest, c.Coalesce
	rep.DurationSeconds, rep.SampleIntervalMs = c.Duration.Seconds(), float64(c.SampleInterval)/float64(time.Millisecond)
	rep.SamplePollOnly = c.SamplePollOnly
	rep.AsyncAnnounce = c.AsyncAnnounce
	rep.Rounds, rep.Operations, rep.Workload = c.Rounds, c.Operations, c.workload()
	rep.SubmitSeconds = loadDone.Sub(start).Seconds()
	rep.SubmitFailures = r.fails.Load()
	rep.Refusals, rep.RefusedSeconds = r.refusals.Load(), time.Duration(r.refusedFor.Load()).Seconds()
	if s, ok := r.lastErr.Load().(string); ok {
		rep.LastSubmitErr = s
	}
	rep.Drained = drained

	var wrLat, rrLat []time.Duration
	var lastWR, lastRR time.Time
	for d, js := range r.jobs {
		for _, j := range js {
			rep.Submitted.Jobs++
			rep.Submitted.Operations += int(j.ops)
			switch j.state {
			case jobPending:
				continue
			case jobFailed:
				rep.Failed++
				continue
			}
			rep.WriteReady.Jobs++
			rep.WriteReady.Operations += int(j.ops)
			wr := j.writeReadyAt()
			wrLat = append(wrLat, wr.Sub(j.submittedAt()))
			if wr.After(lastWR) {
				lastWR = wr
			}
			at, ok := r.samp.reached(d, max(j.index, 0))
			if !ok {
				continue
			}
			rep.ReadReady.Jobs++
			rep.ReadReady.Operations += int(j.ops)
			rrLat = append(rrLat, at.Sub(j.submittedAt()))
			if at.After(lastRR) {
				lastRR = at
			}
		}
	}
	rep.WriteReady.finish(start, lastWR, wrLat, "jobs.created_at (executor transaction start, database clock) minus submission time")
	rep.ReadReady.finish(start, lastRR, rrLat, "first document-view sample at the job's token index minus submission time")
}

func (s *Stage) finish(start, last time.Time, lat []time.Duration, source string) {
	s.LatencySource = source
	if s.Jobs == 0 {
		return
	}
	s.Seconds = last.Sub(start).Seconds()
	if s.Seconds > 0 {
		s.JobsPerSec = float64(s.Jobs) / s.Seconds
		s.OpsPerSec = float64(s.Operations) / s.Seconds
	}
	slices.Sort(lat)
	s.LatencyP50Ms, s.LatencyP95Ms = ms(percentile(lat, 50)), ms(percentile(lat, 95))
	s.LatencyP99Ms, s.LatencyMaxMs = ms(percentile(lat, 99)), ms(lat[len(lat)-1])
}

// percentile is the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 × n)
	return sorted[max(rank, 1)-1]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func postgresReport(d pgprobe.Activity, probes int64, ops int) Postgres {
	p := Postgres{Source: "pg_stat_database", Scope: "database-wide: every session of the database counts, the benchmark's own probes subtracted",
		ProbeStatements: probes,
		Transactions:    d.XactCommit + d.XactRollback - probes,
		TuplesInserted:  d.TupInserted, TuplesUpdated: d.TupUpdated, TuplesDeleted: d.TupDeleted, TuplesFetched: d.TupFetched}
	if d.Statements >= 0 {
		p.Source = "pg_stat_statements, pg_stat_database"
		n := d.Statements - probes
		p.Statements = &n
	}
	if ops > 0 {
		p.TransactionsPerOp = float64(p.Transactions) / float64(ops)
		p.TuplesWrittenPerOp = float64(d.TupInserted+d.TupUpdated+d.TupDeleted) / float64(ops)
		p.TuplesFetchedPerOp = float64(d.TupFetched) / float64(ops)
		if p.Statements != nil {
			v := float64(*p.Statements) / float64(ops)
			p.StatementsPerOp = &v
		}
	}
	return p
}

func baselineReport(res pgprobe.CopyResult, chunk int, rep *Report) *Baseline {
	b := &Baseline{Rows: res.Rows, ChunkRows: chunk, Seconds: res.Elapsed.Seconds()}
	if b.Seconds > 0 {
		b.RowsPerSec = float64(res.Rows) / b.Seconds
	}
	if b.RowsPerSec > 0 {
		b.RatioWriteReady = rep.WriteReady.OpsPerSec / b.RowsPerSec
		b.RatioReadReady = rep.ReadReady.OpsPerSec / b.RowsPerSec
	}
	return b
}
