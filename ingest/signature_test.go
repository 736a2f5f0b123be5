package ingest_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/ingest"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/signing"
)

// signedAction is a doclog/json patch of doc-1 as a client sends it, signed
// with priv as k1 unless priv is nil.
func signedAction(t *testing.T, priv ed25519.PrivateKey, id string, ts int64) map[string]any {
	t.Helper()
	a := oplog.Action{ID: id, Type: jsondoc.ActionMergePatch, Scope: oplog.ScopeGlobal, TimestampUtcMs: ts, Input: json.RawMessage(`{"a":1}`)}
	out := map[string]any{"id": id, "type": a.Type, "scope": a.Scope, "timestampUtcMs": ts, "input": map[string]any{"a": 1}}
	if priv != nil {
		sig, err := signing.Sign(signing.Subject{DocumentID: "doc-1", DocumentType: jsondoc.DocumentType, Action: &a}, "k1", priv)
		require.NoError(t, err)
		out["signature"] = sig
	}
	return out
}

func body(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// TestSignaturesRefusedEarly: with a verifier, ingest answers 400
// signature_invalid naming the field as the client sent it (a create's name
// and slug are fields, not actions), and passes a good signature on to the
// producer; without one, signatures go on unchecked but must be well formed.
func TestSignaturesRefusedEarly(t *testing.T) {
	t.Parallel()
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{3}, ed25519.SeedSize))
	keys, err := signing.NewKeySet(signing.Key{ID: "k1", Algorithm: signing.AlgorithmEd25519, Public: priv.Public().(ed25519.PublicKey)})
	require.NoError(t, err)
	ver, err := signing.NewVerifier(keys, signing.Policies{ByType: map[string]signing.Policy{jsondoc.DocumentType: signing.Required}})
	require.NoError(t, err)
	// The producer fails every produce: a request it sees (503) passed the
	// check.
	h := newHandler(t, ingest.Config{}, ingest.Deps{Producer: failingProducer{err: errors.New("down")}, Signatures: ver})
	post := func(path string, v any) response {
		return do(t, h, request{method: http.MethodPost, path: path, body: body(t, v), header: map[string]string{"Content-Type": "application/json"}})
	}
	good := signedAction(t, priv, "a-1", 1764460800000)
	job := func(actions ...any) map[string]any {
		return map[string]any{"documentId": "doc-1", "documentType": jsondoc.DocumentType, "actions": actions}
	}

	res := post("/v1/jobs", job(good))
	require.Equal(t, http.StatusServiceUnavailable, res.status, "a good signature reaches the producer: %s", res.body)

	requireRefused(t, post("/v1/jobs", job(good, signedAction(t, nil, "a-2", 1))), http.StatusBadRequest,
		ingest.CodeSignatureInvalid, "actions[1].signature", "signature missing: document type doclog/json requires every action to be signed")

	// Signed over an id and a timestamp the client then left out: ingest
	// picks others, and says so.
	bare := signedAction(t, priv, "a-3", 1764460800000)
	delete(bare, "id")
	delete(bare, "timestampUtcMs")
	requireRefused(t, post("/v1/jobs", job(bare)), http.StatusBadRequest,
		ingest.CodeSignatureInvalid, "actions[0].signature.value", "a signed action names them")

	wrongAlg := signedAction(t, priv, "a-4", 1764460800000)
	wrongAlg["signature"].(*oplog.Signature).Algorithm = "ed448"
	requireRefused(t, post("/v1/jobs", job(wrongAlg)), http.StatusBadRequest,
		ingest.CodeSignatureInvalid, "actions[0].signature.algorithm", `"ed448" is not supported`)

	// A create's name becomes an unsigned SET_NAME action before the
	// client's: refused as the name, and the client's actions keep their
	// own indexes.
	create := job(good)
	create["name"] = "Ledger"
	requireRefused(t, post("/v1/documents", create), http.StatusBadRequest,
		ingest.CodeSignatureInvalid, "name", "send it as a signed action of the job instead")
	create = job(good, signedAction(t, nil, "a-5", 1))
	create["documentId"] = "doc-1"
	requireRefused(t, post("/v1/documents", create), http.StatusBadRequest,
		ingest.CodeSignatureInvalid, "actions[1].signature", "signature missing")

	// A load's actions are its operations': another replica's unsigned
	// CREATE_DOCUMENT passes, its unsigned patch is refused by position.
	loadOp := func(n int, action map[string]any) map[string]any {
		return map[string]any{"opId": "op-" + string(rune('0'+n)), "index": n, "skip": 0, "hash": "aGFzaA==", "action": action}
	}
	createAction := map[string]any{"id": "c0", "type": "CREATE_DOCUMENT", "scope": "document", "timestampUtcMs": 1764460799000,
		"input": map[string]any{"documentType": jsondoc.DocumentType}}
	load := map[string]any{"documentType": jsondoc.DocumentType, "operations": []any{loadOp(0, createAction), loadOp(1, good)}}
	require.Equal(t, http.StatusServiceUnavailable, post("/v1/documents/doc-1/load", load).status, "a signed load reaches the producer")
	load["operations"] = []any{loadOp(0, createAction), loadOp(1, good), loadOp(2, signedAction(t, nil, "a-8", 1764460800001))}
	requireRefused(t, post("/v1/documents/doc-1/load", load), http.StatusBadRequest,
		ingest.CodeSignatureInvalid, "operations[2].action.signature", "signature missing")

	// A type with no policy: nothing is checked.
	other := job(signedAction(t, nil, "a-6", 1))
	other["documentType"] = "doclog/drive"
	other["actions"] = []any{map[string]any{"type": "SET_NAME", "scope": "document", "input": map[string]any{"name": "x"},
		"signature": map[string]any{"keyId": "nobody", "algorithm": "ed25519", "value": "AAAA"}}}
	require.Equal(t, http.StatusServiceUnavailable, post("/v1/jobs", other).status)

	// Without a verifier a bad signature is passed on (the executors
	// decide), but a value that is not base64 breaks the record contract.
	plain := newHandler(t, ingest.Config{}, ingest.Deps{Producer: failingProducer{err: errors.New("down")}})
	bad := signedAction(t, priv, "a-7", 1764460800000)
	bad["input"] = map[string]any{"a": 2}
	res = do(t, plain, request{method: http.MethodPost, path: "/v1/jobs", body: body(t, job(bad)), header: map[string]string{"Content-Type": "application/json"}})
	require.Equal(t, http.StatusServiceUnavailable, res.status, "%s", res.body)
	bad["signature"] = map[string]any{"keyId": "k1", "algorithm": "ed25519", "value": "not base64"}
	res = do(t, plain, request{method: http.MethodPost, path: "/v1/jobs", body: body(t, job(bad)), header: map[string]string{"Content-Type": "application/json"}})
	require.Equal(t, http.StatusUnprocessableEntity, res.status, "%s", res.body)
}
