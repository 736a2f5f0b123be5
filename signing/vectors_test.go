package signing_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/record"
	"github.com/doclog/doclog/signing"
)

// vector is one entry of testdata/ed25519-vectors.json, which
// testdata/gen_vectors.py wrote with an implementation of its own (Python's,
// libsodium's Ed25519).
type vector struct {
	Name            string          `json:"name"`
	Seed            string          `json:"seed"`
	PublicKey       string          `json:"publicKey"`
	KeyID           string          `json:"keyId"`
	DocumentID      string          `json:"documentId"`
	DocumentType    string          `json:"documentType"`
	Branch          string          `json:"branch"`
	Action          json.RawMessage `json:"action"`
	Canonical       string          `json:"canonical"`
	CanonicalBase64 string          `json:"canonicalBase64"`
	Signature       string          `json:"signature"`
}

func (v *vector) subject(t *testing.T) signing.Subject {
	t.Helper()
	var a oplog.Action
	require.NoError(t, json.Unmarshal(v.Action, &a))
	return signing.Subject{DocumentID: v.DocumentID, DocumentType: v.DocumentType, Action: &a}
}

func (v *vector) key(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	seed, err := hex.DecodeString(v.Seed)
	require.NoError(t, err)
	return ed25519.NewKeyFromSeed(seed)
}

func loadVectors(t *testing.T) []vector {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "ed25519-vectors.json"))
	require.NoError(t, err)
	var f struct {
		Purpose string   `json:"purpose"`
		Vectors []vector `json:"vectors"`
	}
	require.NoError(t, json.Unmarshal(data, &f))
	require.Equal(t, signing.Purpose, f.Purpose)
	require.GreaterOrEqual(t, len(f.Vectors), 3)
	return f.Vectors
}

// TestVectors reproduces every vector byte for byte: the public key from the
// seed, the canonical form from the action and its document, the signature
// (Ed25519 is deterministic), and the verification of the signature the
// vector's action carries.
func TestVectors(t *testing.T) {
	t.Parallel()
	for _, v := range loadVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			t.Parallel()
			priv := v.key(t)
			pub := priv.Public().(ed25519.PublicKey)
			require.Equal(t, v.PublicKey, base64.StdEncoding.EncodeToString(pub))

			s := v.subject(t)
			got, err := signing.Canonical(s)
			require.NoError(t, err)
			want, err := base64.StdEncoding.DecodeString(v.CanonicalBase64)
			require.NoError(t, err)
			require.Equal(t, string(want), string(got))
			require.Equal(t, v.Canonical, string(got))

			require.Equal(t, v.Signature, base64.StdEncoding.EncodeToString(ed25519.Sign(priv, got)))
			sig, err := signing.Sign(s, v.KeyID, priv)
			require.NoError(t, err)
			require.Equal(t, &oplog.Signature{KeyID: v.KeyID, Algorithm: signing.AlgorithmEd25519, Value: v.Signature}, sig)
			require.Equal(t, sig, s.Action.Signature)

			keys, err := signing.NewKeySet(signing.Key{ID: v.KeyID, Algorithm: signing.AlgorithmEd25519, Public: pub})
			require.NoError(t, err)
			require.NoError(t, signing.Verify(keys, signing.Required, s))
		})
	}
}

// TestVectorsThroughAJobRecord decodes each vector's action as part of a job
// record, as the executor reads it from the topic, and verifies the job, on
// its branch and on another.
func TestVectorsThroughAJobRecord(t *testing.T) {
	t.Parallel()
	for _, v := range loadVectors(t) {
		branch := v.Branch
		if branch == "" {
			branch = oplog.DefaultBranch
		}
		value, err := json.Marshal(map[string]any{
			"schema": record.SchemaJobV1, "jobId": "01938f1e-7c2a-7b3e-9d4f-5a6b7c8d9e0f", "kind": "mutate",
			"documentId": v.DocumentID, "documentType": v.DocumentType, "branch": branch,
			"actions": []json.RawMessage{v.Action},
		})
		require.NoError(t, err)
		job, err := record.ParseJob(value)
		require.NoError(t, err, v.Name)
		keys, err := signing.NewKeySet(signing.Key{ID: v.KeyID, Algorithm: signing.AlgorithmEd25519, Public: v.key(t).Public().(ed25519.PublicKey)})
		require.NoError(t, err)
		ver, err := signing.NewVerifier(keys, signing.Policies{Default: signing.Required})
		require.NoError(t, err)
		require.NoError(t, ver.VerifyJob(job), v.Name)
		// Encoded again (as the executor stores and announces it), the
		// action still verifies.
		again, err := record.ParseJob(job.AppendJSON(nil))
		require.NoError(t, err)
		require.NoError(t, ver.VerifyJob(again), v.Name)
		// The branch is not covered: a fork or a promote copies a
		// document's operations, signatures and all, to another branch.
		again.Branch = "draft"
		require.NoError(t, ver.VerifyJob(again), v.Name)
		// The document is.
		again.DocumentID += "-copy"
		require.Error(t, ver.VerifyJob(again), v.Name)
	}
}

