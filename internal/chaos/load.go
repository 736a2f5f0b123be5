package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// LoadStats counts what the load saw besides acknowledgements.
type LoadStats struct {
	Submitted  int64 // jobs started
	Attempts   int64 // HTTP attempts, retries included
	Retries503 int64 // 503s and 429s
	RetriesNet int64 // connection errors and timeouts
	Dropped    int64 // ticks with every worker busy (retrying)
	Abandoned  int64 // jobs never acknowledged before the load's deadline
	Rejected   int64 // any other answer: a bug of the harness or of ingest
	LastReject string
}

// Load submits jobs to ingest at a rate, each under an Idempotency-Key of its
// own, retrying with the same key after a 503, a connection error or a
// timeout until acknowledged or abandoned at the deadline.
type Load struct {
	URL     string // ingest's base URL
	Rate    float64
	Workers int
	Seed    uint64
	Ledger  *Ledger

	client *http.Client
	once   sync.Once
	stats  LoadStats
	mu     sync.Mutex
	docs   []string // created documents whose create was acknowledged
	seq    atomic.Int64
}

// Stats returns the counters so far.
func (l *Load) Stats() LoadStats {
	return LoadStats{
		Submitted: atomic.LoadInt64(&l.stats.Submitted), Attempts: atomic.LoadInt64(&l.stats.Attempts),
		Retries503: atomic.LoadInt64(&l.stats.Retries503), RetriesNet: atomic.LoadInt64(&l.stats.RetriesNet),
		Dropped: atomic.LoadInt64(&l.stats.Dropped), Abandoned: atomic.LoadInt64(&l.stats.Abandoned),
		Rejected: atomic.LoadInt64(&l.stats.Rejected), LastReject: l.lastReject(),
	}
}

func (l *Load) lastReject() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stats.LastReject
}

// Run submits until stop is done, then lets jobs in flight retry until
// deadline is done.
func (l *Load) Run(stop, deadline context.Context) {
	l.start()
	ticks := make(chan struct{}, l.Workers)
	var wg sync.WaitGroup
	for w := range l.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(l.Seed, uint64(w)+1))
			for {
				select {
				case <-stop.Done():
					return
				case <-ticks:
					l.submit(deadline, rng)
				}
			}
		}()
	}
	t := time.NewTicker(time.Duration(float64(time.Second) / l.Rate))
	defer t.Stop()
	for {
		select {
		case <-stop.Done():
			wg.Wait()
			return
		case <-t.C:
			select {
			case ticks <- struct{}{}:
			default:
				atomic.AddInt64(&l.stats.Dropped, 1)
			}
		}
	}
}

// start makes the HTTP client every submit shares, the ordinary traffic's
// and the sync drivers'.
func (l *Load) start() {
	l.once.Do(func() {
		// Shorter than ingest's 10 s produce timeout: while the broker is
		// down the client gives up first and retries, which is what puts
		// duplicate records of one job on the topic.
		l.client = &http.Client{Timeout: 3 * time.Second}
	})
}

// job is one submit: its path, body and the ledger entry it becomes.
type job struct {
	path string
	body any
	e    Entry
}

func (l *Load) next(rng *rand.Rand) job {
	key := l.key()
	l.mu.Lock()
	var doc string
	if len(l.docs) > 0 {
		doc = l.docs[rng.IntN(len(l.docs))]
	}
	few := len(l.docs) < 20
	l.mu.Unlock()
	p := rng.Float64()
	switch {
	case doc == "" || few || p < 0.08:
		return job{path: "/v1/documents", e: Entry{Key: key, Kind: KindCreate, Ops: 2}, body: map[string]any{
			"documentType": "doclog/ledger",
			"actions":      []any{map[string]any{"type": "OPEN_ACCOUNT", "scope": "global", "input": map[string]any{"accountId": "a"}}},
		}}
	case p < 0.11:
		// More than every deposit of the run together: an overdraft, so
		// the pipeline's FAILED path runs under the same faults.
		amount := int64(1) << 52
		return job{path: "/v1/jobs", e: Entry{Key: key, Kind: KindWithdraw, DocID: doc, Amount: amount, Ops: 1}, body: mutate(doc, "WITHDRAW", amount)}
	default:
		amount := int64(1 + rng.IntN(100))
		return job{path: "/v1/jobs", e: Entry{Key: key, Kind: KindDeposit, DocID: doc, Amount: amount, Ops: 1}, body: mutate(doc, "DEPOSIT", amount)}
	}
}

