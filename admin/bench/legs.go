package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/doclog/doclog/kafka"
)

// Leg is one part of the way from submission to READ_READY, over the jobs
// that reached READ_READY and whose two records were found. Each job's legs
// add up to its READ_READY latency, so the means add up to the mean
// latency; the percentiles do not add up.
type Leg struct {
	Name   string  `json:"name"`
	Span   string  `json:"span"`
	Jobs   int     `json:"jobs"`
	MeanMs float64 `json:"meanMs"`
	P50Ms  float64 `json:"p50Ms"`
	P95Ms  float64 `json:"p95Ms"`
	P99Ms  float64 `json:"p99Ms"`
	MaxMs  float64 `json:"maxMs"`
}

// legSpans name the legs and say what bounds each, in order.
var legSpans = [...][2]string{
	{"submit", "submission to the job record's timestamp (ingest's produce call, or this tool's with --via kafka)"},
	{"executor wait", "job record to WRITE_READY (the producer's linger and the broker, the executor's fetch and queue, lookup, loads and reducers)"},
	{"append and announce", "WRITE_READY to the write-ready record's timestamp (the append and its commit, then the executor's produce call)"},
	{"projection", "write-ready record to READ_READY (the broker's ack, the docview projector's fetch and transaction, the sampler)"},
}

// legsReadTimeout bounds reading the run's records back: the run has
// already been measured, and its legs must not hold the report up.
const legsReadTimeout = time.Minute

// legsListTimeout bounds finding a topic's end offsets, the first request.
const legsListTimeout = 10 * time.Second

// recordTimes are the timestamps of a job's two records on the topics.
type recordTimes struct{ job, writeReady time.Time }

// legs reads the run's jobs and write-ready records back from Kafka, after
// the drain (so nothing it does loads the measured phase), and splits each
// READ_READY job's latency at the two record timestamps. Producers stamp a
// record when it is produced (CreateTime, in milliseconds), and every clock
// involved is this host's when doclog runs here.
func (r *runner) legs(ctx context.Context, topics kafka.Topics) ([]Leg, error) {
	ctx, cancel := context.WithTimeout(ctx, legsReadTimeout)
	defer cancel()
	ids := map[string]*recordTimes{}
	for _, js := range r.jobs {
		for _, j := range js {
			ids[j.id.String()] = &recordTimes{}
		}
	}
	if err := readJobIDs(ctx, r.cfg.Kafka, topics.Jobs, func(id string, ts time.Time) {
		if t := ids[id]; t != nil && (t.job.IsZero() || ts.Before(t.job)) {
			t.job = ts
		}
	}); err != nil {
		return nil, err
	}
	// A re-announced job has two write-ready records: the first counts.
	if err := readJobIDs(ctx, r.cfg.Kafka, topics.WriteReady, func(id string, ts time.Time) {
		if t := ids[id]; t != nil && (t.writeReady.IsZero() || ts.Before(t.writeReady)) {
			t.writeReady = ts
		}
	}); err != nil {
		return nil, err
	}
	var spans [len(legSpans)][]time.Duration
	for d, js := range r.jobs {
		for _, j := range js {
			t := ids[j.id.String()]
			if j.state == jobPending || t.job.IsZero() || t.writeReady.IsZero() {
				continue
			}
			at, ok := r.samp.reached(d, max(j.index, 0))
			if !ok {
				continue
			}
			points := [...]time.Time{j.submittedAt(), t.job, j.writeReadyAt(), t.writeReady, at}
			for i := range spans {
				spans[i] = append(spans[i], points[i+1].Sub(points[i]))
			}
		}
	}
	out := make([]Leg, len(legSpans))
	for i, lat := range spans {
		out[i] = newLeg(legSpans[i][0], legSpans[i][1], lat)
	}
	return out, nil
}

func newLeg(name, span string, lat []time.Duration) Leg {
	l := Leg{Name: name, Span: span, Jobs: len(lat)}
	if len(lat) == 0 {
		return l
	}
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	slices.Sort(lat)
	l.MeanMs = ms(sum / time.Duration(len(lat)))
	l.P50Ms, l.P95Ms, l.P99Ms = ms(percentile(lat, 50)), ms(percentile(lat, 95)), ms(percentile(lat, 99))
	l.MaxMs = ms(lat[len(lat)-1])
	return l
}

// readJobIDs reads topic from its start to the end offsets it has when the
// read begins, and calls fn with each record's jobId and timestamp. Records
// without a jobId (not doclog's) are skipped.
func readJobIDs(ctx context.Context, cfg kafka.Config, topic string, fn func(id string, ts time.Time)) error {
	cl, err := kafka.NewClient(cfg, nil, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return fmt.Errorf("reading %s back: %w", topic, err)
	}
	defer cl.Close()
	// A broker that cannot be reached (a run against a remote doclog with
	// the default seeds) fails here, within seconds rather than at the end
	// of legsReadTimeout.
	lctx, cancel := context.WithTimeout(ctx, legsListTimeout)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(lctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("reading %s back: listing its end offsets: %w", topic, err)
	}
	left := map[int32]int64{} // partition → end offset, while records remain
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			left[o.Partition] = o.Offset
		}
	})
	var rec struct {
		JobID string `json:"jobId"`
	}
	for len(left) > 0 {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("reading %s back: %d partitions not read to their end: %w", topic, len(left), err)
		}
		var ferr error
		fetches.EachError(func(_ string, p int32, err error) { ferr = errors.Join(ferr, fmt.Errorf("partition %d: %w", p, err)) })
		if ferr != nil {
			return fmt.Errorf("reading %s back: %w", topic, ferr)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if end, ok := left[r.Partition]; ok && r.Offset+1 >= end {
				delete(left, r.Partition)
			}
			rec.JobID = ""
			if jsonv2.Unmarshal(r.Value, &rec) == nil && rec.JobID != "" {
				fn(rec.JobID, r.Timestamp)
			}
		})
	}
	return nil
}