// TestVectorRefusals changes one thing at a time in each vector and checks
// the refusal and its reason.
func TestVectorRefusals(t *testing.T) {
	t.Parallel()
	vs := loadVectors(t)
	var all []signing.Key
	for _, v := range vs {
		all = append(all, signing.Key{ID: v.KeyID, Algorithm: signing.AlgorithmEd25519, Public: v.key(t).Public().(ed25519.PublicKey)})
	}
	keys, err := signing.NewKeySet(all...)
	require.NoError(t, err)
	for n, v := range vs {
		other := vs[(n+1)%len(vs)]
		for _, tc := range []struct {
			name   string
			change func(s *signing.Subject)
			reason signing.Reason
		}{
			{"tampered input", func(s *signing.Subject) { s.Action.Input = json.RawMessage(`{"amount":1200}`) }, signing.ReasonMismatch},
			{"input whitespace only", func(s *signing.Subject) {
				if len(s.Action.Input) > 0 {
					var b bytes.Buffer
					require.NoError(t, json.Indent(&b, s.Action.Input, "", "  "))
					s.Action.Input = b.Bytes()
				}
			}, ""},
			{"context changed", func(s *signing.Subject) { s.Action.Context = json.RawMessage(`{"relay":"r1"}`) }, ""},
			{"tampered timestamp", func(s *signing.Subject) { s.Action.TimestampUtcMs ^= 1 }, signing.ReasonMismatch},
			{"tampered type", func(s *signing.Subject) { s.Action.Type += "X" }, signing.ReasonMismatch},
			{"tampered scope", func(s *signing.Subject) { s.Action.Scope = "other" }, signing.ReasonMismatch},
			{"tampered action id", func(s *signing.Subject) { s.Action.ID += "-2" }, signing.ReasonMismatch},
			{"another document", func(s *signing.Subject) { s.DocumentID += "-2" }, signing.ReasonMismatch},
			{"another document type", func(s *signing.Subject) { s.DocumentType += "-2" }, signing.ReasonMismatch},
			{"another signer's key id", func(s *signing.Subject) { s.Action.Signature.KeyID = other.KeyID }, signing.ReasonMismatch},
			{"unknown key id", func(s *signing.Subject) { s.Action.Signature.KeyID = "nobody" }, signing.ReasonUnknownKey},
			{"wrong algorithm", func(s *signing.Subject) { s.Action.Signature.Algorithm = "ed448" }, signing.ReasonAlgorithm},
			{"algorithm in capitals", func(s *signing.Subject) { s.Action.Signature.Algorithm = "Ed25519" }, signing.ReasonAlgorithm},
			{"signature cut short", func(s *signing.Subject) {
				raw, _ := base64.StdEncoding.DecodeString(s.Action.Signature.Value)
				s.Action.Signature.Value = base64.StdEncoding.EncodeToString(raw[:63])
			}, signing.ReasonMalformed},
			{"signature not base64", func(s *signing.Subject) { s.Action.Signature.Value = "not base64!" }, signing.ReasonMalformed},
			{"one bit of the signature flipped", func(s *signing.Subject) {
				raw, _ := base64.StdEncoding.DecodeString(s.Action.Signature.Value)
				raw[10] ^= 1
				s.Action.Signature.Value = base64.StdEncoding.EncodeToString(raw)
			}, signing.ReasonMismatch},
			{"unsigned", func(s *signing.Subject) { s.Action.Signature = nil }, signing.ReasonMissing},
			{"integer beyond 2^53", func(s *signing.Subject) { s.Action.Input = json.RawMessage(`{"n":9007199254740993}`) }, signing.ReasonUnsignable},
		} {
			s := v.subject(t)
			tc.change(&s)
			err := signing.Verify(keys, signing.Required, s)
			if tc.reason == "" {
				require.NoError(t, err, "%s: %s", v.Name, tc.name)
				continue
			}
			var se *signing.Error
			require.ErrorAs(t, err, &se, "%s: %s", v.Name, tc.name)
			require.Equal(t, tc.reason, se.Reason, "%s: %s: %v", v.Name, tc.name, err)
			require.Equal(t, signing.ErrorName, oplog.ErrorName(err))
			require.Equal(t, "SIGNATURE_INVALID", oplog.ErrorName(err))
		}
	}
}
