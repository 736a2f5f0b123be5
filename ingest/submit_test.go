package ingest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/doclog/doclog/ingest"
	"github.com/doclog/doclog/internal/testenv"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/record"
)

// kafkaBundle is a test's own jobs topic on the real broker and a producer
// built the way a deployment builds it.
type kafkaBundle struct {
	env      *testenv.KafkaEnv
	topic    string
	producer *kgo.Client
}

func setupKafka(t *testing.T) *kafkaBundle {
	t.Helper()
	env := testenv.Kafka(t)
	names := env.CreateTopics()
	return &kafkaBundle{env: env, topic: names.Jobs, producer: env.Client(ingest.ProducerOptions()...)}
}

// endOffsets sums the jobs topic's high watermarks. A broker may not know
// every partition's leader a moment after the topic was created, so a
// partition error is retried for a while.
func (b *kafkaBundle) endOffsets(t *testing.T) int64 {
	t.Helper()
	adm := b.env.Admin()
	var (
		offsets kadm.ListedOffsets
		err     error
	)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		offsets, err = adm.ListEndOffsets(testCtx(t), b.topic)
		if err == nil {
			err = offsets.Error()
		}
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	require.NoError(t, err)
	var sum int64
	offsets.Each(func(o kadm.ListedOffset) { sum += o.Offset })
	return sum
}