func mutate(doc, action string, amount int64) map[string]any {
	return map[string]any{
		"documentId": doc, "documentType": "doclog/ledger",
		"actions": []any{map[string]any{"type": action, "scope": "global", "input": map[string]any{"accountId": "a", "amount": amount}}},
	}
}

// submit sends one job of the ordinary traffic.
func (l *Load) submit(deadline context.Context, rng *rand.Rand) {
	e, ok := l.send(deadline, l.next(rng))
	if ok && e.Kind == KindCreate {
		l.mu.Lock()
		l.docs = append(l.docs, e.DocID)
		l.mu.Unlock()
	}
}

// send submits j until it is acknowledged (then it is in the ledger, and
// returned), refused, or deadline ends.
func (l *Load) send(deadline context.Context, j job) (Entry, bool) {
	l.start()
	atomic.AddInt64(&l.stats.Submitted, 1)
	body, _ := json.Marshal(j.body)
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		if deadline.Err() != nil {
			atomic.AddInt64(&l.stats.Abandoned, 1)
			return Entry{}, false
		}
		atomic.AddInt64(&l.stats.Attempts, 1)
		status, resp, err := l.post(deadline, j.path, j.e.Key, body)
		switch {
		case err == nil && status == http.StatusAccepted:
			e := j.e
			e.JobID, e.AckedAt, e.Attempts = resp.JobID, time.Now(), attempt
			if e.DocID == "" {
				e.DocID = resp.DocumentID
			}
			l.Ledger.Add(e)
			return e, true
		case err == nil && (status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests):
			// 429 is ingest's backpressure (nothing produced): retried with
			// the same key like a 503. Giving up there would drop a job an
			// earlier attempt that timed out may have produced.
			atomic.AddInt64(&l.stats.Retries503, 1)
		case err != nil:
			atomic.AddInt64(&l.stats.RetriesNet, 1)
		default:
			atomic.AddInt64(&l.stats.Rejected, 1)
			l.mu.Lock()
			l.stats.LastReject = fmt.Sprintf("%d %s", status, resp.raw)
			l.mu.Unlock()
			return Entry{}, false
		}
		select {
		case <-deadline.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// key is the Idempotency-Key of the next job: every attempt of a job
// carries its own.
func (l *Load) key() string { return fmt.Sprintf("chaos-%d-%d", l.Seed, l.seq.Add(1)) }

type submitResponse struct {
	JobID      string `json:"jobId"`
	DocumentID string `json:"documentId"`
	raw        string
}

func (l *Load) post(ctx context.Context, path, key string, body []byte) (int, submitResponse, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.URL+path, bytes.NewReader(body))
	if err != nil {
		return 0, submitResponse{}, fmt.Errorf("building a submit: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := l.client.Do(req)
	if err != nil {
		return 0, submitResponse{}, fmt.Errorf("submitting: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return 0, submitResponse{}, fmt.Errorf("reading a submit's answer: %w", err)
	}
	var r submitResponse
	r.raw = string(raw)
	if resp.StatusCode == http.StatusAccepted {
		if err := json.Unmarshal(raw, &r); err != nil || r.JobID == "" {
			return 0, r, errors.Join(errors.New("a 202 without a job id"), err)
		}
	}
	return resp.StatusCode, r, nil
}
