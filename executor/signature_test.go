package executor_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/doclog/doclog/ingest"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/record"
	"github.com/doclog/doclog/signing"
)

// signedStack is a member and an ingest API sharing one verifier: doclog/json
// requires signatures, and one key, k1, is known.
type signedStack struct {
	*bundle
	priv    ed25519.PrivateKey
	other   ed25519.PrivateKey // a key the verifier does not know
	srv     *httptest.Server
	dead    *topicReader
	counter int
}

func setupSigned(t *testing.T) *signedStack {
	t.Helper()
	b := setup(t, 2)
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	other := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{8}, ed25519.SeedSize))
	keys, err := signing.NewKeySet(signing.Key{ID: "k1", Algorithm: signing.AlgorithmEd25519, Public: priv.Public().(ed25519.PublicKey)})
	require.NoError(t, err)
	ver, err := signing.NewVerifier(keys, signing.Policies{Default: signing.Off, ByType: map[string]signing.Policy{jsondoc.DocumentType: signing.Required}})
	require.NoError(t, err)
	s := &signedStack{bundle: b, priv: priv, other: other, dead: b.reader(b.kenv.Names.DeadLetters)}
	cfg := b.config()
	cfg.Signatures = ver
	b.start(cfg)
	h, err := ingest.NewHandler(ingest.Config{JobsTopic: b.kenv.Names.Jobs},
		ingest.Deps{Producer: b.producer, Results: b.store, Registry: b.reg, Signatures: ver})
	require.NoError(t, err)
	t.Cleanup(h.Close)
	s.srv = httptest.NewServer(h)
	t.Cleanup(s.srv.Close)
	return s
}

// action is a doclog/json patch of docID as a JSON object, signed as sign
// says: "good" with k1, "unsigned", "bad" (signed, then its input changed),
// "unknown key" (signed with a key the verifier does not know, under an id
// it does not know either).
func (s *signedStack) action(t *testing.T, docID, sign string) map[string]any {
	t.Helper()
	s.counter++
	a := oplog.Action{ID: uuid.NewString(), Type: jsondoc.ActionMergePatch, Scope: oplog.ScopeGlobal,
		TimestampUtcMs: time.Now().UnixMilli(), Input: json.RawMessage(`{"n":` + strconv.Itoa(s.counter) + `}`)}
	subject := signing.Subject{DocumentID: docID, DocumentType: jsondoc.DocumentType, Action: &a}
	var sig *oplog.Signature
	var err error
	switch sign {
	case "good", "bad":
		sig, err = signing.Sign(subject, "k1", s.priv)
	case "unknown key":
		sig, err = signing.Sign(subject, "k9", s.other)
	}
	require.NoError(t, err)
	out := map[string]any{"id": a.ID, "type": a.Type, "scope": a.Scope, "timestampUtcMs": a.TimestampUtcMs, "input": a.Input}
	if sign == "bad" {
		out["input"] = json.RawMessage(`{"n":-1}`)
	}
	if sig != nil {
		out["signature"] = map[string]any{"keyId": sig.KeyID, "algorithm": sig.Algorithm, "value": sig.Value}
	}
	return out
}

// produceRaw writes a job record as any Kafka producer would: JSON bytes
// made here, the schema header, the document id as the key.
func (s *signedStack) produceRaw(t *testing.T, jobID, kind, docID string, actions ...map[string]any) {
	t.Helper()
	if actions == nil {
		actions = []map[string]any{}
	}
	value, err := json.Marshal(map[string]any{"schema": "doclog.job.v1", "jobId": jobID, "kind": kind,
		"documentId": docID, "documentType": jsondoc.DocumentType, "actions": actions})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, s.producer.ProduceSync(ctx, &kgo.Record{Topic: s.kenv.Names.Jobs, Key: []byte(docID), Value: value,
		Headers: []kgo.RecordHeader{{Key: "doclog-schema", Value: []byte("doclog.job.v1")}}}).FirstErr())
}

// post submits a mutate job through ingest under an Idempotency-Key and
// returns the status, the body and the job id the key derives.
func (s *signedStack) post(t *testing.T, key, docID string, actions ...map[string]any) (int, map[string]any, string) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"documentId": docID, "documentType": jsondoc.DocumentType, "actions": actions})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, s.srv.URL+"/v1/jobs", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out := map[string]any{}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return resp.StatusCode, out, model.JobIDFromIdempotencyKey(key)
}

