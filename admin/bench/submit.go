package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/doclog/doclog/client"
	"github.com/doclog/doclog/ingest"
	"github.com/doclog/doclog/kafka"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/record"
)

// submitter sends one job and returns its id once it was acknowledged.
type submitter interface {
	create(ctx context.Context, documentID string) (string, error)
	mutate(ctx context.Context, documentID string, inputs []json.RawMessage) (string, error)
	close()
}

// httpSubmitter submits through the ingest API, as a client would.
type httpSubmitter struct {
	base, token string
	client      *http.Client
}

func newHTTPSubmitter(base, token string, conns int) *httpSubmitter {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// One keep-alive connection per document: the documents submit at once.
	tr.MaxIdleConnsPerHost = conns
	return &httpSubmitter{base: strings.TrimRight(base, "/"), token: token, client: &http.Client{Transport: tr, Timeout: time.Minute}}
}

func (s *httpSubmitter) create(ctx context.Context, documentID string) (string, error) {
	return s.post(ctx, "/v1/documents", map[string]any{"documentId": documentID, "documentType": jsondoc.DocumentType})
}

func (s *httpSubmitter) mutate(ctx context.Context, documentID string, inputs []json.RawMessage) (string, error) {
	return s.post(ctx, "/v1/jobs", map[string]any{"documentId": documentID, "documentType": jsondoc.DocumentType, "actions": mergePatches(inputs)})
}

// mergePatches are W1's actions of a job: a merge patch of the global
// scope per input.
func mergePatches(inputs []json.RawMessage) []client.Action {
	actions := make([]client.Action, len(inputs))
	for i, in := range inputs {
		actions[i] = client.Action{Type: jsondoc.ActionMergePatch, Scope: oplog.ScopeGlobal, Input: in}
	}
	return actions
}

func (s *httpSubmitter) post(ctx context.Context, path string, body any) (string, error) {
	data, err := s.send(ctx, path, body, http.StatusAccepted)
	if err != nil {
		return "", err
	}
	var ok struct {
		JobID string `json:"jobId"`
	}
	if err := json.Unmarshal(data, &ok); err != nil || ok.JobID == "" {
		return "", fmt.Errorf("submitting to %s: an answer without a job id: %s", path, data)
	}
	return ok.JobID, nil
}

