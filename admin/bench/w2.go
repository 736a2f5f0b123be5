package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
)

// Workload W2's records: each about recordBytes of canonical JSON, keyed so
// that a document's records sort in the order they were made.
const (
	recordBytes = 88
	// fillJobBytes bounds the records of one fill job, well inside the
	// ingest API's body limit and Kafka's record size.
	fillJobBytes = 192 << 10
)

func recordKey(i int) string { return fmt.Sprintf("item-%06d", i) }

// records is how many records make a state of StateBytes.
func (c Config) records() int { return (c.StateBytes + recordBytes - 1) / recordBytes }

// fillJobs is how many fill jobs a document of workload W2 receives.
func (c Config) fillJobs() int {
	if c.StateBytes <= 0 {
		return 0
	}
	per := fillJobBytes / recordBytes
	return (c.records() + per - 1) / per
}

// grow fills every document's global state to StateBytes, one document's
// jobs after another's acknowledgement, all documents at once, and returns
// the fill jobs' ids.
func (r *runner) grow(ctx context.Context) ([]string, error) {
	n, per := r.cfg.records(), fillJobBytes/recordBytes
	ids := make([][]string, len(r.docs))
	errs := make([]error, len(r.docs))
	var wg sync.WaitGroup
	for d, doc := range r.docs {
		wg.Go(func() {
			for from := 0; from < n; from += per {
				patch := make(map[string]any, per)
				for i := from; i < min(n, from+per); i++ {
					patch[recordKey(i)] = map[string]any{"title": "a record of moderate length", "n": i, "ok": true, "tags": []string{"x", "y"}}
				}
				raw, err := json.Marshal(patch)
				if err != nil {
					errs[d] = err
					return
				}
				id, err := admitted(ctx, func() (string, error) { return r.sub.mutate(ctx, doc, []json.RawMessage{raw}) })
				if err != nil {
					errs[d] = fmt.Errorf("filling document %s to %d bytes: %w", doc, r.cfg.StateBytes, err)
					return
				}
				ids[d] = append(ids[d], id)
			}
		})
	}
	wg.Wait()
	var all []string
	for d := range ids {
		if errs[d] != nil {
			return nil, errs[d]
		}
		all = append(all, ids[d]...)
	}
	return all, nil
}

// editRecord is a W2 action: one member of one record changes, the records
// taken in turn (a stride through them, so consecutive actions of a
// document land far apart).
func (r *runner) editRecord(n, i int) json.RawMessage {
	recs := r.cfg.records()
	const stride = 7919 // a prime: the walk visits every record
	k := (n*r.cfg.ActionsPerDocument + i) * stride % recs
	return json.RawMessage(fmt.Sprintf(`{%q:{"n":%d}}`, recordKey(k), n))
}