// TestSignatureRefusals feeds each refusal (an unsigned action under
// required, a bad signature, an unknown key id) on a document of its own,
// once as a raw record and once through ingest: the raw job ends FAILED as
// SIGNATURE_INVALID with a dead letter of that type, ingest answers 400
// signature_invalid naming the field, nothing of either is stored, and good
// signed jobs on the same document then commit, one raw and one through
// ingest, with their signatures stored and read back.
func TestSignatureRefusals(t *testing.T) {
	t.Parallel()
	s := setupSigned(t)
	for _, tc := range []struct {
		sign, field, reason string
	}{
		{"unsigned", "actions[0].signature", "signature missing: document type doclog/json requires every action to be signed"},
		{"bad", "actions[0].signature.value", `signature does not verify: key "k1" did not sign this action`},
		{"unknown key", "actions[0].signature.keyId", `signature unknown key: key "k9" is not in the key set`},
	} {
		// In turn: the subtests share the stack's dead-letter reader.
		t.Run(tc.sign, func(t *testing.T) {
			s.refusal(t, "doc-"+strings.ReplaceAll(tc.sign, " ", "-"), tc.sign, tc.field, tc.reason)
		})
	}
}

func (s *signedStack) refusal(t *testing.T, doc, sign, field, reason string) {
	t.Helper()
	create := uuid.NewString()
	s.produceRaw(t, create, "create", doc)
	require.Equal(t, oplog.JobWriteReady, s.waitResults([]string{create}, 30*time.Second)[create].Status,
		"a create job carries no action of the producer's to sign")

	// Raw: the refused action is the job's second; its first, well signed,
	// is not stored either.
	rawFailed := uuid.NewString()
	s.produceRaw(t, rawFailed, "mutate", doc, s.action(t, doc, "good"), s.action(t, doc, sign))

	key := "refused-" + doc
	status, body, refusedID := s.post(t, key, doc, s.action(t, doc, sign))
	require.Equal(t, http.StatusBadRequest, status, "%v", body)
	e := body["error"].(map[string]any)
	require.Equal(t, ingest.CodeSignatureInvalid, e["code"])
	require.Equal(t, field, e["field"])
	require.Contains(t, e["message"], field+": "+reason)

	res := s.waitResults([]string{rawFailed}, 30*time.Second)[rawFailed]
	require.Equal(t, oplog.JobFailed, res.Status)
	last := res.ErrorHistory[len(res.ErrorHistory)-1]
	require.Equal(t, "SIGNATURE_INVALID", last.Name)
	require.Contains(t, last.Message, strings.Replace(field, "actions[0]", "actions[1]", 1)+": "+reason)
	dl := s.dead.deadLetters(30*time.Second, 1, func(dl *record.DeadLetter) string {
		if dl.Job == nil || dl.Job.JobID != rawFailed {
			return ""
		}
		return dl.Job.JobID
	})[rawFailed]
	require.Equal(t, record.ErrSignatureInvalid, dl.ErrorType)
	require.Equal(t, "SIGNATURE_INVALID", dl.Error.Name)

	// The partition flows on: good signed jobs on the same document commit.
	goodRaw := uuid.NewString()
	rawAction := s.action(t, doc, "good")
	s.produceRaw(t, goodRaw, "mutate", doc, rawAction)
	apiAction := s.action(t, doc, "good")
	status, body, goodAPI := s.post(t, "good-"+doc, doc, apiAction)
	require.Equal(t, http.StatusAccepted, status, "%v", body)
	require.Equal(t, goodAPI, body["jobId"])
	results := s.waitResults([]string{goodRaw, goodAPI}, 30*time.Second)
	require.Equal(t, oplog.JobWriteReady, results[goodRaw].Status, "%v", results[goodRaw].ErrorHistory)
	require.Equal(t, oplog.JobWriteReady, results[goodAPI].Status, "%v", results[goodAPI].ErrorHistory)

	// Nothing of a refused job is in the log, and ingest produced nothing
	// for its refusal: that job id has no result, though jobs after it on
	// the same partition have one.
	global := s.readAll(oplog.StreamKey{DocumentID: doc, Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch})
	require.Len(t, global, 2, "only the two good jobs wrote")
	byJob := map[string]oplog.Operation{}
	for _, op := range global {
		byJob[op.JobID] = op
	}
	require.NotContains(t, byJob, rawFailed)
	stored, err := s.store.JobResults(context.Background(), []string{refusedID})
	require.NoError(t, err)
	require.Empty(t, stored, "ingest produced no job for its refusal")

	// The signatures read back from the log as they were sent, and still
	// verify.
	keys, err := signing.NewKeySet(signing.Key{ID: "k1", Algorithm: signing.AlgorithmEd25519, Public: s.priv.Public().(ed25519.PublicKey)})
	require.NoError(t, err)
	for id, sent := range map[string]map[string]any{goodRaw: rawAction, goodAPI: apiAction} {
		op, ok := byJob[id]
		require.True(t, ok, id)
		want := sent["signature"].(map[string]any)
		require.Equal(t, &oplog.Signature{KeyID: want["keyId"].(string), Algorithm: want["algorithm"].(string), Value: want["value"].(string)}, op.Action.Signature)
		require.NoError(t, signing.Verify(keys, signing.Required, signing.Subject{DocumentID: doc, DocumentType: op.DocumentType, Action: &op.Action}))
	}
}