// send posts body as JSON to path and returns the answer's body when its
// status is want.
func (s *httpSubmitter) send(ctx context.Context, path string, body any, want int) ([]byte, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+path, bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("submitting to %s: %w", path, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("submitting to %s: %w", path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading the answer of %s: %w", path, err)
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		return nil, &refusal{path: path, retryAfter: retryAfter(resp.Header), body: string(bytes.TrimSpace(data))}
	}
	if resp.StatusCode != want {
		return nil, fmt.Errorf("submitting to %s: %s: %s", path, resp.Status, bytes.TrimSpace(data))
	}
	return data, nil
}

// refusal is a 429: ingest's backpressure (executor_lag), to be waited out
// for its Retry-After and sent again, since nothing was produced.
type refusal struct {
	path       string
	retryAfter time.Duration
	body       string
}

func (e *refusal) Error() string {
	return fmt.Sprintf("submitting to %s: 429, retry after %s: %s", e.path, e.retryAfter, e.body)
}

// retryAfter is the wait ingest advises, as the client package reads it;
// one second when the answer advises none.
func retryAfter(h http.Header) time.Duration { return orOneSecond(client.RetryAfter(h, time.Now())) }

// orOneSecond is an advised wait, or one second when none was advised.
func orOneSecond(d time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return time.Second
}

// mutateMany submits the jobs through POST /v1/jobs:batch.
func (s *httpSubmitter) mutateMany(ctx context.Context, jobs []mutation) ([]string, []error, error) {
	type wireJob struct {
		DocumentID   string          `json:"documentId"`
		DocumentType string          `json:"documentType"`
		Actions      []client.Action `json:"actions"`
	}
	body := struct {
		Jobs []wireJob `json:"jobs"`
	}{make([]wireJob, len(jobs))}
	for i, j := range jobs {
		body.Jobs[i] = wireJob{DocumentID: j.documentID, DocumentType: jsondoc.DocumentType, Actions: mergePatches(j.inputs)}
	}
	data, err := s.send(ctx, "/v1/jobs:batch", body, http.StatusOK)
	if err != nil {
		return nil, nil, err
	}
	var answer struct {
		Results []struct {
			Status   int `json:"status"`
			Accepted *struct {
				JobID string `json:"jobId"`
			} `json:"accepted"`
			Error json.RawMessage `json:"error"`
		} `json:"results"`
	}
	if err := json.Unmarshal(data, &answer); err != nil || len(answer.Results) != len(jobs) {
		return nil, nil, fmt.Errorf("submitting to /v1/jobs:batch: an answer without a result per job: %s", data)
	}
	ids, errs := make([]string, len(jobs)), make([]error, len(jobs))
	for i, res := range answer.Results {
		if res.Status == http.StatusAccepted && res.Accepted != nil && res.Accepted.JobID != "" {
			ids[i] = res.Accepted.JobID
			continue
		}
		errs[i] = fmt.Errorf("submitting to /v1/jobs:batch: job %d: %d: %s", i, res.Status, res.Error)
	}
	return ids, errs, nil
}

func (s *httpSubmitter) close() { s.client.CloseIdleConnections() }

// kafkaSubmitter produces job records straight to the jobs topic, as any
// producer may, with ingest's producer settings (acks from all in-sync
// replicas).
type kafkaSubmitter struct {
	topic string
	cl    *kgo.Client
}

func newKafkaSubmitter(cfg kafka.Config, topic string) (*kafkaSubmitter, error) {
	cl, err := kafka.NewClient(cfg, nil, ingest.ProducerOptions()...)
	if err != nil {
		return nil, err
	}
	return &kafkaSubmitter{topic: topic, cl: cl}, nil
}

func (s *kafkaSubmitter) create(ctx context.Context, documentID string) (string, error) {
	return s.produce(ctx, &record.Job{Kind: record.KindCreate, DocumentID: documentID, DocumentType: jsondoc.DocumentType})
}

func (s *kafkaSubmitter) mutate(ctx context.Context, documentID string, inputs []json.RawMessage) (string, error) {
	job := &record.Job{Kind: record.KindMutate, DocumentID: documentID, DocumentType: jsondoc.DocumentType}
	now := time.Now().UnixMilli()
	for _, in := range inputs {
		job.Actions = append(job.Actions, oplog.Action{Type: jsondoc.ActionMergePatch, Scope: oplog.ScopeGlobal, TimestampUtcMs: now, Input: in})
	}
	return s.produce(ctx, job)
}

func (s *kafkaSubmitter) produce(ctx context.Context, job *record.Job) (string, error) {
	job.JobID = uuid.Must(uuid.NewV7()).String()
	job.SubmittedAtUtcMs = time.Now().UnixMilli()
	for i := range job.Actions {
		job.Actions[i].ID = ingest.ActionID(job.JobID, i)
	}
	rec, err := record.NewJobRecord(s.topic, job)
	if err != nil {
		return "", fmt.Errorf("encoding job %s: %w", job.JobID, err)
	}
	if err := s.cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return "", fmt.Errorf("producing job %s: %w", job.JobID, err)
	}
	return job.JobID, nil
}

func (s *kafkaSubmitter) close() { s.cl.Close() }

// batcherSubmitter submits each mutate job through the client package's
// Batcher, which gathers the jobs the documents submit while its requests
// are in flight into one POST /v1/jobs:batch; creations go as
// httpSubmitter sends them. The client makes one attempt of each request,
// so a 429 reaches the load loop as a refusal, counted and waited out as
// for a job sent alone.
type batcherSubmitter struct {
	*httpSubmitter
	b *client.Batcher
}

func newBatcherSubmitter(h *httpSubmitter, maxJobs int) (*batcherSubmitter, error) {
	c, err := client.New(client.Config{IngestURL: h.base, WriteToken: h.token, HTTPClient: h.client, MaxAttempts: 1})
	if err != nil {
		return nil, fmt.Errorf("creating the ingest client: %w", err)
	}
	b, err := c.NewBatcher(client.BatcherConfig{MaxJobs: maxJobs})
	if err != nil {
		return nil, fmt.Errorf("creating the batcher: %w", err)
	}
	return &batcherSubmitter{httpSubmitter: h, b: b}, nil
}

func (s *batcherSubmitter) mutate(ctx context.Context, documentID string, inputs []json.RawMessage) (string, error) {
	acc, err := s.b.Submit(ctx, client.Job{DocumentID: documentID, DocumentType: jsondoc.DocumentType, Actions: mergePatches(inputs)})
	if e := client.AsAPIError(err); e != nil && e.StatusCode == http.StatusTooManyRequests {
		return "", &refusal{path: "/v1/jobs:batch", retryAfter: orOneSecond(e.RetryAfter), body: e.Message}
	}
	if err != nil {
		return "", fmt.Errorf("submitting to /v1/jobs:batch: %w", err)
	}
	return acc.JobID, nil
}

func (s *batcherSubmitter) close() {
	s.b.Close()
	s.httpSubmitter.close()
}