// readRecords consumes the jobs topic from the start until it has n records.
func (b *kafkaBundle) readRecords(t *testing.T, n int) []*kgo.Record {
	t.Helper()
	cl := b.env.Client(kgo.ConsumeTopics(b.topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx := testCtx(t)
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d of %d records", len(out), n)
		fs.EachError(func(_ string, _ int32, err error) { require.NoError(t, err) })
		out = append(out, fs.Records()...)
	}
	require.Len(t, out, n)
	return out
}

func decodeOne(t *testing.T, recs []*kgo.Record, jobID string) (*kgo.Record, *record.Job) {
	t.Helper()
	for _, r := range recs {
		j, err := record.DecodeJob(r)
		require.NoError(t, err)
		if j.JobID == jobID {
			return r, j
		}
	}
	t.Fatalf("no record of job %s", jobID)
	return nil, nil
}

func requireSameJob(t *testing.T, want, got *record.Job) {
	t.Helper()
	w, err := want.MarshalJSON()
	require.NoError(t, err)
	g, err := got.MarshalJSON()
	require.NoError(t, err)
	require.JSONEq(t, string(w), string(g))
}

func accepted(t *testing.T, res response) (jobID, documentID string) {
	t.Helper()
	require.Equal(t, http.StatusAccepted, res.status, "body: %s", res.body)
	m := res.json(t)
	require.Equal(t, "PENDING", m["status"])
	jobID = m["jobId"].(string)
	require.Equal(t, "/v1/jobs/"+jobID, m["statusUrl"])
	require.Equal(t, "/v1/jobs/"+jobID, res.header.Get("Location"))
	return jobID, m["documentId"].(string)
}

func TestSubmitThroughHTTPProducesTheJob(t *testing.T) {
	t.Parallel()
	kb := setupKafka(t)
	h := newHandler(t, ingest.Config{JobsTopic: kb.topic}, ingest.Deps{Producer: kb.producer})
	dep := "01938f1e-7c2a-7b3e-9d4f-5a6b7c8d9e0f"

	before := time.Now().UnixMilli()
	mutate := request{method: "POST", path: "/v1/jobs", body: `{
		"documentId": "doc-1", "documentType": "doclog/ledger", "branch": "main",
		"actions": [
			{"id": "a1", "type": "OPEN_ACCOUNT", "scope": "global", "timestampUtcMs": 1764460800000, "input": {"accountId": "acc", "initialBalance": 5}},
			{"type": "DEPOSIT", "scope": "global", "input": {"accountId": "acc", "amount": 7}, "context": {"user": "ana"}},
			{"type": "SET_NAME", "scope": "document", "input": {"name": "Q4"}}
		],
		"queueHint": ["` + dep + `"], "maxRetries": 3, "meta": {"traceId": "t1"}}`}
	checkRequestSpec(t, mutate)
	mutateID, docID := accepted(t, do(t, h, mutate))
	require.Equal(t, "doc-1", docID)

	create := request{method: "POST", path: "/v1/documents", body: `{"documentType": "doclog/ledger", "name": "Accounts", "slug": "accounts",
		"actions": [{"type": "OPEN_ACCOUNT", "scope": "global", "input": {"accountId": "x"}}]}`}
	checkRequestSpec(t, create)
	createID, createdDoc := accepted(t, do(t, h, create))

	del := request{method: "DELETE", path: "/v1/documents/doc-1?documentType=doclog/ledger"}
	checkRequestSpec(t, del)
	deleteID, deletedDoc := accepted(t, do(t, h, del))
	require.Equal(t, "doc-1", deletedDoc)
	after := time.Now().UnixMilli()

	recs := kb.readRecords(t, 3)

	rec, got := decodeOne(t, recs, mutateID)
	require.Equal(t, "doc-1", string(rec.Key), "jobs are keyed by document")
	require.Equal(t, record.SchemaJobV1, record.SchemaOf(rec))
	require.GreaterOrEqual(t, got.SubmittedAtUtcMs, before)
	require.LessOrEqual(t, got.SubmittedAtUtcMs, after)
	now := got.SubmittedAtUtcMs
	requireSameJob(t, &record.Job{
		JobID: mutateID, Kind: record.KindMutate, DocumentID: "doc-1", DocumentType: "doclog/ledger", Branch: "main",
		Actions: []oplog.Action{
			{ID: "a1", Type: "OPEN_ACCOUNT", Scope: "global", TimestampUtcMs: 1764460800000, Input: json.RawMessage(`{"accountId":"acc","initialBalance":5}`)},
			{ID: ingest.ActionID(mutateID, 1), Type: "DEPOSIT", Scope: "global", TimestampUtcMs: now, Input: json.RawMessage(`{"accountId":"acc","amount":7}`), Context: json.RawMessage(`{"user":"ana"}`)},
			{ID: ingest.ActionID(mutateID, 2), Type: "SET_NAME", Scope: "document", TimestampUtcMs: now, Input: json.RawMessage(`{"name":"Q4"}`)},
		},
		QueueHint: []string{dep}, MaxRetries: ptr(3), Meta: json.RawMessage(`{"traceId":"t1"}`), SubmittedAtUtcMs: now,
	}, got)

	rec, got = decodeOne(t, recs, createID)
	require.Equal(t, createdDoc, string(rec.Key))
	require.Equal(t, uint8(7), uuidVersion(t, createdDoc), "a created document without an id gets a UUIDv7")
	now = got.SubmittedAtUtcMs
	requireSameJob(t, &record.Job{
		JobID: createID, Kind: record.KindCreate, DocumentID: createdDoc, DocumentType: "doclog/ledger", Branch: "main",
		Actions: []oplog.Action{
			{ID: ingest.ActionID(createID, 0), Type: model.ActionSetName, Scope: "document", TimestampUtcMs: now, Input: json.RawMessage(`{"name":"Accounts"}`)},
			{ID: ingest.ActionID(createID, 1), Type: model.ActionSetSlug, Scope: "document", TimestampUtcMs: now, Input: json.RawMessage(`{"slug":"accounts"}`)},
			{ID: ingest.ActionID(createID, 2), Type: "OPEN_ACCOUNT", Scope: "global", TimestampUtcMs: now, Input: json.RawMessage(`{"accountId":"x"}`)},
		},
		SubmittedAtUtcMs: now,
	}, got)

	rec, got = decodeOne(t, recs, deleteID)
	require.Equal(t, "doc-1", string(rec.Key))
	requireSameJob(t, &record.Job{
		JobID: deleteID, Kind: record.KindDelete, DocumentID: "doc-1", DocumentType: "doclog/ledger", Branch: "main",
		Actions: []oplog.Action{}, SubmittedAtUtcMs: got.SubmittedAtUtcMs,
	}, got)
	for _, id := range []string{mutateID, createID, deleteID} {
		require.Equal(t, uint8(7), uuidVersion(t, id), "job ids are UUIDv7")
	}
}

func TestIdempotencyKeyIsOneJob(t *testing.T) {
	t.Parallel()
	kb := setupKafka(t)
	h := newHandler(t, ingest.Config{JobsTopic: kb.topic}, ingest.Deps{Producer: kb.producer})

	post := func(key, body string) (string, string) {
		return accepted(t, do(t, h, request{method: "POST", path: "/v1/jobs", body: body, header: map[string]string{"Idempotency-Key": key}}))
	}
	body := `{"documentId": "doc-i", "documentType": "doclog/ledger", "actions": [{"type": "DEPOSIT", "scope": "global", "input": {"accountId": "a", "amount": 1}}]}`
	first, _ := post("retry-1", body)
	second, _ := post("retry-1", body)
	require.Equal(t, first, second, "a retry with the same key is the same job")
	require.Equal(t, model.JobIDFromIdempotencyKey("retry-1"), first)
	other, _ := post("retry-2", body)
	require.NotEqual(t, first, other)

	// A create without a document id keeps its document across retries.
	create := request{method: "POST", path: "/v1/documents", body: `{"documentType": "doclog/json"}`, header: map[string]string{"Idempotency-Key": "create-1"}}
	c1, d1 := accepted(t, do(t, h, create))
	c2, d2 := accepted(t, do(t, h, create))
	require.Equal(t, c1, c2)
	require.Equal(t, d1, d2, "the retried create names the same document")
	require.Equal(t, ingest.DocumentIDFromJob(c1), d1)

	recs := kb.readRecords(t, 5)
	var sameJob, sameAction int
	for _, r := range recs {
		j, err := record.DecodeJob(r)
		require.NoError(t, err)
		if j.JobID == first {
			sameJob++
			if j.Actions[0].ID == ingest.ActionID(first, 0) {
				sameAction++
			}
		}
	}
	require.Equal(t, 2, sameJob, "both submissions reached the topic as the same job")
	require.Equal(t, 2, sameAction, "with the same derived action ids")
}

func TestValidationFailuresProduceNothing(t *testing.T) {
	t.Parallel()
	kb := setupKafka(t)
	h := newHandler(t, ingest.Config{
		JobsTopic: kb.topic, BearerTokens: []string{"tok-a", "tok-b"},
		MaxBodyBytes: 4096, MaxActionsPerJob: 3, MaxInputBytes: 128,
	}, ingest.Deps{Producer: kb.producer})
	start := kb.endOffsets(t)

	auth := map[string]string{"Authorization": "Bearer tok-b"}
	job := func(actions string) string {
		return `{"documentId": "doc-v", "documentType": "doclog/ledger", "actions": [` + actions + `]}`
	}
	deposit := `{"type": "DEPOSIT", "scope": "global", "input": {"accountId": "a", "amount": 1}}`
	tests := []struct {
		name    string
		req     request
		status  int
		code    string
		field   string
		message string
	}{
		{"body too large", request{method: "POST", path: "/v1/jobs", body: `{"documentId": "doc-v", "documentType": "doclog/ledger", "meta": {"pad": "` + strings.Repeat("x", 5000) + `"}, "actions": [` + deposit + `]}`},
			413, ingest.CodeBodyTooLarge, "", "request body exceeds the limit of 4096 bytes"},
		{"too many actions", request{method: "POST", path: "/v1/jobs", body: job(strings.Repeat(deposit+",", 3) + deposit)},
			413, ingest.CodeTooManyActions, "actions", "actions: 4 actions, more than the 3 a job may have"},
		{"create's name counts as an action", request{method: "POST", path: "/v1/documents", body: `{"documentType": "doclog/ledger", "name": "n", "actions": [` + strings.Repeat(deposit+",", 2) + deposit + `]}`},
			413, ingest.CodeTooManyActions, "actions", "4 actions"},
		{"input too large", request{method: "POST", path: "/v1/jobs", body: job(deposit + `, {"type": "TRANSFER", "scope": "global", "input": {"fromAccountId": "a", "toAccountId": "b", "amount": 1, "memo": "` + strings.Repeat("m", 200) + `"}}`)},
			413, ingest.CodeInputTooLarge, "actions[1].input", "bytes, more than the 128 an action's input may have"},
		{"unknown document type", request{method: "POST", path: "/v1/jobs", body: `{"documentId": "d", "documentType": "doclog/nope", "actions": [` + deposit + `]}`},
			422, ingest.CodeUnknownDocumentType, "documentType", `documentType: "doclog/nope" is not a registered document type (known: doclog/drive, doclog/json, doclog/ledger)`},
		{"unknown action", request{method: "POST", path: "/v1/jobs", body: job(deposit + `, {"type": "FLY", "scope": "global"}`)},
			422, ingest.CodeUnknownAction, "actions[1].type", `actions[1].type: "FLY" is not an action of doclog/ledger v1`},
		{"create is not an action", request{method: "POST", path: "/v1/jobs", body: job(`{"type": "CREATE_DOCUMENT", "scope": "document"}`)},
			422, ingest.CodeUnknownAction, "actions[0].type", "use POST /v1/documents"},
		{"delete is not an action", request{method: "POST", path: "/v1/jobs", body: job(`{"type": "DELETE_DOCUMENT", "scope": "document"}`)},
			422, ingest.CodeUnknownAction, "actions[0].type", "use DELETE /v1/documents/{id}"},
		{"wrong scope", request{method: "POST", path: "/v1/jobs", body: job(`{"type": "DEPOSIT", "scope": "local", "input": {"accountId": "a", "amount": 1}}`)},
			422, ingest.CodeInvalidScope, "actions[0].scope", `actions[0].scope: DEPOSIT applies to scope global, not "local"`},
		{"system action in a model scope", request{method: "POST", path: "/v1/jobs", body: job(`{"type": "SET_NAME", "scope": "global", "input": {"name": "n"}}`)},
			422, ingest.CodeInvalidScope, "actions[0].scope", `SET_NAME applies to scope document, not "global"`},
		{"input of the wrong type", request{method: "POST", path: "/v1/jobs", body: job(deposit + "," + deposit + `, {"type": "DEPOSIT", "scope": "global", "input": {"accountId": "a", "amount": "12"}}`)},
			422, ingest.CodeInvalidInput, "actions[2].input.amount", "actions[2].input.amount: must be an integer, not string"},
		{"input the model refuses", request{method: "POST", path: "/v1/jobs", body: job(`{"type": "DEPOSIT", "scope": "global", "input": {"accountId": "a", "amount": -5}}`)},
			422, ingest.CodeInvalidInput, "actions[0].input", "actions[0].input: amount must be a positive integer, not -5"},
		{"input with an unknown field", request{method: "POST", path: "/v1/jobs", body: job(`{"type": "DEPOSIT", "scope": "global", "input": {"accountId": "a", "amount": 1, "colour": "red"}}`)},
			422, ingest.CodeInvalidInput, "actions[0].input", `unknown field "colour"`},
		{"missing input", request{method: "POST", path: "/v1/jobs", body: job(`{"type": "DEPOSIT", "scope": "global"}`)},
			422, ingest.CodeInvalidInput, "actions[0].input", "actions[0].input: accountId is required"},
		{"missing documentId", request{method: "POST", path: "/v1/jobs", body: `{"documentType": "doclog/ledger", "actions": [` + deposit + `]}`},
			422, ingest.CodeInvalidField, "documentId", "documentId: required"},
		{"missing documentType", request{method: "POST", path: "/v1/jobs", body: `{"documentId": "d", "actions": [` + deposit + `]}`},
			422, ingest.CodeInvalidField, "documentType", "documentType: required"},
		{"missing actions", request{method: "POST", path: "/v1/jobs", body: `{"documentId": "d", "documentType": "doclog/ledger"}`},
			422, ingest.CodeInvalidField, "actions", "actions: required: a job needs at least one action"},
		{"missing action type", request{method: "POST", path: "/v1/jobs", body: job(deposit + `, {"scope": "global"}`)},
			422, ingest.CodeInvalidField, "actions[1].type", "actions[1].type: required"},
		{"missing action scope", request{method: "POST", path: "/v1/jobs", body: job(`{"type": "DEPOSIT"}`)},
			422, ingest.CodeInvalidField, "actions[0].scope", "actions[0].scope: required"},
		{"empty branch", request{method: "POST", path: "/v1/jobs", body: `{"documentId": "d", "documentType": "doclog/ledger", "branch": "", "actions": [` + deposit + `]}`},
			422, ingest.CodeInvalidField, "branch", "branch: empty; leave it out for main"},
		{"duplicate action ids", request{method: "POST", path: "/v1/jobs", body: job(`{"id": "x", "type": "DEPOSIT", "scope": "global", "input": {"accountId": "a", "amount": 1}}, {"id": "x", "type": "DEPOSIT", "scope": "global", "input": {"accountId": "a", "amount": 1}}`)},
			422, ingest.CodeInvalidField, "actions[1].id", `actions[1].id: "x" repeats the id of actions[0]`},
		{"negative timestamp", request{method: "POST", path: "/v1/jobs", body: job(`{"type": "DEPOSIT", "scope": "global", "timestampUtcMs": -1, "input": {"accountId": "a", "amount": 1}}`)},
			422, ingest.CodeInvalidField, "actions[0].timestampUtcMs", "actions[0].timestampUtcMs: must not be negative"},
		{"context not an object", request{method: "POST", path: "/v1/jobs", body: job(`{"type": "DEPOSIT", "scope": "global", "context": [1], "input": {"accountId": "a", "amount": 1}}`)},
			422, ingest.CodeInvalidField, "actions[0].context", "actions[0].context: must be a JSON object"},
		{"meta not an object", request{method: "POST", path: "/v1/jobs", body: `{"documentId": "d", "documentType": "doclog/ledger", "meta": "m", "actions": [` + deposit + `]}`},
			422, ingest.CodeInvalidField, "meta", "meta: must be a JSON object"},
		{"maxRetries out of range", request{method: "POST", path: "/v1/jobs", body: `{"documentId": "d", "documentType": "doclog/ledger", "maxRetries": 5000, "actions": [` + deposit + `]}`},
			422, ingest.CodeInvalidField, "maxRetries", "maxRetries: 5000 is outside 0..1000"},
		{"queueHint not a job id", request{method: "POST", path: "/v1/jobs", body: `{"documentId": "d", "documentType": "doclog/ledger", "queueHint": ["nope"], "actions": [` + deposit + `]}`},
			422, ingest.CodeInvalidField, "queueHint[0]", `queueHint[0]: "nope" is not a UUID`},
		{"malformed JSON", request{method: "POST", path: "/v1/jobs", body: `{"documentId": "d",`},
			400, ingest.CodeMalformedJSON, "", "malformed JSON"},
		{"malformed JSON in an action", request{method: "POST", path: "/v1/jobs", body: `{"documentId": "d", "actions": [{"type": }]}`},
			400, ingest.CodeMalformedJSON, "", "malformed JSON at byte"},
		{"not an object", request{method: "POST", path: "/v1/jobs", body: `[1, 2]`},
			400, ingest.CodeMalformedJSON, "", "the request body must be a JSON object, not array"},
		{"empty body", request{method: "POST", path: "/v1/jobs", body: ` `},
			400, ingest.CodeMalformedJSON, "", "the request body is empty"},
		{"field of the wrong JSON type", request{method: "POST", path: "/v1/jobs", body: `{"documentId": 5, "documentType": "doclog/ledger", "actions": [` + deposit + `]}`},
			400, ingest.CodeMalformedJSON, "documentId", "documentId: must be a string, not number"},
		{"action of the wrong JSON type", request{method: "POST", path: "/v1/jobs", body: job(deposit + `, "DEPOSIT"`)},
			400, ingest.CodeMalformedJSON, "actions[1]", "actions[1]: must be an object, not string"},
		{"action field of the wrong JSON type", request{method: "POST", path: "/v1/jobs", body: job(`{"type": "DEPOSIT", "scope": "global", "timestampUtcMs": "now"}`)},
			400, ingest.CodeMalformedJSON, "actions[0].timestampUtcMs", "actions[0].timestampUtcMs: must be an integer, not string"},
		{"unknown field", request{method: "POST", path: "/v1/jobs", body: `{"documentId": "d", "colour": "red", "documentType": "doclog/ledger", "actions": [` + deposit + `]}`},
			400, ingest.CodeMalformedJSON, "colour", "colour: unknown field"},
		{"unknown field in an action", request{method: "POST", path: "/v1/jobs", body: job(deposit + `, {"type": "DEPOSIT", "scope": "global", "colour": "red"}`)},
			400, ingest.CodeMalformedJSON, "actions[1].colour", "actions[1].colour: unknown field"},
		{"wrong content type", request{method: "POST", path: "/v1/jobs", body: job(deposit), header: map[string]string{"Content-Type": "text/plain"}},
			415, ingest.CodeUnsupportedMedia, "Content-Type", "Content-Type: text/plain is not application/json"},
		{"missing content type", request{method: "POST", path: "/v1/documents", body: `{"documentType": "doclog/json"}`, header: map[string]string{"Content-Type": ""}},
			415, ingest.CodeUnsupportedMedia, "Content-Type", "Content-Type: none is not application/json"},
		{"missing bearer token", request{method: "POST", path: "/v1/jobs", body: job(deposit), header: map[string]string{"Authorization": ""}},
			401, ingest.CodeUnauthorized, "Authorization", "a bearer token is required"},
		{"bad bearer token", request{method: "POST", path: "/v1/jobs", body: job(deposit), header: map[string]string{"Authorization": "Bearer tok-c"}},
			401, ingest.CodeUnauthorized, "Authorization", "the bearer token is not valid"},
		{"not a bearer token", request{method: "POST", path: "/v1/jobs", body: job(deposit), header: map[string]string{"Authorization": "Basic dG9rLWE6"}},
			401, ingest.CodeUnauthorized, "Authorization", "a bearer token is required"},
		{"status needs a token too", request{method: "GET", path: "/v1/jobs/01938f1e-7c2a-7b3e-9d4f-5a6b7c8d9e0f", header: map[string]string{"Authorization": ""}},
			401, ingest.CodeUnauthorized, "Authorization", "a bearer token is required"},
		{"idempotency key too long", request{method: "POST", path: "/v1/jobs", body: job(deposit), header: map[string]string{"Idempotency-Key": strings.Repeat("k", 300)}},
			400, ingest.CodeInvalidField, "Idempotency-Key", "Idempotency-Key: must be one header of 1 to 256 bytes"},
		{"bad slug", request{method: "POST", path: "/v1/documents", body: `{"documentType": "doclog/json", "slug": "Bad Slug"}`},
			422, ingest.CodeInvalidInput, "slug", `slug: slug "Bad Slug" must be lowercase letters`},
		{"create without a type", request{method: "POST", path: "/v1/documents", body: `{"name": "n"}`},
			422, ingest.CodeInvalidField, "documentType", "documentType: required"},
		{"create with a bad initial action", request{method: "POST", path: "/v1/documents", body: `{"documentType": "doclog/ledger", "actions": [` + deposit + `, {"type": "MERGE_PATCH", "scope": "global"}]}`},
			422, ingest.CodeUnknownAction, "actions[1].type", `"MERGE_PATCH" is not an action of doclog/ledger`},
		{"delete without a type", request{method: "DELETE", path: "/v1/documents/doc-v"},
			422, ingest.CodeInvalidField, "documentType", "documentType: required"},
		{"delete of an unknown type", request{method: "DELETE", path: "/v1/documents/doc-v?documentType=nope"},
			422, ingest.CodeUnknownDocumentType, "documentType", `"nope" is not a registered document type`},
		{"delete with an unknown parameter", request{method: "DELETE", path: "/v1/documents/doc-v?documentType=doclog/json&force=1"},
			400, ingest.CodeInvalidField, "force", "force: unknown query parameter"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.req.header == nil {
				tc.req.header = map[string]string{}
			}
			if _, ok := tc.req.header["Authorization"]; !ok {
				tc.req.header["Authorization"] = auth["Authorization"]
			}
			requireRefused(t, do(t, h, tc.req), tc.status, tc.code, tc.field, tc.message)
		})
	}
	t.Cleanup(func() {
		require.Equal(t, start, kb.endOffsets(t), "a refused request produced a record")
	})
}

func TestAuthAcceptsEveryConfiguredToken(t *testing.T) {
	t.Parallel()
	kb := setupKafka(t)
	h := newHandler(t, ingest.Config{JobsTopic: kb.topic, BearerTokens: []string{"tok-a", "tok-b"}}, ingest.Deps{Producer: kb.producer})
	for _, tok := range []string{"tok-a", "tok-b"} {
		accepted(t, do(t, h, request{method: "POST", path: "/v1/documents", body: `{"documentType": "doclog/json"}`,
			header: map[string]string{"Authorization": "bearer " + tok}}))
	}
	require.Equal(t, int64(2), kb.endOffsets(t))
}

func ptr[T any](v T) *T { return &v }

func uuidVersion(t *testing.T, id string) uint8 {
	t.Helper()
	require.Len(t, id, 36, "not a UUID: %s", id)
	var v uint8
	_, err := fmt.Sscanf(id[14:15], "%x", &v)
	require.NoError(t, err)
	return v
}
